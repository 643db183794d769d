"""The README's settings table lists every setting, under the name the environment uses."""

from __future__ import annotations

import re
from pathlib import Path

from kb_shared.settings import Settings

README = Path(__file__).resolve().parents[1] / "README.md"


def environment_names() -> dict[str, list[str]]:
    """Field name -> the environment variable names that set it."""
    names: dict[str, list[str]] = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = list(getattr(alias, "choices", []) or [])
        names[field] = [c for c in choices if isinstance(c, str)] or [f"KB_{field.upper()}"]
    return names


def test_every_setting_is_in_the_readme_table() -> None:
    table = README.read_text(encoding="utf-8").split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)`", table, flags=re.MULTILINE))
    documented |= set(re.findall(r"/ `([A-Z0-9_]+)`", table))
    missing = [
        f"{field} ({', '.join(envs)})"
        for field, envs in environment_names().items()
        if not any(env in documented for env in envs)
    ]
    assert missing == []


def test_the_readme_names_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
