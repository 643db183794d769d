"""benchmarks.common: report headers never carry a database password."""

from __future__ import annotations

import sys

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


def test_positive_counts_parses_a_list_and_refuses_zero_or_none() -> None:
    import pytest

    from benchmarks.common import positive_counts

    assert positive_counts("1, 4,16,", "--clients", "1,4,16") == [1, 4, 16]
    for bad in ("", "0,2"):
        with pytest.raises(SystemExit, match=r"^--workers needs positive integers, e\.g\. 1,2$"):
            positive_counts(bad, "--workers", "1,2")
