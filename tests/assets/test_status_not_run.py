"""``kb status`` after a failed run: the assets the run planned but never started read
``not_run``, not ``failed`` (Dagster marks them failed; new-user trial, 2026-12-07)."""

from __future__ import annotations

import pytest

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import CORPUS_UPSTREAM
from kb_assets.partitions import NOT_RUN, not_run_after_failures

ORDER = ("markdown", "chunks", "obligations", "changes", "embeddings", "graph", "figures", "record")


def test_the_upstream_map_is_the_asset_definitions_inputs() -> None:
    upstream = {
        definition.key.path[-1]: {key.path[-1] for key in definition.dependency_keys}
        for definition in CORPUS_ASSETS
    }
    assert upstream == {asset: set(inputs) for asset, inputs in CORPUS_UPSTREAM.items()}
    assert tuple(CORPUS_UPSTREAM) == ORDER


def test_after_a_failed_markdown_the_other_seven_did_not_run() -> None:
    states = dict.fromkeys(ORDER, "failed")
    assert not_run_after_failures(states, CORPUS_UPSTREAM) == {
        "markdown": "failed", **dict.fromkeys(ORDER[1:], NOT_RUN)
    }


def test_a_failed_embeddings_step_leaves_figures_as_it_ran_and_graph_and_record_not_run() -> None:
    # figures does not wait for embeddings: it ran in that run (and failed on its own here);
    # graph waits for the embeddings, record for everything.
    states = {
        "markdown": "materialized", "chunks": "materialized", "obligations": "materialized",
        "changes": "materialized", "embeddings": "failed", "graph": "failed",
        "figures": "failed", "record": "failed",
    }
    assert not_run_after_failures(states, CORPUS_UPSTREAM) == {
        **states, "graph": NOT_RUN, "record": NOT_RUN
    }


@pytest.mark.parametrize("state", ["materialized", "in_progress", "missing"])
def test_other_states_are_left_as_they_are(state: str) -> None:
    states = {"markdown": "failed", **dict.fromkeys(ORDER[1:], state)}
    assert not_run_after_failures(states, CORPUS_UPSTREAM) == states
