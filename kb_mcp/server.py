"""The kb MCP server: tools, prompt and resource over the corpus the pipeline built.

``build_server(settings)`` returns an ``MCPServer`` (mcp 2.x) whose lifespan opens the stores
through ``kb_shared`` (``kb_mcp.state.open_state``) and closes them when the server stops.
Hosting is elsewhere: ``kb_mcp.http`` (Streamable HTTP + file routes) and ``kb_mcp.cli``.

Tools (all read-only, idempotent, closed-world): ``search_docs``, ``search_graph``,
``read_doc``, ``list_documents``, ``echo``; prompt ``research-topic``; resource
``kb://documents``. Every failure comes back as an ``isError`` result with an actionable
message (``kb_mcp.errors``). This module deliberately does not use
``from __future__ import annotations``: the tool signatures carry bounds taken from settings
(the query length), which pydantic must resolve from the enclosing function's locals.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from importlib import metadata
from typing import Annotated, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from kb_mcp import render, search
from kb_mcp.errors import tool_errors
from kb_mcp.state import ServerState, StateHolder, open_state
from kb_shared.providers.base import Embedder, Reranker
from kb_shared.settings import Settings

log = logging.getLogger(__name__)

#: Upper bounds of the tool arguments (input schema ``maximum``/``maxItems``/``maxLength``).
MAX_TOP_K = 25
MAX_OFFSET = 200
MAX_GRAPH_TOP_K = 30
MAX_DOCUMENT_FILTER = 20
MAX_NAME_CHARS = 1024
MAX_ECHO_CHARS = 10_000
MAX_TOPIC_CHARS = 500

#: Every tool only reads, answers the same for the same corpus, and touches nothing outside
#: kb (MCP spec 2025-06-18, "Tool annotations").
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
kb answers questions about an indexed collection of regulatory documents (PDFs), with
page-level citations. search_docs finds passages (meaning + exact codes and clause numbers);
search_graph follows relationships between parties, obligations and defined terms;
read_doc reads chunks around a result; list_documents shows what is indexed. Cite results
by their [n] headers and page numbers. Tool results are not shown to the user: only what you
write in your reply is visible, so put citations and figure links into your reply. When a
search says low confidence or finds nothing, say the corpus does not cover it; do not guess.
"""

SEARCH_DOCS = """\
Search the indexed regulatory documents for passages that answer a question, with page-level
citations. Hybrid search: meaning (dense embeddings) plus exact terms, so codes, clause
numbers and identifiers (IN008-24, 3.1.5, SO_OP_3705, a DUID) are found verbatim.

Returns numbered results "[n] Title — Version — pp. a–b — Section" with the passage text, a
deduplicated source list with PDF links, and figure results as images with
"[Open figure](…) · [Source page N](…)" links.

Use it for direct lookups: what a rule or clause says, a definition, a value in a table.
Use search_graph instead for how parties, obligations or concepts relate (who must notify
whom, what depends on what, links across documents). Use read_doc to read the chunks before
or after a result (each result names its chunk number). Use list_documents to see what is
indexed. Narrow with documents (file names or doc_ids) and kind; get more with
offset=next_offset. If the answer is flagged low confidence, the corpus does not cover the
question: say so rather than guessing.

Tool results are not shown to the user; only what you write in your reply is visible. Quote
the [n] citations with their pages, and put figure links or images directly into your reply.
"""

SEARCH_GRAPH = """\
Search the knowledge graph extracted from the documents: entities (defined terms, roles,
organisations, codes) and typed relationships between them (obligations, definitions,
references), each backed by the chunk it was extracted from.

Finds the entities whose names are closest to the query, walks 1 or 2 hops of relationships
from them, ranks the relationships (1 hop before 2, then by entity similarity) and returns
"[R1] A —TYPE→ B (doc, chunk)" lines plus the supporting excerpts "[1]…" with the same
citation headers as search_docs.

Use it for relational questions: obligations or dependencies between parties, how concepts
connect, definitions that span documents, facts that only emerge by linking two documents.
Use search_docs instead to look up what a passage, table or clause says. hops=2 reaches
further but is noisier. Tool results are not shown to the user: cite the excerpts in your
reply.
"""

READ_DOC = """\
Read up to 5 whole chunks of one document by chunk number, each with its pages and section
headings. Chunk numbers are 0-based: chunk n is the one with id "{doc_id}-{n}", and every
search_docs result says "chunk n of {doc_id}". Use it to read what comes before or after a
search result (n-1, n+1) or to read a passage in full. Use search_docs first to find where to
read; list_documents gives the document names and chunk counts.
"""

LIST_DOCUMENTS = """\
List the documents in the knowledge base: file name, doc_id, title, version, page, chunk and
figure counts, and a link to the PDF; also how many documents are still being built or
failed. Call it before concluding that the corpus lacks a document (a file name rarely
matches a document's official title), and to get the names search_docs (documents filter)
and read_doc accept. Use search_docs to search their content.
"""

ECHO = """\
Echo a message back unchanged. A diagnostic that confirms the connection to the kb server
works; it reads nothing. Use the search tools for questions.
"""

RESEARCH_TOPIC = """\
Research {topic!r} in the kb knowledge base and write one cited answer.

1. Call search_docs with a focused query about the topic (add codes or clause numbers if the
   topic has them). Read the numbered results; call read_doc for neighbouring chunks when a
   passage is cut off.
2. Call search_graph with the same topic (hops=1; hops=2 if the first walk is thin) to find
   the parties, obligations and defined terms involved and how they connect.
3. Reconcile the two: build the answer from the passages, use the relationships to connect
   them, and cite every claim with its [n] header and page numbers (graph claims through their
   supporting excerpt).
4. Flag disagreement explicitly: where the graph's relationships and the passages say
   different things, or two documents disagree, say so and cite both sides instead of
   picking one silently.
5. If both tools come back empty or low confidence, say the indexed documents do not cover
   the topic, call list_documents to check, and do not answer from general knowledge as if
   it came from the corpus.
"""


def _version() -> str:
    try:
        return metadata.version("kb")
    except metadata.PackageNotFoundError:
        return "0"


def _state(ctx: Context) -> ServerState:
    """The lifespan's ``ServerState`` for this request."""
    return ctx.request_context.lifespan_context


def build_server(
    settings: Settings,
    *,
    holder: StateHolder | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    use_reranker: bool = True,
    warm: bool = True,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO",
    stdio: bool = False,
) -> MCPServer:
    """Create the kb MCP server.

    Args:
        settings: where the stores are, which providers, the query limit and the public URL
            citation links use.
        holder: receives the live state while the server runs (the HTTP routes read it);
            a private one is made when not given.
        embedder / reranker / use_reranker: passed to ``open_state`` (tests share a loaded
            embedder; ``use_reranker=False`` forces fusion order).
        warm: load the embedding model's weights when the server starts, so the first query
            does not pay for it (several seconds for the offline models).
        log_level: level of the server's log (the SDK logs to stderr, never stdout).
        stdio: the server runs over stdio, so citation links point at local files rather
            than at an HTTP server that is not there (``render.links_for``).

    Returns:
        An ``MCPServer`` whose lifespan yields the ``ServerState``. Nothing is opened until
        the server runs.
    """
    holder = holder if holder is not None else StateHolder()
    links = render.links_for(settings, stdio=stdio)
    max_chars = settings.max_query_chars

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[ServerState]:
        state = await anyio.to_thread.run_sync(
            partial(
                open_state, settings, embedder=embedder, reranker=reranker,
                use_reranker=use_reranker,
            )
        )
        try:
            load = getattr(state.embedder, "load", None)
            if warm and callable(load):
                await anyio.to_thread.run_sync(load)
            holder.set(state)
            log.info("kb MCP server ready (embedding model %s)", state.embedder.model)
            yield state
        finally:
            holder.set(None)
            await anyio.to_thread.run_sync(state.close)

    mcp = MCPServer(
        "kb",
        title="kb — regulatory knowledge base",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level=log_level,
    )

    query_type = Annotated[
        str,
        Field(
            description=(
                "What to look for: a question, key terms, or a code / clause number "
                f"(at most {max_chars:,} characters)."
            ),
            json_schema_extra={"maxLength": max_chars, "minLength": 1},
        ),
    ]

    @mcp.tool(
        name="search_docs", title="Search documents", description=SEARCH_DOCS,
        annotations=READ_ONLY,
    )
    def search_docs(
        query: query_type,
        ctx: Context,
        top_k: Annotated[
            int, Field(ge=1, le=MAX_TOP_K, description="Results per page.")
        ] = 8,
        documents: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]] | None,
            Field(
                max_length=MAX_DOCUMENT_FILTER,
                description="Only these documents (file names or doc_ids from list_documents).",
            ),
        ] = None,
        kind: Annotated[
            Literal["text", "table", "figure"] | None,
            Field(description="Only prose ('text'), tables ('table') or figures ('figure')."),
        ] = None,
        offset: Annotated[
            int,
            Field(ge=0, le=MAX_OFFSET, description="Results to skip: the previous next_offset."),
        ] = 0,
    ) -> Annotated[CallToolResult, render.SearchDocsOutput]:
        with tool_errors("search_docs"):
            state = _state(ctx)
            text = search.check_query(query, max_chars)
            doc_ids = search.resolve_documents(state.catalog, documents)
            answer = search.search_docs(
                state.vectors(),
                state.embedder,
                text,
                top_k=top_k,
                offset=offset,
                documents=doc_ids,
                kind=kind,
                reranker=state.reranker,
            )
            return render.docs_result(answer, links, state.blobs)

    @mcp.tool(
        name="search_graph", title="Search the knowledge graph", description=SEARCH_GRAPH,
        annotations=READ_ONLY,
    )
    def search_graph(
        query: query_type,
        ctx: Context,
        hops: Annotated[
            Literal[1, 2],
            Field(description="1 = relationships of the seed entities; 2 = one edge further."),
        ] = 1,
        top_k: Annotated[
            int, Field(ge=1, le=MAX_GRAPH_TOP_K, description="Relationships to return.")
        ] = 10,
    ) -> Annotated[CallToolResult, render.SearchGraphOutput]:
        with tool_errors("search_graph"):
            state = _state(ctx)
            text = search.check_query(query, max_chars)
            index = state.vectors()
            answer = search.search_graph(
                state.graph, index, state.embedder, text, hops=hops, top_k=top_k
            )
            return render.graph_result(answer, links)

    @mcp.tool(
        name="read_doc", title="Read document chunks", description=READ_DOC,
        annotations=READ_ONLY,
    )
    def read_doc(
        document: Annotated[
            str,
            Field(
                min_length=1, max_length=MAX_NAME_CHARS,
                description="The document's file name or doc_id (as list_documents shows).",
            ),
        ],
        chunk_numbers: Annotated[
            list[Annotated[int, Field(ge=0)]],
            Field(
                min_length=1, max_length=search.MAX_READ_CHUNKS,
                description=(
                    "0-based chunk numbers, as in chunk ids '{doc_id}-{n}' and the 'chunk n "
                    "of …' line of search results; at most 5."
                ),
            ),
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, render.ReadDocOutput]:
        with tool_errors("read_doc"):
            state = _state(ctx)
            answer = search.read_doc(state.catalog, state.vectors(), document, chunk_numbers)
            return render.read_result(answer, links)

    @mcp.tool(
        name="list_documents", title="List documents", description=LIST_DOCUMENTS,
        annotations=READ_ONLY,
    )
    def list_documents(ctx: Context) -> Annotated[CallToolResult, render.ListDocumentsOutput]:
        with tool_errors("list_documents"):
            return render.catalogue_result(search.catalogue(_state(ctx).catalog), links)

    @mcp.tool(
        name="echo", title="Echo", description=ECHO, annotations=READ_ONLY,
        structured_output=False,
    )
    def echo(
        message: Annotated[str, Field(max_length=MAX_ECHO_CHARS, description="Text to send back.")],
    ) -> str:
        return message

    @mcp.prompt(
        name="research-topic",
        title="Research a topic",
        description=(
            "Research a topic with both search_docs and search_graph, reconcile them into one "
            "cited answer, and flag where they disagree."
        ),
    )
    def research_topic(
        topic: Annotated[
            str,
            Field(min_length=1, max_length=MAX_TOPIC_CHARS, description="The topic or question."),
        ],
    ) -> str:
        return RESEARCH_TOPIC.format(topic=topic.strip())

    @mcp.resource(
        "kb://documents",
        name="documents",
        title="Indexed documents",
        description=(
            "Every ready document (doc_id, name, title, version, pages, chunk and figure counts, "
            "PDF URL, updated_at) plus pending/failed counts, as compact JSON."
        ),
        mime_type="application/json",
    )
    def documents_resource() -> str:
        try:
            catalog = holder.state.catalog
            output = render.catalogue_output(search.catalogue(catalog), links)
        except Exception as exc:
            log.warning("kb://documents failed: %s", exc)
            raise ResourceError(f"cannot read the catalog: {exc}") from exc
        return output.model_dump_json()

    return mcp

