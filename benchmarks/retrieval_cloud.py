"""The cloud path of the retrieval benchmark (``make bench-cloud``): Gemini embeddings and
Cohere rerank, scored on the same eval sets, points and hit rules as the offline default.

``python -m benchmarks.retrieval --cloud`` reads the keys the way kb does
(``kb_shared.settings.Settings``: ``GEMINI_API_KEY``/``GOOGLE_API_KEY``, ``COHERE_API_KEY``).
Without both it prints which are missing and exits 0 having measured nothing: no figure is
ever made up for a path that did not run.

With both, per eval set (issue 14, "Cloud path"):

* the set's stored points are embedded by ``GeminiEmbedder`` from the text the pipeline
  embeds (``benchmarks.retrieval.embedding_inputs``) into a second index, cached in
  ``benchmarks/work/retrieval-candidates`` by a fingerprint of model and texts, so a re-run
  pays only for the queries;
* four configurations join the offline ones: ``dense [gemini]``, ``search_docs [gemini]``
  (Gemini vectors, offline re-ordering), ``search_docs [cohere]`` (local vectors, Cohere
  orders the fused candidates) and ``search_docs [gemini+cohere]`` (what a deployment with
  both keys serves). Each is asked every question once (no repeated timed passes: they cost
  money and trial keys allow 10 calls a minute); their latency includes the network.

The report is ``benchmarks/results/retrieval-<date>-cloud.md`` with a "Cloud path vs
offline default" section and each provider's usage and cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: ``Settings`` fields the cloud path needs, and the variables they are read from.
CLOUD_KEYS = (
    ("gemini_api_key", "GEMINI_API_KEY (or GOOGLE_API_KEY)"),
    ("cohere_api_key", "COHERE_API_KEY"),
)

#: Key of the Gemini index among the candidate indexes (file names, labels).
GEMINI = "gemini"

#: Labels of the cloud configurations, in report order.
CLOUD_DENSE = f"dense [{GEMINI}]"
CLOUD_SHIPPED = f"search_docs [{GEMINI}]"
CLOUD_RERANK_ONLY = "search_docs [cohere]"
CLOUD_BOTH = f"search_docs [{GEMINI}+cohere]"
CLOUD_CONFIGS = (CLOUD_DENSE, CLOUD_SHIPPED, CLOUD_RERANK_ONLY, CLOUD_BOTH)


def missing_cloud_keys(settings: Any) -> list[str]:
    """The variables of ``CLOUD_KEYS`` that ``settings`` (a ``Settings``) has no key for."""
    return [variable for name, variable in CLOUD_KEYS if getattr(settings, name) is None]


@dataclass
class CloudProviders:
    """The cloud models the benchmark calls: an ``Embedder`` and a ``Reranker``."""

    embedder: Any
    reranker: Any

    def usage_lines(self) -> list[str]:
        """One line per provider: its name and ``usage()`` (tokens, calls, cost)."""
        return [f"`{p.name}`: " + ", ".join(f"{k} {v}" for k, v in p.usage().items())
                for p in (self.embedder, self.reranker)]

    def close(self) -> None:
        """Close both providers' clients."""
        self.embedder.close()
        self.reranker.close()


def cloud_providers(settings: Any) -> CloudProviders:
    """``GeminiEmbedder`` and ``CohereReranker`` from ``settings`` (model, dimension, retry).

    Raises:
        kb_shared.errors.ProviderError (its role's subclass): a key is not set.
    """
    from kb_shared.providers.cloud_embeddings import GeminiEmbedder  # noqa: PLC0415
    from kb_shared.providers.cloud_rerank import CohereReranker  # noqa: PLC0415

    return CloudProviders(GeminiEmbedder.from_settings(settings),
                          CohereReranker.from_settings(settings))


@dataclass
class CloudSearches:
    """What ``cloud_searches`` adds to one eval set's run."""

    searches: dict[str, tuple[str, Callable[[str], Any]]]
    candidate: Any  # the Gemini index: a benchmarks.retrieval.CandidateIndex
    opened: list[Any]


def cloud_searches(
    set_name: str,
    index: Any,
    embedder: Any,
    points: Sequence[Any],
    inputs: Sequence[tuple[str, str | None, str]],
    providers: CloudProviders,
) -> CloudSearches:
    """The four cloud configurations (module docstring) over ``points``: ``index`` and
    ``embedder`` are the live local ones; the Gemini index is embedded now or taken from
    the cache (``benchmarks.retrieval.embedded_index``)."""
    from benchmarks.retrieval import (  # noqa: PLC0415
        dense_config,
        embedded_index,
        shipped_config,
    )
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    gemini = providers.embedder
    made = embedded_index(set_name, GEMINI, gemini.model, gemini.dimension, lambda: gemini,
                          points, inputs, embed=True)
    assert made is not None  # embed=True always gives an index
    cloud_index = SqliteVectorIndex(made.path)
    cloud_index.open(made.model, made.dimension, create=False)
    cohere = providers.reranker
    searches = {
        CLOUD_DENSE: (f"dense only with {gemini.model}", dense_config(cloud_index, gemini)),
        CLOUD_SHIPPED: (f"search_docs with {gemini.model}, offline re-ordering",
                        shipped_config(cloud_index, gemini)),
        CLOUD_RERANK_ONLY: (f"search_docs with the local model, {cohere.name} orders the "
                            "fused candidates", shipped_config(index, embedder, cohere)),
        CLOUD_BOTH: (f"search_docs with {gemini.model} and {cohere.name}",
                     shipped_config(cloud_index, gemini, cohere)),
    }
    return CloudSearches(searches, made, [cloud_index])


def add_cloud_section(report: Any, set_runs: Sequence[Any], providers: CloudProviders) -> None:
    """"Cloud path vs offline default": R@1/R@5/MRR and latency of the offline
    ``search_docs`` and each cloud configuration per set, with the difference in questions,
    then each provider's usage."""
    from benchmarks.common import latency_summary  # noqa: PLC0415
    from benchmarks.retrieval import SHIPPED, scores_of  # noqa: PLC0415

    report.heading("Cloud path vs offline default")
    rows = []
    for set_run in set_runs:
        base = scores_of(set_run, SHIPPED)
        for label in (SHIPPED, *CLOUD_CONFIGS):
            if label not in set_run.runs:
                continue
            scores = scores_of(set_run, label)
            lat = latency_summary(set_run.runs[label].seconds)
            delta = round((scores.recall_at_5 - base.recall_at_5) * scores.questions)
            rows.append([set_run.eval_set.name, f"`{label}`", f"{scores.recall_at_1:.3f}",
                         f"{scores.recall_at_5:.3f}", f"{scores.mrr:.3f}",
                         "—" if label == SHIPPED else f"{delta:+d}",
                         f"{lat.p50_ms:.0f}"])
    report.table(("set", "configuration", "R@1", "R@5", "MRR",
                  "R@5 vs offline (questions)", "p50 ms"), rows, align="llrrrrr")
    report.text(
        "Same points, questions and hit rules as the offline rows; the Gemini index holds "
        "the points embedded from the text the pipeline embeds. Cloud configurations ask "
        "each question once; their latency includes the network round trips.\n\n"
        + "\n".join(f"- {line}" for line in providers.usage_lines())
    )
