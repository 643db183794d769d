"""``benchmarks.soak``: the answer checks of the soak while building, and a 10-second soak with 2
MCP clients against a tiny built home so the driver's code path keeps working."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import soak
from benchmarks.soak import Hit, check_listed, check_read, check_versions, hits_of
from benchmarks.soak_report import Call, Sample, Soak, verdicts
from tests.conftest import copy_home

DOC = "rules.pdf"


def _ref(result_id: str, chunk: int | None) -> dict[str, object]:
    return {"id": result_id, "doc_id": DOC, "chunk_number": chunk}


def test_hits_carry_the_version_their_ids_were_stored_under() -> None:
    answer = {"results": [_ref(f"{DOC}-3", 3), _ref(f"{DOC}@v2-4", 4),
                          _ref(f"{DOC}@v3#figure-1", None)]}
    assert hits_of(answer) == [
        Hit(DOC, 1, 3, f"{DOC}-3"), Hit(DOC, 2, 4, f"{DOC}@v2-4"),
        Hit(DOC, 3, None, f"{DOC}@v3#figure-1"),
    ]


def test_an_answer_citing_two_versions_of_one_document_is_a_violation() -> None:
    hits = [Hit(DOC, 1, 0, f"{DOC}-0"), Hit(DOC, 2, 1, f"{DOC}@v2-1"),
            Hit("other.pdf", 1, 0, "other.pdf-0")]
    assert check_versions(hits) == [f"{DOC} answered from versions [1, 2] at once"]
    assert check_versions(hits[1:]) == []


def test_a_hit_whose_document_is_not_listed_ready_is_a_violation() -> None:
    hits = [Hit(DOC, 1, 0, f"{DOC}-0"), Hit("new.pdf", 1, 2, "new.pdf-2")]
    listing = {"documents": [{"doc_id": DOC}], "pending": 1, "failed": 0}
    assert check_listed(hits, listing) == ["new.pdf was a search hit but is not listed ready"]
    assert check_listed(hits[:1], listing) == []


def test_read_doc_of_a_hit_must_serve_its_chunk_from_the_same_or_a_newer_version() -> None:
    hit = Hit(DOC, 2, 5, f"{DOC}@v2-5")
    assert check_read(hit, {"chunks": [_ref(f"{DOC}@v2-5", 5)], "missing": []}) == (None, False)
    assert check_read(hit, {"chunks": [_ref(f"{DOC}@v3-5", 5)], "missing": []}) == (None, True)
    assert check_read(hit, {"chunks": [_ref(f"{DOC}-5", 5)], "missing": []}) == (
        f"read_doc {DOC} served version 1 after a hit of 2", False)
    assert check_read(hit, {"chunks": [], "missing": [5]}) == (
        f"read_doc {DOC} chunk 5 missing (hit {DOC}@v2-5)", False)


def test_the_new_version_is_the_same_name_without_its_last_page(tmp_path: Path) -> None:
    import pymupdf  # noqa: PLC0415

    with pymupdf.open() as doc:
        for text in ("first page", "second page"):
            doc.new_page().insert_text((72, 72), text)
        original = doc.tobytes()
    copy = soak.changed_copy(original, tmp_path, DOC)
    assert copy == tmp_path / DOC
    with pymupdf.open(copy) as doc:
        assert [page.get_text().strip() for page in doc] == ["first page"]


def test_bursts_alternate_load_and_pauses_in_the_measured_part_only() -> None:
    run = Soak(clients=1, seconds=120, warmup_seconds=5, call_timeout=60, verify=False,
               pause_every=20, pause_seconds=15)
    assert [run.pause_end(at) for at in (-3, 0, 19.9, 20, 34.9, 35, 55, 60)] == [
        None, None, None, 35, 35, None, 70, 70]
    constant = Soak(clients=1, seconds=120, warmup_seconds=5, call_timeout=60, verify=False)
    assert constant.pause_end(25) is None


def test_verdicts_judge_errors_hangs_memory_descriptors_and_p95_stability() -> None:
    run = Soak(clients=2, seconds=180, warmup_seconds=0, call_timeout=60, verify=True)
    for minute, seconds in ((0, 0.9), (1, 0.2), (2, 0.31)):
        run.calls += [Call("search_docs", minute * 60 + i, seconds) for i in range(20)]
    run.calls.append(Call("read_doc", 100, 60.0, "no answer within 60 s", hung=True))
    run.samples = [Sample(0, 1000, 70, 2), Sample(170, 1110, 79, 2)]
    run.before, run.after = Sample(-5, 900, 20, 0), Sample(185, 1100, 60, 1)
    run.violations.append((50.0, "rules.pdf was a search hit but is not listed ready"))
    found = {bar.split(" (")[0]: (got, ok) for bar, got, ok in verdicts(run)}
    assert found == {
        "0 errors": ("0 calls, 0 sessions", True),
        "0 hung calls": ("1", False),
        "0 hung connections": ("0 before, 1 after", False),
        "open descriptors stable": ("70 → 79", False),
        "memory growth < 10%": ("+11.0%", False),
        "p95 stable": ("search_docs 200 → 310 ms (1.55×); search_graph n/a; read_doc n/a; "
                       "list_documents n/a", False),
        "0 half-written documents seen": ("1 in 0 checks", False),
    }


@pytest.mark.slow
def test_a_short_soak_calls_every_tool_without_errors(
    sample_home: tuple[Path, object], tmp_path: Path
) -> None:
    home = copy_home(sample_home[0], tmp_path / "home")
    plan = soak.Plan(clients=2, seconds=10, warmup_seconds=0, call_timeout=60)
    questions = ["What is IN008-24?", "Notification flow of a retailer", "Retailer obligations"]
    result = soak.run_soak(home, plan, questions, tmp_path / "server.log")
    tools = {call.tool for call in result.calls}
    assert [c.error for c in result.calls if c.error] == []
    assert result.session_errors == []
    assert tools == {"search_docs", "search_graph", "read_doc", "list_documents"}
    assert result.sessions == 2
    assert result.violations == []
    assert result.samples and result.samples[0].rss > 0
    assert result.after is not None and result.after.connections <= result.before.connections
