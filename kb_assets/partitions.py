"""The one partitioning of the corpus build: one dynamic partition per document, and the one
way kb adds its keys (in batches)."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from kb_assets.constants import DOCUMENTS

#: Keys are ``kb_shared.identity.doc_id`` values (``[a-z0-9._-]``, never a comma).
documents_partitions = dg.DynamicPartitionsDefinition(name=DOCUMENTS)

#: Keys per ``add_dynamic_partitions`` call. Dagster looks the keys up with one SQL ``IN``
#: list, and SQLite builds refuse more than ``SQLITE_MAX_VARIABLE_NUMBER`` bound values (999
#: before SQLite 3.32, https://www.sqlite.org/limits.html #9); ~36k keys at once fail on
#: Dagster's SQLite storage (../shared/notes/next-capabilities.md, "Dagster at scale").
PARTITION_BATCH = 500


def add_document_partitions(
    instance: dg.DagsterInstance, doc_ids: Sequence[str], *, batch: int = PARTITION_BATCH
) -> int:
    """Add ``doc_ids`` to the ``documents`` dynamic partitions, ``batch`` keys per call, in
    the order given; keys already present are kept as they are (Dagster skips them).

    Returns the number of ``add_dynamic_partitions`` calls made (0 for no keys).

    Raises:
        ValueError: ``batch`` is below 1.
    """
    if batch < 1:
        raise ValueError(f"the partition batch size must be at least 1, not {batch}")
    keys = list(doc_ids)
    calls = 0
    for start in range(0, len(keys), batch):
        instance.add_dynamic_partitions(DOCUMENTS, keys[start : start + batch])
        calls += 1
    return calls
