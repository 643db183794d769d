"""Pieces the corpus assets share: their decorator, run config, the catalog lookup, the
citation payload of a point, fingerprints, timing and provider usage metadata."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field

from kb_assets.constants import BLOB_IO, CORPUS_GROUP, MARKDOWN
from kb_assets.outputs import MarkdownDocument
from kb_assets.partitions import documents_partitions
from kb_assets.pools import ASSET_POOLS
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.ingest.chunking import Chunk
from kb_shared.search.citations import PointPayload
from kb_shared.errors import SettingsError
from kb_shared.providers.base import Provider
from kb_shared.settings import Settings
from kb_shared.stores.catalog import DocumentRow, DocumentVersionRow

def backfill_batch_setting() -> int:
    """``KB_BACKFILL_BATCH`` from the environment; its default (25) when the environment
    holds an invalid setting, so importing the assets never fails on one (``kb`` and the
    run's resources report it, in one line, where they read settings)."""
    try:
        return Settings().backfill_batch
    except SettingsError:
        return int(Settings.model_fields["backfill_batch"].default)


#: Partitions per run of a backfill from the UI (and of ``kb rebuild --all``): the
#: ``KB_BACKFILL_BATCH`` setting, read when the code location loads. A run over several
#: documents does each one's work in turn and fails only the documents that fail
#: (``kb_assets.assets.batch``); measured: benchmarks/results/partitions-2026-12-01.md.
BACKFILL_PARTITIONS_PER_RUN = backfill_batch_setting()
BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_PARTITIONS_PER_RUN)


def corpus_asset(
    name: str,
    *,
    kinds: set[str],
    description: str,
    inputs: Mapping[str, str] | None = None,
    after: Sequence[str] = (),
    checks: Mapping[str, str] | None = None,
    warning_checks: Mapping[str, str] | None = None,
    stored: bool = True,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """``@dg.asset`` for one per-document corpus asset, applied to its one document's work:
    partitioned by ``documents_partitions``, in ``CORPUS_GROUP``, its output kept by the blob IO
    manager (``io_manager.BlobIOManager``) unless ``stored`` is false (``record`` only returns a
    ``MaterializeResult``). It joins its concurrency pool (``pools.ASSET_POOLS``; none for the
    cheap steps) and backfills with ``BACKFILL_POLICY``: its body (``batch.document_step``) does
    the work for the step's one partition, or for each document of a batched run, whose inputs
    and output are ``io_manager.Batch``es (so they are typed ``Any`` for Dagster).

    The decorated function takes, by name, what it uses of ``context``, ``config``
    (``BuildConfig``), ``stores``, ``doc_id`` (the document's partition key), other resources
    and its inputs; it returns its output event (``Output``, or ``MaterializeResult`` when not
    ``stored``), or yields it and then a result per check.

    Args:
        inputs: parameter name -> name of the upstream asset whose output it receives.
        after: assets it runs after without reading their output (ordering only).
        checks: its blocking asset checks, check name -> description.
        warning_checks: its non-blocking checks (a failure is reported with severity ``WARN`` and
            the document still builds), check name -> description.
    """
    # batch imports this module (BuildConfig, failure_text): imported here, not at the top
    from kb_assets.assets.batch import document_step  # noqa: PLC0415

    def decorate(work: Callable[..., Any]) -> dg.AssetsDefinition:
        compute = document_step(
            work,
            inputs=list(inputs or {}),
            checks=[*(checks or {}), *(warning_checks or {})],
            stored=stored,
        )
        with warnings.catch_warnings():
            # Dagster 1.13 marks `backfill_policy` beta and would warn on every import of kb
            warnings.filterwarnings(
                "ignore", message=r"Parameter `backfill_policy`", category=dg.BetaWarning
            )
            return dg.asset(
                name=name,
                partitions_def=documents_partitions,
                group_name=CORPUS_GROUP,
                kinds=kinds,
                io_manager_key=BLOB_IO if stored else None,
                # Any: a batched run passes a ``Batch`` where a single run passes one output
                ins={
                    param: dg.AssetIn(upstream, dagster_type=dg.Any)
                    for param, upstream in (inputs or {}).items()
                },
                deps=list(after) or None,
                check_specs=[
                    *(dg.AssetCheckSpec(check, asset=name, blocking=True, description=text)
                      for check, text in (checks or {}).items()),
                    *(dg.AssetCheckSpec(check, asset=name, blocking=False, description=text)
                      for check, text in (warning_checks or {}).items()),
                ] or None,
                description=description,
                pool=ASSET_POOLS.get(name),
                backfill_policy=BACKFILL_POLICY,
            )(compute)

    return decorate


class BuildConfig(dg.Config):
    """Run config every corpus asset accepts.

    ``force`` re-does the work even when the inputs are unchanged (``kb rebuild`` sets it on
    the asset being rebuilt); without it an unchanged document costs no conversion and no
    embedding call.
    """

    force: bool = Field(False, description="Redo the work even if the inputs are unchanged.")


def require_document(stores: StoresResource, doc_id: str) -> DocumentRow:
    """The catalog row of a partition.

    Raises:
        dagster.Failure: the partition has no catalog row (it was added to Dagster without
            the intake, or deleted); the message says to use ``kb add``.
    """
    row = stores.catalog().find_by_doc_id(doc_id)
    if row is None:
        raise dg.Failure(
            description=(
                f"document {doc_id!r} is not in the catalog: add files with `kb add PATH`, "
                "the inbox folder or the add_documents job, not by adding a partition by hand"
            ),
            allow_retries=False,
        )
    return row


def fingerprint(*parts: Any) -> str:
    """SHA-256 (hex) over the JSON of ``parts`` (sorted keys): a stable input fingerprint."""
    raw = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def provider_usage(*providers: Provider) -> dict[str, object]:
    """Token, request and cost counters of the providers used in this step, as asset metadata
    (``{"provider_usage": {name: usage}}``); providers that count nothing (the local ones,
    ``usage() == {}``) are left out, and so is the key when none counts.

    Counters are per run because resources are built per run.
    """
    usage = {provider.name: report for provider in providers if (report := provider.usage())}
    return {"provider_usage": dg.MetadataValue.json(usage)} if usage else {}


def point_payload(
    document: MarkdownDocument,
    *,
    page_start: int | None,
    page_end: int | None,
    of_version: DocumentVersionRow | None = None,
    **fields: Any,
) -> PointPayload:
    """The citation payload of one point (chunk or figure) of ``document``: its name, title,
    version and blob keys (``kb_shared.layout``), the page span, and ``fields``
    (``heading_path``, ``chunk_index`` or ``figure``; see ``PointPayload.build``).

    Args:
        of_version: the document version the point belongs to (``version_of``): its file is
            the cited PDF (``layout.pdf_key(of_version.key)``); from version 2 on it is
            cited by number: "2" reads "Version 2", and a labelled one "Version 1.1 (kb
            version 2)".

    Raises:
        ValueError: ``page_end < page_start``.
    """
    key = of_version.key if of_version is not None else document.doc_id
    cited = document.version
    if of_version is not None and of_version.version > 1:
        # from version 2 on the citation names kb's version too: two versions of a document
        # often print the same label ("1.1"), and a reader must see which one answered
        cited = f"{cited} (kb version {of_version.version})" if cited else str(of_version.version)
    return PointPayload.build(
        doc_id=document.doc_id,
        name=document.name,
        title=document.title,
        version=cited,
        page_start=page_start,
        page_end=page_end,
        pdf_key=layout.pdf_key(key),
        markdown_key=layout.markdown_key(document.doc_id),
        **fields,
    )


def version_to_build(stores: StoresResource, doc_id: str) -> DocumentVersionRow:
    """The version of ``doc_id`` a build makes (the ``markdown`` step asks): its newest one,
    whatever its status: a pending or failed new version, else the serving one (a rebuild).

    Raises:
        dagster.Failure: the partition has no catalog row (``require_document``).
    """
    require_document(stores, doc_id)
    return stores.catalog().versions(doc_id)[-1]


def version_being_built(
    stores: StoresResource, doc_id: str, failed_step: str
) -> DocumentVersionRow | None:
    """The version a build of ``doc_id`` worked on when its step ``failed_step`` failed (what
    the failure hooks mark failed): the newest (``version_to_build``) when ``markdown``
    failed, else the version its stored Markdown was converted from (``version_of``: a
    partial rebuild of the served version works on it while a newer version may wait), the
    newest when that is unknown. ``None`` for a document without versions."""
    from kb_assets.io_manager import StepRecords  # PyArrow: the failure paths only

    history = stores.catalog().versions(doc_id)
    if not history:
        return None
    if failed_step != MARKDOWN:
        document = StepRecords(stores.blobs()).previous_markdown(doc_id)
        built = _converted_from(history, document) if document is not None else None
        if built is not None:
            return built
    return history[-1]


def _converted_from(
    history: Sequence[DocumentVersionRow], document: MarkdownDocument
) -> DocumentVersionRow | None:
    """The version of ``history`` whose file ``document`` was converted from (same SHA-256)."""
    return next((v for v in history if v.sha256 == document.sha256), None)


def check_chunks_of(version: DocumentVersionRow, chunk_list: Sequence[Chunk]) -> None:
    """Refuse chunks made for another version than ``version`` (each chunk's ``document`` is
    the version key it was cut for: ``chunks`` asset), so a partial rebuild after a failed
    new version never files one version's chunks under another's key.

    Raises:
        dagster.Failure: a chunk of another version; the message says to build every step.
    """
    other = sorted({c.document for c in chunk_list if c.document != version.key})
    if other:
        raise dg.Failure(
            description=(
                f"the stored chunks are of {', '.join(other)}, not of version {version.version} "
                f"({version.key}) whose Markdown this build has; build every step: "
                f"`kb build {version.doc_id}`"
            ),
            allow_retries=False,
        )


def version_of(stores: StoresResource, document: MarkdownDocument) -> DocumentVersionRow:
    """The version ``document`` (a stored ``markdown`` output) was converted from, found by
    its file's SHA-256, so every later step of a build works on the version its Markdown came
    from, whatever was added since (``kb_shared.identity.version_key`` says where it lives).

    Raises:
        dagster.Failure: no version of the document has that file (it was deleted and added
            again); the message says to rebuild from ``markdown``.
    """
    require_document(stores, document.doc_id)
    version = _converted_from(stores.catalog().versions(document.doc_id), document)
    if version is not None:
        return version
    raise dg.Failure(
        description=(
            f"the stored Markdown of {document.doc_id!r} comes from a file that is no version "
            f"of it; rebuild from the markdown step (`kb build {document.doc_id}`)"
        ),
        allow_retries=False,
    )


def timing(seconds: float, pages: int) -> dict[str, float]:
    """Step metadata of a step that took ``seconds``: ``seconds`` (to the millisecond) and
    ``seconds_per_page`` (0.0 for a document without pages, a ``.md``/``.txt`` file)."""
    return {
        "seconds": round(seconds, 3),
        "seconds_per_page": round(seconds / pages, 4) if pages else 0.0,
    }


def failure_text(step_key: str, error: BaseException | None) -> str:
    """The reason a build stopped, as ``kb status`` and ``list_documents`` show it:
    ``"<step>: <message>"`` — a ``dagster.Failure``'s description (the converter's reason),
    else ``"<ExceptionType>: <message>"``."""
    if isinstance(error, dg.Failure) and error.description:
        return f"{step_key}: {error.description}"
    if error is None:
        return f"{step_key}: failed (see the run's event log in the Dagster UI)"
    message = str(error).strip()
    return f"{step_key}: {type(error).__name__}" + (f": {message}" if message else "")
