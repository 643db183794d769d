"""The layout model's onnxruntime sessions kb runs (``kb_shared.providers.layout_sessions``).

The layout model is process-wide, so the conversions run in a fresh interpreter each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb_assets.build_workers import worker_environment
from kb_shared.providers.layout_sessions import use_layout_threads

ROOT = Path(__file__).resolve().parents[2]

#: Converts the PDF at argv[1] with pymupdf4llm as shipped, then with kb's converter, then with
#: pymupdf4llm again (argv[2] "convert"), or only sets kb's layout sessions ("load"); prints
#: what a test compares as JSON.
SCRIPT = r"""
import gc, json, sys
import onnxruntime as ort
import pymupdf, pymupdf4llm
from kb_shared.providers.layout_sessions import use_configured_threads
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter

def raw():
    with pymupdf.open(sys.argv[1]) as doc:
        return pymupdf4llm.to_markdown(doc, use_ocr=False, show_progress=False)

def sessions():
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, ort.InferenceSession) and type(obj) is not ort.InferenceSession:
            options = obj.get_session_options()
            found.append([
                obj._model_path.rsplit("/", 1)[-1], options.intra_op_num_threads,
                options.get_session_config_entry("session.intra_op.allow_spinning"),
                options.enable_cpu_mem_arena,
            ])
    return sorted(found)

if sys.argv[2] == "load":  # only what a conversion does first: set the layout sessions
    use_configured_threads()
    print(json.dumps({"sessions": sessions()}))
    sys.exit(0)
shipped = raw()
shipped_get_layout = pymupdf._get_layout
PymupdfMarkdownConverter().convert(open(sys.argv[1], "rb").read(), "sample.pdf")
print(json.dumps({
    "replaced": pymupdf._get_layout is not shipped_get_layout,
    "again": use_configured_threads(),
    "sessions": sessions(),
    "raw_same": raw() == shipped,
}))
"""


@pytest.fixture(scope="module")
def sample_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kb_assets.sample_pdf import build_sample_pdf  # noqa: PLC0415

    return build_sample_pdf(tmp_path_factory.mktemp("layout") / "sample.pdf")


def run_conversions(pdf: Path, what: str = "convert", **environment: str) -> dict:
    """``SCRIPT`` over ``pdf`` in a fresh interpreter with this environment plus
    ``environment`` (the test's own has no ``KB_*`` setting)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(pdf), what], cwd=ROOT, env={**os.environ, **environment},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # three real conversions in a fresh interpreter: ~5 s of CPU
def test_kb_converts_on_its_own_layout_sessions_with_the_configured_threads_and_same_markdown(
    sample_pdf: Path,
) -> None:
    seen = run_conversions(sample_pdf, KB_LAYOUT_THREADS="1")
    assert seen["replaced"] is True
    # the three sessions pymupdf-layout builds, one thread each, idle threads asleep, and the
    # memory arena pymupdf-layout turns off on again
    assert seen["sessions"] == [
        ["feature_imf1.onnx", 1, "0", True],
        ["layout_rf2.4.1+imf1.onnx", 1, "0", True],
        ["table_grid_model_v4_ep.onnx", 1, "0", True],
    ]
    # the model stays in force: a later conversion rebuilds nothing and reads no setting
    assert seen["again"] is False
    # one thread, no spinning and the arena change nothing the model outputs
    assert seen["raw_same"] is True

def test_unset_layout_threads_leave_the_count_to_onnxruntime_but_still_stop_spinning(
    sample_pdf: Path,
) -> None:
    seen = run_conversions(sample_pdf, "load")
    assert [s[1:] for s in seen["sessions"]] == [[0, "0", True]] * 3


def test_layout_threads_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="layout threads must be 1 or more, not 0"):
        use_layout_threads(0)


def test_build_workers_share_the_cores_unless_the_operator_set_the_threads() -> None:
    both = {"KB_LAYOUT_THREADS": "1", "KB_LOCAL_EMBEDDING_THREADS": "1"}
    assert worker_environment(2, cores=2, environ={}) == both
    assert worker_environment(3, cores=2, environ={}) == both
    assert worker_environment(2, cores=8, environ={}) == {
        "KB_LAYOUT_THREADS": "4", "KB_LOCAL_EMBEDDING_THREADS": "4"
    }
    assert worker_environment(2, cores=2, environ={"KB_LAYOUT_THREADS": "2"}) == {
        "KB_LOCAL_EMBEDDING_THREADS": "1"
    }
    assert worker_environment(
        2, cores=2, environ={"KB_LAYOUT_THREADS": "2", "KB_LOCAL_EMBEDDING_THREADS": "2"}
    ) == {}
