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
