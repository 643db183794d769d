"""``completion/complete``: suggestions for the arguments that name a document or a category
(MCP spec 2025-06-18, "Server utilities / Completion").

Completed arguments (``kb_mcp.resources``):

* ``doc_id`` of ``kb://documents/{doc_id}``: the doc_ids of the ready documents; what was
  typed matches a doc_id or a file name (so "Retail R" offers ``retail-rules.pdf``).
* ``category`` of ``kb://categories/{+category}``: every category of a ready document and
  each of its parents (``aemo/procedures`` also offers ``aemo``), since a category names the
  folder and everything below it.

Every other argument (the ``topic`` of the ``research-topic`` prompt, a prompt or template kb
does not have) gets an empty list rather than an error: the spec lets a server offer nothing,
and a client asks while the user types. Only ready documents are offered, the same ones
list_documents shows. Matching ignores case: values that start with what was typed come
first, then values that contain it, each group in case-insensitive order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import anyio.to_thread
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from kb_mcp.documents import READY
from kb_mcp.resources import CATEGORY_TEMPLATE, DOCUMENT_TEMPLATE
from kb_mcp.state import StateHolder
from kb_mcp.tools import KbServer
from kb_shared.errors import KbError
from kb_shared.stores.catalog import DocumentRow

log = logging.getLogger(__name__)

#: Most values one answer carries (MCP spec 2025-06-18, "Completion": "maximum 100 items").
MAX_VALUES = 100


def register(server: KbServer, *, holder: StateHolder) -> None:
    """Serve ``completion/complete`` on ``server`` from the catalog the ``holder`` publishes
    (the handler gets no ``Context``, like the static resource)."""

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        _context: CompletionContext | None,
    ) -> Completion:
        if not isinstance(ref, ResourceTemplateReference) or not holder.ready:
            return empty()
        if (ref.uri, argument.name) == (DOCUMENT_TEMPLATE, "doc_id"):
            candidates = document_candidates
        elif (ref.uri, argument.name) == (CATEGORY_TEMPLATE, "category"):
            candidates = category_candidates
        else:
            return empty()
        try:
            rows = await anyio.to_thread.run_sync(holder.state.catalog.list_documents)
        except KbError as exc:  # a catalog that is down or not created offers nothing
            log.warning("completion of %s failed: %s", argument.name, exc)
            return empty()
        ready = [row for row in rows if row.status == READY]
        return suggest(candidates(ready), argument.value)


def empty() -> Completion:
    """The answer that offers nothing."""
    return Completion(values=[], total=0, has_more=False)


def document_candidates(rows: Iterable[DocumentRow]) -> dict[str, tuple[str, ...]]:
    """doc_id → the texts a typed value is matched against (the doc_id and the file name)."""
    return {row.doc_id: (row.doc_id, row.name) for row in rows}


def category_candidates(rows: Iterable[DocumentRow]) -> dict[str, tuple[str, ...]]:
    """category → itself, for every category of ``rows`` and each parent of one (``a/b/c``
    gives ``a``, ``a/b`` and ``a/b/c``); spellings that differ only in case are offered once,
    as first met."""
    found: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for row in rows:
        segments = row.category.split("/") if row.category else []
        for depth in range(1, len(segments) + 1):
            path = "/".join(segments[:depth])
            if path.casefold() not in seen:
                seen.add(path.casefold())
                found[path] = (path,)
    return found


def suggest(candidates: dict[str, tuple[str, ...]], typed: str) -> Completion:
    """The values whose texts start with ``typed`` (ignoring case), then those whose texts
    contain it, each group sorted case-insensitively, at most ``MAX_VALUES`` of them;
    ``total`` counts every match and ``has_more`` says some were left out."""
    want = typed.strip().casefold()
    starts: list[str] = []
    contains: list[str] = []
    for value, texts in candidates.items():
        folded = [text.casefold() for text in texts]
        if any(text.startswith(want) for text in folded):
            starts.append(value)
        elif any(want in text for text in folded):
            contains.append(value)
    ranked = sorted(starts, key=str.casefold) + sorted(contains, key=str.casefold)
    return Completion(
        values=ranked[:MAX_VALUES], total=len(ranked), has_more=len(ranked) > MAX_VALUES
    )
