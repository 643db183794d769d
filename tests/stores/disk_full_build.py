"""The build half of ``tests/stores/test_blob_disk_full_build.py``, run as
``python -m tests.stores.disk_full_build HOME STEP`` inside a user and mount namespace whose
``HOME/blobs`` is a small tmpfs (the test mounts it; it vanishes with the namespace, so all the
checking data leaves as JSON on stdout).

Builds KEPT, then HIT with the tmpfs filled to the last byte from inside HIT's ``STEP``
(``markdown``: right after the conversion, before the Markdown is stored; ``figures``: right
after the figure regions are located, before the first PNG is stored), records what that
failed build left, deletes the filler (space freed) and runs ``kb build`` over what is left
(HIT again, and LATER). The flow and snapshots are those of ``tests/stores/test_outages.py``.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from kb_assets import operations
from kb_assets.resources import StoresResource
from kb_shared.providers.base import ConvertedDocument, FigureBox, FigureRegion
from kb_shared.stores.blobs import TEMP_PREFIX
from tests.assets.fake_providers import FakeProviders
from tests.fakes import FakeConverter, FakeFigureLocator
from tests.stores.test_outages import (
    HIT_ID,
    KEPT_ID,
    LATER_ID,
    OUTAGE_JOB,
    admit_three,
    kb_build,
    outage_build_job,
    snapshot,
)

#: The file that takes the tmpfs's last free byte; deleting it is "space freed".
FILLER = "disk-filler.bin"


def fill(folder: Path) -> None:
    """Write ``folder/FILLER`` until the filesystem refuses with ``ENOSPC``."""
    with open(folder / FILLER, "ab", buffering=0) as handle:
        block = b"\0" * (1 << 20)
        while True:
            try:
                handle.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return


@dataclass
class FillingConverter(FakeConverter):
    """``FakeConverter`` that runs ``hook`` (once) after converting."""

    hook: Callable[[], None] | None = None

    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        converted = super().convert(pdf, filename)
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return converted


@dataclass
class FillingLocator(FakeFigureLocator):
    """``FakeFigureLocator`` that runs ``hook`` (once) after locating."""

    hook: Callable[[], None] | None = None

    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        boxes = super().locate(pdf, regions)
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return boxes


def blob_files(root: Path) -> list[str]:
    """Every file under the blob root but the filler, temp files included."""
    return sorted(
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root)
        for name in names
        if name != FILLER
    )


def step_failures(instance: dg.DagsterInstance) -> list[list[str]]:
    """Each failed step of the newest run: its key, then the class name and the last
    message line of each error down its cause chain (outermost first)."""
    (newest,) = instance.get_runs(limit=1)
    found = []
    for event in instance.all_logs(newest.run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        chain = [event.dagster_event.step_key]
        error = event.dagster_event.event_specific_data.error
        while error is not None:
            chain += [error.cls_name, error.message.strip().splitlines()[-1]]
            error = error.cause
        found.append(chain)
    return found


def run(home: Path, step: str) -> dict[str, object]:
    """The scenario; returns what the test checks (see the module docstring)."""
    root = home / "blobs"
    converter, locator = FillingConverter(), FillingLocator()
    stores = StoresResource(home=str(home))
    OUTAGE_JOB.update(
        stores=stores, providers=FakeProviders(converter_=converter, locator_=locator)
    )
    operations.run_build = functools.partial(operations.run_build, job=outage_build_job)
    try:
        with dg.instance_for_test() as instance:
            admit_three(home.parent, stores, instance)  # from home.parent / "in"
            (kept,) = kb_build(stores, instance, [KEPT_ID])
            before = snapshot(stores, KEPT_ID)
            clean_blobs = [k.replace(KEPT_ID, "DOC") for k in stores.blobs().list() if KEPT_ID in k]

            filler = functools.partial(fill, root)
            if step == "markdown":
                converter.hook = filler
            else:
                locator.hook = filler
            (hit,) = kb_build(stores, instance, [HIT_ID])
            row = stores.catalog().find_by_doc_id(HIT_ID)
            left = {
                "outcome": [hit.status, hit.reason],
                "step_failures": step_failures(instance),
                "row": [row.status, row.failure_reason],
                "blobs": [k for k in stores.blobs().list() if HIT_ID in k],
                "files": blob_files(root),
                "temps": [
                    f for f in blob_files(root) if os.path.basename(f).startswith(TEMP_PREFIX)
                ],
                "snapshot": snapshot(stores, HIT_ID),
            }

            (root / FILLER).unlink()
            todo = operations.documents_to_build(stores)
            finished = kb_build(stores, instance, todo)
            after = {doc: snapshot(stores, doc) for doc in (KEPT_ID, HIT_ID, LATER_ID)}
            hit_blobs = [k.replace(HIT_ID, "DOC") for k in stores.blobs().list() if HIT_ID in k]
    finally:
        stores.close()
    return {
        "kept": [kept.status, kept.reason],
        "before": before,
        "clean_blobs": clean_blobs,
        "left": left,
        "todo": todo,
        "finished": [[o.doc_id, o.status, o.reason] for o in finished],
        "after": after,
        "hit_blobs_after": hit_blobs,
    }


if __name__ == "__main__":
    # the last line of stdout, whatever the build printed before it
    print("\n" + json.dumps(run(Path(sys.argv[1]), sys.argv[2])))
