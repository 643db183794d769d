"""``Catalog.serving_states``: what search_docs reads of the catalog on every call, in one query,
on SQLite and Postgres (the ``catalog`` fixture), and the search scope built from it."""

from __future__ import annotations

import pytest

from kb_mcp.documents import served_documents, serving_keys
from kb_mcp.errors import ToolProblem
from kb_shared.errors import EmptyCorpusError
from kb_shared.stores.catalog import Catalog, ServingState
from kb_shared.stores.catalog.versions import document_versions

SHA_1, SHA_2, SHA_3, SHA_4 = ("1" * 64, "2" * 64, "3" * 64, "4" * 64)


def _add(catalog: Catalog, name: str, sha: str) -> str:
    doc_id = name.lower()
    catalog.add_pending(name, doc_id, sha, 100, f"pdfs/{doc_id}")
    return doc_id


def test_every_documents_status_versions_and_serving_version(catalog: Catalog) -> None:
    with pytest.raises(EmptyCorpusError):
        served_documents(catalog)
    rules = _add(catalog, "Rules.pdf", SHA_1)
    catalog.mark_ready(rules, pages=3, chunk_count=5)
    queued = _add(catalog, "Queued.pdf", SHA_2)
    broken = _add(catalog, "Broken.pdf", SHA_3)
    catalog.mark_failed(broken, "markdown: not a PDF")
    assert catalog.serving_states() == [
        ServingState("broken.pdf", "failed", 1, None),
        ServingState("queued.pdf", "pending", 1, None),
        ServingState("rules.pdf", "ready", 1, 1),
    ]
    assert served_documents(catalog).only == frozenset({"rules.pdf"})

    # version 2 pending: version 1 is still the one served
    catalog.add_version(rules, 2, "Rules.pdf", SHA_4, 200, "pdfs/rules.pdf@v2")
    assert catalog.serving_states()[2] == ServingState("rules.pdf", "ready", 2, 1)
    catalog.record_version(rules, 2, pages=4, chunk_count=6)
    assert catalog.serving_states()[2] == ServingState("rules.pdf", "ready", 2, 2)
    assert catalog.serving_states()[2].key == "rules.pdf@v2"
    assert serving_keys(catalog) == {"rules.pdf": "rules.pdf@v2"}
    assert served_documents(catalog).only == frozenset({"rules.pdf@v2"})

    catalog.mark_deleting(queued)
    catalog.mark_deleting(broken)
    assert [s.status for s in catalog.serving_states()] == ["deleting", "deleting", "ready"]
    # a deleting row keeps the search filtered, so its leftovers are never served
    assert served_documents(catalog).only == frozenset({"rules.pdf@v2"})


def test_one_ready_version_each_searches_unfiltered(catalog: Catalog) -> None:
    for name, sha in (("A.pdf", SHA_1), ("B.pdf", SHA_2)):
        catalog.mark_ready(_add(catalog, name, sha), pages=1, chunk_count=1)
    assert served_documents(catalog).only is None
    assert serving_keys(catalog) == {"a.pdf": "a.pdf", "b.pdf": "b.pdf"}


def test_nothing_ready_says_what_the_documents_are(catalog: Catalog) -> None:
    _add(catalog, "Queued.pdf", SHA_1)
    catalog.mark_failed(_add(catalog, "Broken.pdf", SHA_2), "chunks: empty")
    with pytest.raises(ToolProblem, match="no document is ready to search: 1 pending, 1 failed"):
        served_documents(catalog)


def test_a_catalog_without_the_version_table_reads_each_document_as_version_1(
    catalog: Catalog,
) -> None:
    catalog.mark_ready(_add(catalog, "Rules.pdf", SHA_1), pages=3, chunk_count=5)
    _add(catalog, "Queued.pdf", SHA_2)
    document_versions.drop(catalog.engine)
    assert catalog.serving_states() == [
        ServingState("queued.pdf", "pending", 1, None),
        ServingState("rules.pdf", "ready", 1, 1),
    ]
    assert served_documents(catalog).only == frozenset({"rules.pdf"})
