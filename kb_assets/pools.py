"""Dagster concurrency pools of the corpus build: which asset joins which pool, and the pool
limits from settings written to an instance.

A pool bounds how many steps of its assets run at once across every run of the instance
(Dagster "concurrency pools"; ../shared/notes/next-capabilities.md, "Dagster at scale"):
``llm`` for the model-API-bound conversion, ``vectors`` for the writers of the vector index,
``graph`` for the writer of the graph. A pool without a limit does not hold anything back.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from kb_assets.constants import EMBEDDINGS, FIGURES, GRAPH, MARKDOWN
from kb_shared.errors import DagsterInstanceError
from kb_shared.settings import Settings

LLM_POOL = "llm"
VECTORS_POOL = "vectors"
GRAPH_POOL = "graph"
POOLS = (LLM_POOL, VECTORS_POOL, GRAPH_POOL)

#: Corpus asset -> its pool. Dagster gives an asset one pool, so an asset that both calls a
#: model and writes a store joins the pool of the store (a single writer is the tighter
#: bound); its model calls are bounded per run by ``KB_PROVIDER_CONCURRENCY``.
ASSET_POOLS: Mapping[str, str] = {
    MARKDOWN: LLM_POOL,
    EMBEDDINGS: VECTORS_POOL,
    FIGURES: VECTORS_POOL,
    GRAPH: GRAPH_POOL,
}


def pool_limits(settings: Settings) -> dict[str, int]:
    """Pool name -> limit, for the pools whose ``KB_<POOL>_POOL_LIMIT`` is set."""
    limits = {
        LLM_POOL: settings.llm_pool_limit,
        VECTORS_POOL: settings.vectors_pool_limit,
        GRAPH_POOL: settings.graph_pool_limit,
    }
    return {pool: limit for pool, limit in limits.items() if limit is not None}


def apply_pool_limits(instance: dg.DagsterInstance, settings: Settings) -> dict[str, int]:
    """Write the pool limits from settings to the instance (its event-log storage keeps
    them, so the daemon and every process on the instance see them). A limit already equal
    is not rewritten; a pool whose setting is unset keeps whatever the instance has (a limit
    set in the UI or with ``dagster instance concurrency set`` stays).

    Returns the limits that were written.

    Raises:
        DagsterInstanceError: the storage does not support pools (an old SQLite instance
            without the ``concurrency_limits`` table: run ``dagster instance migrate``).
    """
    wanted = pool_limits(settings)
    if not wanted:
        return {}
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        raise DagsterInstanceError(
            "this Dagster instance's storage has no concurrency pools, so "
            f"{', '.join(sorted(wanted))} cannot be limited; run `dagster instance migrate` "
            "with DAGSTER_HOME set to it, or unset the KB_*_POOL_LIMIT settings"
        )
    current = {limit.name: limit.limit for limit in storage.get_pool_limits()}
    written = {pool: limit for pool, limit in wanted.items() if current.get(pool) != limit}
    for pool, limit in written.items():
        storage.set_concurrency_slots(pool, limit)
    return written
