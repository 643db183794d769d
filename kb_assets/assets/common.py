"""Pieces the corpus assets share: run config, the catalog lookup, fingerprints."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import dagster as dg
from pydantic import Field

from kb_assets.constants import ASSET_OUTPUT_KEY
from kb_assets.outputs import StepSummary
from kb_assets.resources import StoresResource
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import DocumentRow


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


def previous_summary(blobs: BlobStore, asset: str, doc_id: str) -> StepSummary | None:
    """The summary the asset stored on its last successful run for this document, if any."""
    key = ASSET_OUTPUT_KEY.format(asset=asset, doc=doc_id)
    if not blobs.exists(key):
        return None
    return StepSummary.from_json(json.loads(blobs.get(key)))


def provider_usage(*providers: object) -> dict[str, object]:
    """Token, request and cost counters of the cloud providers used in this step, as asset
    metadata (``{"provider_usage": {...}}``); empty for local providers, which count nothing.

    Each cloud provider exposes ``usage() -> dict`` (``kb_shared.providers.cloud_common``);
    counters are per run because resources are built per run.
    """
    usage: dict[str, object] = {}
    for provider in providers:
        report = getattr(provider, "usage", None)
        if provider is not None and callable(report):
            usage[getattr(provider, "name", type(provider).__name__)] = report()
    return {"provider_usage": dg.MetadataValue.json(usage)} if usage else {}
