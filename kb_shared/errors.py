"""The exceptions kb raises on purpose. Every message is written for the person (or model)
who has to act on it: what went wrong, and what to do next."""

from __future__ import annotations


class KbError(Exception):
    """Root of every error kb raises deliberately."""


class StoreError(KbError):
    """A store could not be reached or refused an operation."""


class StoreUnavailableError(StoreError):
    """A store is down or unreachable (connection refused, timeout, bad credentials)."""


class SchemaMissingError(StoreError):
    """The store's tables do not exist yet (nothing was ever built there, or ``kb db init``
    was not run against a server database)."""


class EmbeddingMismatchError(StoreError):
    """The vector index was built with another embedding model or dimension.

    Mixing vectors from two models in one index gives silent garbage, so opening refuses;
    the message names both models and says to re-embed (``kb rebuild embeddings --all --reset``).
    """


class DocumentNotFoundError(KbError):
    """A document name or id that the catalog does not hold."""


class DocumentBusyError(KbError):
    """A document a live build is writing cannot be deleted now: what that build wrote after
    the delete would stay behind. The message names the run and says what to do."""


class ConversionError(KbError):
    """A PDF that cannot become Markdown: scanned (no text layer), encrypted, corrupt,
    empty, not a PDF, or in a font with no Unicode mapping. The message says which and what
    the person can do about it."""


class IntakeError(KbError):
    """An intake batch refused as a whole (e.g. the duplicate lookup itself failed)."""


class ProviderError(KbError):
    """A model provider failed after its retries (bad key, missing model, exhausted retries).

    Attributes:
        role: which model failed (``"embedding"``, ``"rerank"``, ``"conversion"``, ...), so a
            caller can say which one without guessing from the call site.
    """

    role: str = "model"


class EmbeddingError(ProviderError):
    """The embedding model failed (documents, queries, figures or entity names)."""

    role = "embedding"


class RerankError(ProviderError):
    """The rerank model failed; search can still answer in fusion order."""

    role = "rerank"


class IdentityError(KbError, ValueError):
    """A name that cannot become a document identity (empty, or nothing left after slugging).

    Also a ``ValueError``, so callers validating input with ``except ValueError`` still catch it.
    """


class SettingsError(KbError, ValueError):
    """A ``KB_*`` setting with a bad value; the message names the variable, the value and the
    accepted range, one line per bad setting."""


class DuplicateDocumentError(KbError):
    """An upload refused because the catalog already holds the same document.

    Attributes:
        name: the refused name (trimmed).
        field: which identity collided: ``"name"`` (same normalised name), ``"sha256"``
            (same content under another name) or ``"doc_id"`` (another name that slugs to the
            same ``doc_id``).
        existing: the row already in the catalog (a ``DocumentRow``).
    """

    def __init__(self, message: str, *, name: str, field: str, existing: object) -> None:
        super().__init__(message)
        self.name = name
        self.field = field
        self.existing = existing


class RequestRefusedError(KbError):
    """A document or reference request that the queue refuses (see the subclasses)."""


class QueueFullError(RequestRefusedError):
    """The queue already holds its ceiling of pending requests."""


class DuplicateRequestError(RequestRefusedError):
    """A pending request for the same title (document queue) or URL (reference queue) exists."""


class RequestNotFoundError(KbError, LookupError):
    """A request id the queue does not hold."""


class ReferenceNotFoundError(KbError, LookupError):
    """A registered reference page id the catalog does not hold (``kb references remove``)."""


class QueryError(KbError, ValueError):
    """A search query that cannot be run as given (empty, or longer than
    ``Settings.max_query_chars``); the message says what to send instead."""


class EmptyCorpusError(KbError):
    """A search over a corpus with nothing indexed: no vector index exists yet, or it holds no
    points. The caller decides how to tell the user to add documents."""


class NotionSyncError(KbError):
    """The Notion compliance-tracker sync could not read the tracker: a setting is missing,
    the token or id is refused, or Notion kept failing after the retries. Nothing was written;
    the message names the setting or the HTTP status and what to do."""


class NotionSchemaError(NotionSyncError):
    """The tracker's properties no longer match the schema kb maps (a property renamed,
    removed or given another type, or a value kb cannot store). The message names each
    property and page concerned; nothing was written."""


class SyncRefusedError(KbError):
    """A full-snapshot sync that would empty the table or delete more than half of it; the
    previous snapshot is kept. ``read``, ``stored`` and ``would_delete`` carry the counts the
    message gives; re-run with ``force=True`` to apply it anyway."""

    def __init__(self, message: str, *, read: int, stored: int, would_delete: int) -> None:
        super().__init__(message)
        self.read = read
        self.stored = stored
        self.would_delete = would_delete


class AerWorkbookError(KbError, ValueError):
    """An AER retail-performance workbook that does not fit the layout kb maps (an unknown
    sheet shape, an empty or numeric heading, a quarter label that does not parse, a formula
    without a stored result, ...). The whole workbook is refused, never mapped by guess.

    ``file``, ``sheet`` and ``cell`` (each None when not applicable) and ``reason`` are
    also in the message: ``"<file>: sheet '<sheet>', cell <cell>: <reason>"``.
    """

    def __init__(self, file: str, sheet: str | None, cell: str | None, reason: str) -> None:
        where = [file]
        if sheet is not None:
            where.append(f"sheet {sheet!r}")
        if cell is not None:
            where.append(f"cell {cell}")
        super().__init__(f"{', '.join(where)}: {reason}")
        self.file = file
        self.sheet = sheet
        self.cell = cell
        self.reason = reason


class AerReleasePageError(KbError, ValueError):
    """An AER release page kb cannot take its workbooks from: it links no ``.xlsx``/``.xlsm``
    file, or two of its links give different workbooks under one file name
    (``kb_shared.market.aer_source``). Nothing was downloaded into the catalog."""


class FetchError(KbError):
    """A URL download that did not produce a document (``kb_shared.fetch.fetcher``). Nothing was
    written anywhere: the fetcher only ever returns bytes.

    Attributes:
        url: the URL the caller asked for (a redirect hop is named in the message).
        reason: a short code for the cause, listed on the subclasses.
        received: body bytes read before the fetch stopped (0 when no body was read).
    """

    def __init__(self, message: str, *, url: str, reason: str, received: int = 0) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason
        self.received = received


class FetchRefusedError(FetchError):
    """kb's fetch policy said no; retrying the same URL gives the same answer. ``reason`` is
    one of ``url`` (unparseable, no host, credentials in it), ``scheme`` (not https, or http
    for a host not listed in ``KB_FETCH_ALLOW_HTTP_HOSTS``), ``address`` (a resolved address
    is not public), ``redirect_loop``, ``too_many_redirects``, ``content_type``,
    ``content_encoding``, ``magic`` (the bytes are not what the content type claims),
    ``too_large`` (past the size cap), ``not_workbook`` (a ZIP without ``xl/workbook.xml``) or
    ``binary`` (a page labelled HTML holding a NUL byte).
    """


class FetchFailedError(FetchError):
    """The download could not complete; it may work later. ``reason`` is one of ``dns``,
    ``connect``, ``tls`` (certificate or host-name verification failed), ``timeout``
    (connect, read or total), ``protocol`` (a malformed HTTP answer), ``network`` (the
    connection broke mid-transfer) or ``status`` (an answer other than 200 or a redirect,
    or a redirect without a Location)."""


class ExposureError(KbError):
    """Refusal to serve a non-loopback address without tokens or ``--public``
    (``kb_shared.access.exposure_problem``: the MCP server and the upload page)."""


class DagsterInstanceError(KbError):
    """The Dagster instance kb would open does not fit the settings (``kb_assets.instance``,
    ``kb_assets.pools``): a ``KB_DAGSTER_POSTGRES_URL`` that is not a ``postgresql://`` URL,
    an edited ``dagster.yaml`` that keeps SQLite storage while that URL is set, or a storage
    without concurrency pools. Nothing was changed; the message says what to do."""


class MigrationError(StoreError):
    """``kb migrate`` could not copy a store faithfully (``kb_shared.stores.migrate``): the
    counts after copying differ, a stored item cannot be rebuilt on the target, or a source
    or target is not one the command supports. The message names the store and the item."""


class MigrationRefusedError(MigrationError):
    """A ``kb migrate`` target already holds data the source does not (other ids, other
    values, another embedding model); nothing was written. ``--replace`` overwrites it."""


class BlobStoreFullError(StoreError, OSError):
    """A blob write the filesystem refused for lack of room (``ENOSPC``, ``EDQUOT`` or
    ``EFBIG``; ``kb_shared.stores.blobs``). Nothing is left under the key: the temporary file
    (``file://``) or the partial object (other fsspec backends) is removed. Also an
    ``OSError``, so code that catches the filesystem's own error still catches it.

    Attributes:
        root: the store's root URL; ``key``: the blob being written; ``size``: its length in
        bytes; ``errno``: the filesystem's error number (as on any ``OSError``).
    """

    def __init__(self, message: str, *, root: str, key: str, size: int, errno: int) -> None:
        super().__init__(message)
        self.root = root
        self.key = key
        self.size = size
        self.errno = errno


class EditionLinkError(KbError, ValueError):
    """A link of two documents as editions of one series that the catalog refuses: the
    previous edition is unknown or being deleted, is the document itself, already has a next
    edition, or the link would make a loop (``kb_shared.stores.catalog.editions``). The
    message names what to link instead; nothing was written."""


class ChangeSnapshotError(KbError, ValueError):
    """A stored snapshot of a document version (``kb_shared.compliance.changes.Snapshot.from_json``)
    that is not the JSON layout this kb writes; the message says what is wrong and that
    rebuilding the document's ``changes`` asset writes it again."""
