"""The one partitioning of the corpus build: one dynamic partition per document."""

from __future__ import annotations

import dagster as dg

from kb_assets.constants import DOCUMENTS

#: Keys are ``kb_shared.identity.doc_id`` values (``[a-z0-9._-]``, never a comma).
documents_partitions = dg.DynamicPartitionsDefinition(name=DOCUMENTS)
