"""benchmarks.common: report headers never carry a database password; a second run of the day
writes beside the first report; corpus lists name the shared PDFs a benchmark builds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.common import command_line


def test_command_line_hides_url_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        sys,
        "argv",
        ["bench.py", "--postgres", "postgresql+psycopg://kb:s3cr:et@127.0.0.1:5432/kb", "--n", "3"],
    )
    line = command_line()
    assert "s3cr" not in line
    assert line.endswith("--postgres 'postgresql+psycopg://kb:***@127.0.0.1:5432/kb' --n 3")


def test_a_second_report_of_the_day_is_written_beside_the_first(tmp_path: Path) -> None:
    from benchmarks.common import Report

    paths = []
    for run in ("first", "second", "third"):
        report = Report(name="ingest", title="Ingest", variant="eval21", results_dir=tmp_path)
        report.text(f"the {run} run")
        paths.append(report.write())
    day = f"{report.started_at:%Y-%m-%d}"
    assert [p.name for p in paths] == [
        f"ingest-{day}-eval21.md", f"ingest-{day}-eval21-2.md", f"ingest-{day}-eval21-3.md"
    ]
    assert [p.read_text().rstrip().rsplit("\n", 1)[1] for p in paths] == [
        "the first run", "the second run", "the third run"
    ]


def test_positive_counts_parses_a_list_and_refuses_zero_or_none() -> None:
    import pytest

    from benchmarks.common import positive_counts

    assert positive_counts("1, 4,16,", "--clients", "1,4,16") == [1, 4, 16]
    for bad in ("", "0,2"):
        with pytest.raises(SystemExit, match=r"^--workers needs positive integers, e\.g\. 1,2$"):
            positive_counts(bad, "--workers", "1,2")


def test_the_eval21_list_names_21_shared_pdfs_among_them_every_pdf_the_regulatory_set_cites(
    corpus: Path,
) -> None:
    import json

    from benchmarks.common import REPO_ROOT, listed_pdfs

    pdfs = listed_pdfs(REPO_ROOT / "benchmarks" / "corpora" / "eval21.txt", root=corpus)
    assert len(pdfs) == 21
    assert sum(p.parent.name == "pdfs" and p.parent.parent == corpus for p in pdfs) == 9
    cited = {
        evidence["doc"]
        for line in (corpus / "eval" / "regulatory" / "questions.jsonl").read_text().splitlines()
        for evidence in json.loads(line).get("evidence", [])
    }
    assert cited == {p.name for p in pdfs if p.parent == corpus / "pdfs"}
    named = listed_pdfs(REPO_ROOT / "benchmarks" / "corpora" / "eval21.txt", root=corpus,
                        names=["NETFLIX_*", "nist_SP_800-171r2.pdf"])
    assert [p.name for p in named] == [
        "NETFLIX_2015_10K.pdf", "NETFLIX_2017_10K.pdf", "nist_SP_800-171r2.pdf"
    ]


def test_a_corpus_list_names_every_missing_pdf_and_refuses_a_repeated_file_name(
    tmp_path: Path,
) -> None:
    from benchmarks.common import listed_pdfs

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for name in ("a/x.pdf", "b/x.pdf", "b/y.pdf"):
        (tmp_path / name).write_bytes(b"%PDF-1.7\n")
    manifest = tmp_path / "list.txt"
    manifest.write_text("# two folders\n\na/x.pdf\nb/gone.pdf\nb/y.pdf\nc/lost.pdf\n")
    with pytest.raises(FileNotFoundError, match=r"^2 PDF\(s\) of .*list\.txt are not under "
                       r".*: .*b/gone\.pdf, .*c/lost\.pdf$"):
        listed_pdfs(manifest, root=tmp_path)
    manifest.write_text("a/x.pdf\nb/y.pdf\nb/x.pdf\n")
    with pytest.raises(ValueError, match=r"names two PDFs called x\.pdf"):
        listed_pdfs(manifest, root=tmp_path)
    manifest.write_text("a/x.pdf\nb/y.pdf\n")
    assert listed_pdfs(manifest, root=tmp_path) == [tmp_path / "a/x.pdf", tmp_path / "b/y.pdf"]
    with pytest.raises(FileNotFoundError, match=r"matches 'z\*'"):
        listed_pdfs(manifest, root=tmp_path, names=["z*"])
    manifest.write_text("# nothing\n")
    with pytest.raises(ValueError, match=r"names no PDF"):
        listed_pdfs(manifest, root=tmp_path)
