"""A blob store that fills up during a build (issue 16, "Crash and outage recovery"): the
document fails with a ``BlobStoreFullError`` reason naming the store, the key and what to do;
the failed step left no blob (and no temp file) under its keys; once space is freed ``kb
build`` finishes it with exactly what an uninterrupted build makes.

The full disk is real: ``HOME/blobs`` is a 16 MiB tmpfs mounted in a user and mount namespace
of the build process's own (``unshare -Urm``, no root needed), filled to the last byte from
inside the step under test (``tests/stores/disk_full_build.py``, which runs the scenario and
prints what it saw as JSON). Providers are the fakes of ``tests/fakes.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.stores.test_blob_disk_full import full_message, namespaces_work
from tests.stores.test_outages import HIT_ID, LATER_ID

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not namespaces_work(), reason="needs `unshare -Urm` (user namespaces)"),
]

REPO = Path(__file__).resolve().parents[2]

#: Mount a 16 MiB tmpfs on ``$1/kb/blobs``, then run the driver on ``$1/kb`` and step ``$3``.
MOUNT_AND_BUILD = (
    'mount -t tmpfs -o size=16m kb-blobs "$1/kb/blobs" '
    '&& exec "$2" -m tests.stores.disk_full_build "$1/kb" "$3"'
)


def build_with_full_disk(tmp_path: Path, step: str) -> dict[str, Any]:
    """The driver's report for ``step`` (see ``tests/stores/disk_full_build.py``)."""
    (tmp_path / "kb" / "blobs").mkdir(parents=True)
    done = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", MOUNT_AND_BUILD, "sh", str(tmp_path), sys.executable, step],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_finished_like_a_clean_build(report: dict[str, Any]) -> None:
    """After freeing space: HIT and LATER are built, and every document holds what KEPT's
    uninterrupted build made (counts, vector ids, edges, blob keys)."""
    assert report["kept"] == ["ready", ""]
    assert report["todo"] == [HIT_ID, LATER_ID]
    assert report["finished"] == [[HIT_ID, "ready", ""], [LATER_ID, "ready", ""]]
    assert set(map(json.dumps, report["after"].values())) == {json.dumps(report["before"])}
    assert report["before"][0] == ["ready", None, 3, 2, 1]
    assert report["hit_blobs_after"] == report["clean_blobs"]


def test_the_blob_store_fills_up_while_the_markdown_is_stored(tmp_path: Path) -> None:
    report = build_with_full_disk(tmp_path, "markdown")
    root = tmp_path / "kb" / "blobs"
    reason = "markdown: BlobStoreFullError: " + full_message(
        root.as_uri(), f"markdown/{HIT_ID}.md", "416", "No space left on device (ENOSPC)",
        str(root),
    )
    left = report["left"]
    assert left["outcome"] == ["failed", reason]
    assert left["row"] == ["failed", reason]
    ((step, *chain),) = left["step_failures"]
    assert (step, chain[-4], chain[-2]) == ("markdown", "BlobStoreFullError", "OSError")
    assert chain[-1] == "OSError: [Errno 28] No space left on device"  # its cause
    assert left["blobs"] == [f"pdfs/{HIT_ID}"]  # the PDF stored at intake, nothing else
    assert left["temps"] == []
    assert left["snapshot"] == [["failed", reason, None, None, None], [], []]  # no point, no edge
    assert_finished_like_a_clean_build(report)


def test_the_blob_store_fills_up_while_the_figure_renders_are_stored(tmp_path: Path) -> None:
    """``figures`` fails on its first PNG. ``changes``, ``embeddings`` and ``obligations``
    (they need only ``chunks``) still run on the full disk and fail storing their snapshot or
    step record; ``obligations`` runs last, so its failure is the recorded reason; ``graph``
    (after ``embeddings``) and ``record`` never start."""
    report = build_with_full_disk(tmp_path, "figures")
    root = tmp_path / "kb" / "blobs"
    left = report["left"]
    # each failed step's error: BlobStoreFullError (its message) from the filesystem's OSError
    failures = {step: (chain[-4], chain[-3], chain[-2]) for step, *chain in left["step_failures"]}
    assert sorted(failures) == ["changes", "embeddings", "figures", "obligations"]
    assert {(name, cause) for name, _, cause in failures.values()} == {
        ("BlobStoreFullError", "OSError")
    }
    assert f"no room: writing 'figures/{HIT_ID}/figure-1.png' (" in failures["figures"][1]
    status, reason = left["row"]
    assert status == "failed" and left["outcome"] == ["failed", reason]
    assert reason.startswith(
        f"obligations: BlobStoreFullError: the blob store {root.as_uri()} has no room: writing "
        f"'assets/obligations/{HIT_ID}.json' ("
    )
    assert reason.endswith(
        f" bytes) failed with No space left on device (ENOSPC); nothing was stored under that "
        f"key. Free space on {root} or point KB_BLOB_URL at a store with room, then run "
        "`kb build`"
    )
    # no render, no figure record, no figure point; the Markdown and chunks stored before
    assert left["blobs"] == [
        f"chunks/{HIT_ID}.parquet", f"markdown/{HIT_ID}.json", f"markdown/{HIT_ID}.md",
        f"pdfs/{HIT_ID}",
    ]
    assert left["temps"] == []
    counts, ids, edges = left["snapshot"]
    assert counts == ["failed", reason, None, None, None]
    # embeddings upserted the chunk points before its record failed: never served (the
    # document is failed, kb_mcp.documents' serving rule) and replaced by the retry
    assert (ids, edges) == (["DOC-0", "DOC-1", "DOC-2"], [])
    assert_finished_like_a_clean_build(report)
