"""Categories at intake (issue 12): ``admit``'s base category joins each file's folder path
below the folder it was found in; an explicitly named file gets the base alone; a bad base
category is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource


def _tree(root: Path) -> Path:
    for relative, text in {"x/y/one.md": "one", "two.md": "two"}.items():
        (root / "docs" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / relative).write_text(f"# {text}\n\n{text} text\n", encoding="utf-8")
    (root / "three.md").write_text("# three\n\nthree text\n", encoding="utf-8")
    return root / "docs"


def test_a_base_category_prefixes_the_folder_paths(tmp_path: Path) -> None:
    docs = _tree(tmp_path)
    stores = StoresResource(home=str(tmp_path / "home"))
    with dg.DagsterInstance.ephemeral() as instance:
        outcomes = admit([docs, tmp_path / "three.md"], stores, instance, category="AEMO/")
    assert [o.status for o in outcomes] == [IntakeStatus.ADDED] * 3
    rows = stores.catalog().list_documents()
    assert {r.name: r.category for r in rows} == {
        "one.md": "AEMO/x/y", "two.md": "AEMO", "three.md": "AEMO",
    }
    stores.close()


def test_a_bad_category_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    docs = _tree(tmp_path)
    stores = StoresResource(home=str(tmp_path / "home"))
    with dg.DagsterInstance.ephemeral() as instance:
        with pytest.raises(ValueError, match="category 'a/../b' has a '.' or '..' segment"):
            admit([docs], stores, instance, category="a/../b")
        assert instance.get_dynamic_partitions("documents") == []
    assert stores.catalog().list_documents() == []
    stores.close()
