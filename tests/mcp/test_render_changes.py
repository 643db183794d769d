"""What ``compare_versions`` renders from a stored comparison (``kb_mcp.render_changes``): the
paging lines, and a page asked for past the last change said as such."""

from __future__ import annotations

from types import SimpleNamespace

from kb_mcp.links import Links
from kb_mcp.render_changes import Comparison, Issue, comparison_output, comparison_text
from kb_shared.compliance.changes import CHANGED, REMOVED, Change, ChangeSet, Side


def comparison() -> Comparison:
    changes = (
        Change(1, CHANGED, "4 Bids", "4 Bids", Side("Bids close at 1 pm.", (4,)),
               Side("Bids close at 2 pm.", (4,)), False, (("1 pm", "2 pm"),)),
        Change(2, REMOVED, "5 Notes", "5 Notes", Side("The retailer must keep notes.", (6,)),
               Side("", (6,)), True),
    )
    stored = SimpleNamespace(changes=changes, summary=ChangeSet(changes, 7).summary)

    def issue(version: int, status: str, label: str) -> Issue:
        row = SimpleNamespace(version=version, status=status, blob_key=f"pdfs/proc.pdf@v{version}")
        document = SimpleNamespace(name="proc.pdf", doc_id="proc.pdf")
        return Issue(document, row, label)  # type: ignore[arg-type]

    return Comparison(issue(1, "superseded", "v1"), issue(2, "serving", "v2"), stored)  # type: ignore[arg-type]


def test_a_page_of_changes_says_where_the_next_starts() -> None:
    text = comparison_text(comparison(), Links("http://kb"), 0, 1)
    assert text.splitlines()[:2] == [
        "2 changes in proc.pdf (v2) against v1: obligations touched by 1, numbers changed by 1; "
        "0 added, 1 removed, 1 changed, 0 moved; 7 sections unchanged.",
        "Showing C1–C1 of 2; call again with offset=1 for the next.",
    ]
    assert "[C2]" not in text


def test_an_offset_past_the_last_change_is_said_not_left_blank() -> None:
    text = comparison_text(comparison(), Links("http://kb"), 5, 10)
    assert text.splitlines()[1:] == ["offset 5 is past the last of 2 changes; use offset=0."]
    output = comparison_output(comparison(), Links("http://kb"), 5, 10)
    assert (output.offset, output.next_offset, output.changes) == (5, None, [])
