"""Pieces the corpus assets share: run config, the catalog lookup, fingerprints, provider
usage metadata."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import dagster as dg
from pydantic import Field

from kb_assets.resources import StoresResource
from kb_shared.providers.base import Provider
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


def provider_usage(*providers: Provider) -> dict[str, object]:
    """Token, request and cost counters of the providers used in this step, as asset metadata
    (``{"provider_usage": {name: usage}}``); providers that count nothing (the local ones,
    ``usage() == {}``) are left out, and so is the key when none counts.

    Counters are per run because resources are built per run.
    """
    usage = {provider.name: report for provider in providers if (report := provider.usage())}
    return {"provider_usage": dg.MetadataValue.json(usage)} if usage else {}
