"""The ``obligations`` asset: the document's obligations register (issue 26) — every
must / must not / should sentence and numbered command of its chunks with the bound party,
deadline, clause and page (``kb_shared.compliance.obligations``), filed in the catalog under the version's key
(``kb_shared.stores.catalog.obligations``).

It reads only the chunks, so it can be rebuilt alone (``kb rebuild obligations``) and is
independent of ``graph``. A new version's register is filed beside the served one and served
once ``record`` switches (``record`` runs after it).
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import time
from collections import Counter

import dagster as dg

from kb_assets.assets.common import (
    check_chunks_of,
    corpus_asset,
    timing,
    version_of,
)
from kb_assets.constants import CHUNKS, MARKDOWN, OBLIGATIONS
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import StoresResource
from kb_shared.ingest.chunking import Chunk
from kb_shared.compliance.obligations import find_obligations


@corpus_asset(
    OBLIGATIONS,
    kinds={"sql"},
    inputs={"document": MARKDOWN, "chunk_list": CHUNKS},
    description=(
        "The obligations register: each must / must not / should sentence of the chunks and "
        "each numbered requirement stated as a command ('3.1.1 Limit system access …'), one "
        "row per bound party, with its role, action, deadline, clause and page, in the catalog "
        "table 'obligations' (read by search_obligations and `kb obligations`)."
    ),
)
def obligations(
    stores: StoresResource, document: MarkdownDocument, chunk_list: list[Chunk]
) -> dg.Output[StepSummary]:
    """Find the obligations of the version being built and file them under its key, replacing
    what was filed there (one transaction). Finding is cheap and deterministic: it always
    re-runs.

    Raises:
        dagster.Failure: the chunks are of another version (``check_chunks_of``).
    """
    started = time.perf_counter()
    version = version_of(stores, document)
    check_chunks_of(version, chunk_list)
    found = find_obligations(chunk_list)
    written = stores.catalog().replace_obligations(
        version.doc_id, version.version, version.key, found
    )
    seconds = time.perf_counter() - started
    modalities = dict(Counter(o.modality for o in found).most_common())
    roles = dict(Counter(o.role or o.party or "(unnamed)" for o in found).most_common(20))
    summary = StepSummary(
        doc_id=document.doc_id,
        counts={"obligations": written},
        details={"key": version.key, "modalities": modalities},
    )
    return dg.Output(
        summary,
        metadata={
            "obligations": written,
            "with_deadline": sum(1 for o in found if o.deadline),
            "modalities": dg.MetadataValue.json(modalities),
            "parties": dg.MetadataValue.json(roles),
            **timing(seconds, document.pages),
        },
    )
