"""The ``request_document`` tool: log a request that a document be added to the corpus. It
records and never fetches (an unauthenticated write that downloaded a model-supplied URL would
be an open SSRF proxy); an operator reviews the queue (``kb requests``) and approving is the
only thing that downloads. Before queueing, the server compares the title with the corpus by
tokens (``likely_match``) and returns a likely match instead. Rules and reasons:
issue 12 "request_document (MCP) and the review queue" and the mcp-utilities README
(``request_document``). No ``from __future__ import annotations`` here (see ``kb_mcp.tools``).
"""

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from kb_mcp.documents import document_list
from kb_mcp.errors import ToolProblem
from kb_mcp.render import tool_result
from kb_mcp.tools import (
    KbContext,
    KbServer,
    kb_tool,
    optional_text,
    required_text,
    state_of,
)
from kb_shared.errors import (
    DuplicateRequestError,
    FetchRefusedError,
    QueueFullError,
    RequestNotFoundError,
)
from kb_shared.fetch.fetcher import FetchPolicy, check_url
from kb_shared.identity import BIDI_CONTROLS
from kb_shared.settings import Settings
from kb_shared.stores.catalog import (
    DEFAULT_MAX_PENDING,
    REASON_MAX,
    TITLE_MAX,
    URL_MAX,
    DocumentRequestRow,
    DocumentRow,
)

#: Token-overlap score (Dice coefficient, 0–1) from which an indexed document is a likely
#: match for a requested title; the B2B example of issue 12 scores 1.0, "Retail Rules" against
#: "Retail Market Rules" 0.8, one shared word of two against three 0.4.
LIKELY_MATCH = 0.75

#: Shortest token that may stand for a longer word it begins ("spec" ~ "specification").
MIN_PREFIX = 3

#: Words that say nothing about which document is meant.
STOP_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to",
     "with"}
)

#: File-name extensions, dropped from name tokens.
EXTENSIONS = frozenset({"pdf", "md", "txt"})

#: Words that announce a version number ("Version 3", "rev 2").
VERSION_WORDS = frozenset({"version", "ver", "rev", "revision"})

#: Stored when the caller gives no reason (the column requires one).
NO_REASON = "(no reason given)"

_TOKEN = re.compile(r"[^\W_]+(?:\.\d+)*")
_VERSION = re.compile(r"v?(\d+(?:\.\d+)+)|v(\d+)")

#: The tool writes (one row, or one more ask on a pending row) and touches nothing outside kb.
QUEUE_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


#: The control characters a request's longer texts (a reason, a description) may hold: line
#: ends (LF, CR) and the tab. Any other (ESC above all) would reach the operator's terminal in
#: ``kb requests list`` / ``kb references list`` as a command, not as text.
TEXT_CONTROLS = frozenset("\n\r\t")


def check_plain_text(value: str, argument: str, refused: str, *, lines: bool = False) -> str:
    """``value`` when it holds no control character (Unicode category Cc; with ``lines``,
    ``TEXT_CONTROLS`` are allowed) and no bidirectional control (``identity.BIDI_CONTROLS``,
    which reorder how the text around them is shown): what the queue tools store is shown to
    an operator as it was sent.

    Raises:
        ToolProblem: ``refused`` with ``{reason}`` filled in ("title holds a control
            character, U+001B; send plain text"), naming ``argument`` and the character.
    """
    allowed = TEXT_CONTROLS if lines else frozenset()
    for ch in value:
        if unicodedata.category(ch) == "Cc" and ch not in allowed:
            what = "a control character"
        elif ch in BIDI_CONTROLS:
            what = f"a bidirectional control ({unicodedata.name(ch)})"
        else:
            continue
        reason = f"{argument} holds {what}, U+{ord(ch):04X}; send plain text"
        raise ToolProblem(refused.format(reason=reason))
    return value


def check_link(settings: Settings, url: str, refused: str) -> str:
    """``url`` stripped, once ``kb_shared.fetch.fetcher.check_url`` accepts its form (nothing is
    fetched: the queue tools only record links).

    Raises:
        ToolProblem: the link is refused; the message is ``refused`` with the reason filled
            in for ``{reason}``.
    """
    link = check_plain_text(url.strip(), "the link", refused)
    try:
        check_url(link, FetchPolicy.from_settings(settings))
    except FetchRefusedError as exc:
        raise ToolProblem(refused.format(reason=exc)) from exc
    return link


DESCRIPTION = f"""\
Ask an operator to add a document the corpus lacks: only when searches found nothing AND you
read kb://documents (or called list_documents) and no indexed document is the one meant
(names rarely match official titles). Give a direct https source_url to the PDF whenever you
can; at most {DEFAULT_MAX_PENDING} requests wait. This tool never downloads anything: tell the
user a request was logged for review, not that the document is now in the knowledge base.
"""


# ---------------------------------------------------------------------------------------------
# Comparing a requested title with the corpus
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TitleTokens:
    """A title split for comparison.

    Attributes:
        words: content tokens, case-folded, in order, without repeats, stop words, file
            extensions or version numbers.
        versions: version numbers named ("v3.2", "3.2", "Version 3" → "3.2", "3"), without
            the leading "v".
    """

    words: tuple[str, ...]
    versions: frozenset[str]


def title_tokens(*texts: str | None) -> TitleTokens:
    """The tokens of ``texts`` taken together (a file name, a title, a version label).

    A token is a run of letters and digits, with dotted numbers kept whole (``3.2``); a
    version is ``v`` + number, a dotted number, or a number after a version word.
    """
    words: list[str] = []
    versions: set[str] = set()
    for text in texts:
        if not text:
            continue
        after_version_word = False
        for token in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
            version = _VERSION.fullmatch(token)
            if version or (after_version_word and token.replace(".", "").isdigit()):
                versions.add(next(g for g in version.groups() if g) if version else token)
            elif token in VERSION_WORDS:
                after_version_word = True
                continue
            elif token not in STOP_WORDS and token not in EXTENSIONS and token not in words:
                words.append(token)
            after_version_word = False
    return TitleTokens(tuple(words), frozenset(versions))


def same_word(a: str, b: str) -> bool:
    """Whether two tokens name the same word: equal, or one a prefix of the other of at least
    ``MIN_PREFIX`` letters ("spec" ~ "specification", "rule" ~ "rules"). Numbers must be
    equal."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= MIN_PREFIX and short.isalpha() and long.isalpha() and long.startswith(short)


def overlap(requested: Sequence[str], indexed: Sequence[str]) -> float:
    """Dice coefficient of two token lists: ``2 × matched / (len(a) + len(b))``, each token
    matched at most once (exact matches first, then ``same_word``); 0.0 when either is empty."""
    if not requested or not indexed:
        return 0.0
    free = list(indexed)
    pending: list[str] = []
    matched = 0
    for token in requested:
        if token in free:
            free.remove(token)
            matched += 1
        else:
            pending.append(token)
    for token in pending:
        partner = next((other for other in free if same_word(token, other)), None)
        if partner is not None:
            free.remove(partner)
            matched += 1
    return 2 * matched / (len(requested) + len(indexed))


@dataclass(frozen=True, slots=True)
class TitleMatch:
    """An indexed document compared with a requested title.

    Attributes:
        document: the catalog row.
        score: the best ``overlap`` of the title with the document's file name or its title.
        other_version: both name versions and they share none: a request for another
            version, never a likely match.
    """

    document: DocumentRow
    score: float
    other_version: bool

    @property
    def likely(self) -> bool:
        """A likely match: ``score`` ≥ ``LIKELY_MATCH`` and not another version."""
        return self.score >= LIKELY_MATCH and not self.other_version


def best_match(title: str, documents: Iterable[DocumentRow]) -> TitleMatch | None:
    """The document whose name or title shares most tokens with ``title`` (ties: the first
    given), or ``None`` when none shares any."""
    asked = title_tokens(title)
    best: TitleMatch | None = None
    for row in documents:
        name = title_tokens(row.name)
        own_title = title_tokens(row.title)
        score = max(overlap(asked.words, name.words), overlap(asked.words, own_title.words))
        indexed_versions = title_tokens(row.name, row.title, row.version).versions
        other = bool(asked.versions and indexed_versions and not asked.versions & indexed_versions)
        if score > 0 and (best is None or score > best.score):
            best = TitleMatch(row, round(score, 2), other)
    return best


# ---------------------------------------------------------------------------------------------
# The tool
# ---------------------------------------------------------------------------------------------


class MatchRef(BaseModel):
    """The indexed document a requested title most likely means."""

    name: str = Field(description="File name (search_docs and read_doc take it).")
    doc_id: str
    title: str | None = None
    version: str | None = None
    status: str = Field(description="'ready' (searchable), 'pending' (being built) or 'failed'.")
    score: float = Field(description="Token overlap of the titles, 0–1 (Dice coefficient).")


class RequestDocumentOutput(BaseModel):
    """Structured content of request_document."""

    outcome: Literal["logged", "joined", "already_indexed"] = Field(
        description="'logged': a new request; 'joined': the title was already requested and "
        "this ask was added to it; 'already_indexed': nothing logged, see match."
    )
    request_id: int | None = None
    request_count: int | None = Field(None, description="How many times it has been asked for.")
    has_source_url: bool | None = Field(
        None, description="Whether the request carries a link an operator can approve at once."
    )
    match: MatchRef | None = None
    other_version: MatchRef | None = Field(
        None, description="An indexed document that differs only by version (request logged)."
    )


def _ref(match: TitleMatch) -> MatchRef:
    row = match.document
    return MatchRef(
        name=row.name, doc_id=row.doc_id, title=row.title, version=row.version,
        status=row.status, score=match.score,
    )


def _label(row: DocumentRow) -> str:
    label = f"{row.name} [{row.doc_id}]"
    details = [d for d in (row.title, row.version) if d]
    return label + (f" — {' — '.join(details)}" if details else "")


def _matched(title: str, match: TitleMatch) -> CallToolResult:
    row = match.document
    state = {
        "ready": "it is indexed and searchable",
        "pending": "it was added and is being built; it becomes searchable once built",
        "failed": f"it was added but its build failed ({row.failure_reason})",
    }.get(row.status, f"its status is {row.status}")
    text = (
        f'Not logged: the knowledge base already has a likely match for "{title}": '
        f"{_label(row)} (token overlap {match.score:.2f}); {state}. Search it with search_docs "
        f'(documents=["{row.doc_id}"]) before telling the user it is missing. If it is a '
        "different document, call request_document again with a more specific title (its "
        "official number or version)."
    )
    return tool_result(text, RequestDocumentOutput(outcome="already_indexed", match=_ref(match)))


def _logged(
    request: DocumentRequestRow, joined: bool, other: TitleMatch | None
) -> CallToolResult:
    if joined:
        text = (
            f'A request for "{request.title}" was already waiting for review (request '
            f"#{request.id}); this ask was added to it ({request.request_count} asks so far)."
        )
    else:
        text = f'Request #{request.id} for "{request.title}" was logged for an operator to review.'
    if request.source_url:
        text += (
            f" It carries a source URL ({request.source_url}), so an operator can approve and "
            "ingest it in one step."
        )
    else:
        text += (
            " It carries no source URL, so it waits until a person finds the file; a direct "
            "https link to the PDF lets it be approved in one step."
        )
    if other is not None:
        text += (
            f" The knowledge base has another version of it: {_label(other.document)}; "
            "search that one meanwhile if it helps."
        )
    text += (
        " Tell the user that a request was logged for review; do not say the document is now "
        "available: nothing was downloaded and it cannot be searched yet."
    )
    structured = RequestDocumentOutput(
        outcome="joined" if joined else "logged",
        request_id=request.id,
        request_count=request.request_count,
        has_source_url=request.source_url is not None,
        other_version=_ref(other) if other is not None else None,
    )
    return tool_result(text, structured)


def register(server: KbServer, *, max_pending: int = DEFAULT_MAX_PENDING) -> None:
    """Register ``request_document`` on ``server``; at most ``max_pending`` requests wait."""

    @kb_tool(
        server, "request_document", title="Request a document", description=DESCRIPTION,
        annotations=QUEUE_WRITE,
    )
    def request_document(
        title: required_text(TITLE_MAX, "Official title (and number or version)."),
        checked_indexed_documents: Annotated[
            bool,
            Field(
                description="True only if no indexed document is the one meant."
            ),
        ],
        ctx: KbContext,
        reason: optional_text(REASON_MAX, "The user's question.") = None,
        source_url: optional_text(URL_MAX, "Direct https link to the PDF.") = None,
    ) -> Annotated[CallToolResult, RequestDocumentOutput]:
        if not checked_indexed_documents:
            raise ToolProblem(
                "nothing was logged: first read kb://documents (or call list_documents) and "
                "check that no indexed document is the one you want — a file name rarely "
                "matches an official title, and a search that finds nothing is not proof the "
                "document is absent. Then call request_document again with "
                "checked_indexed_documents=true."
            )
        unplain = "nothing was logged: {reason}."
        check_plain_text(title, "title", unplain)
        check_plain_text(reason or "", "reason", unplain, lines=True)
        state = state_of(ctx)
        if source_url is not None and source_url.strip():
            check_link(
                state.settings, source_url,
                "nothing was logged: source_url is not a link kb could download ({reason}). "
                "Give a direct https link to the PDF on the publisher's site, or leave "
                "source_url out.",
            )
        listing = document_list(state.catalog)
        match = best_match(title, [*listing.ready, *listing.pending, *listing.failed])
        if match is not None and match.likely:
            return _matched(title.strip(), match)
        other = match if match is not None and match.score >= LIKELY_MATCH else None
        try:
            request = state.requests.add_document_request(
                title, reason if reason and reason.strip() else NO_REASON, source_url,
                checked_indexed_documents=True, max_pending=max_pending,
            )
            joined = False
        except DuplicateRequestError:
            try:
                request = state.requests.join_document_request(title)
            except RequestNotFoundError as exc:  # decided between the two statements
                raise ToolProblem(f"{exc}; it was decided just now — call again") from exc
            joined = True
        except QueueFullError as exc:
            try:  # a repeat of a pending title adds no row, so a full queue still counts it
                request = state.requests.join_document_request(title)
            except RequestNotFoundError:
                raise ToolProblem(
                    f"nothing was logged: {exc}. Tell the user the request queue is full and "
                    "the operator has to review it first."
                ) from exc
            joined = True
        except ValueError as exc:
            raise ToolProblem(f"nothing was logged: {exc}") from exc
        return _logged(request, joined, other)
