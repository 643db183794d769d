"""The quality gate: ``retrieval_eval`` (group ``quality``) runs the eval sets that apply to the
current corpus through search_docs' own code and records the figures, and the asset check
``retrieval_above_floors`` warns when one falls below its floor.

* **Sets.** ``<eval dir>/<name>/questions.jsonl`` (``KB_EVAL_DIR``, default ``<home>/eval``;
  format and hit rule in ``kb_shared.search.evaluation``). A question counts when every evidence
  document is ready in the corpus, so a partial corpus is scored on what it holds.
* **Search.** ``kb_shared.search.retrieval.search_docs`` with the reranker the MCP server would use
  (``kb_shared.providers.factory.reranker``), top 10: the figures are what a user gets.
* **Metadata** per set: ``<set>/recall_at_1|recall_at_5|recall_at_10|mrr`` and
  ``<set>/<kind>/mrr`` as floats (Dagster plots each across materialisations), question
  counts, and a Markdown table. Materialised on demand and, by ``quality_automation_sensor``,
  after documents are recorded (``AFTER_BUILDS``).
* **Floors** live in ``retrieval_floors.toml`` beside this module, with the date and commit
  they were measured at; the check is a warning (``WARN``), never a failed build.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from kb_assets.constants import QUALITY_GROUP, RECORD, RETRIEVAL_EVAL
from kb_assets.resources import Providers, StoresResource
from kb_shared.search.acronyms import AcronymTable, acronyms_for
from kb_shared.search.evaluation import (
    EvalSet,
    Retrieved,
    SetOutcome,
    find_eval_sets,
    run_eval_set,
)
from kb_shared.providers import factory
from kb_shared.search.retrieval import search_docs
from kb_shared.settings import Settings
from kb_shared.stores.readers import VectorReader

#: Results asked per question: Recall@10 and MRR over the top 10 (``kb_shared.search.evaluation``).
EVAL_TOP_K = 10

#: The floors file (TOML: ``measured_on``, ``commit``, then ``[<set>]`` metric floors and
#: ``[<set>.kinds]`` MRR floors per question kind).
FLOORS_FILE = Path(__file__).with_name("retrieval_floors.toml")

#: Name of the asset check.
CHECK_FLOORS = "retrieval_above_floors"

#: Set-level metrics recorded and checked (``kb_shared.search.evaluation.Scores`` fields).
SET_METRICS = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr")

#: When the automation sensor requests a run: a document was recorded since the last
#: evaluation and no build or evaluation is running. Not ``eager()``: that waits for every
#: partition of ``record``, and a failed document never has one.
AFTER_BUILDS = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)

#: Metadata key naming the eval folder when it holds no set for this corpus.
SKIPPED = "skipped"


def eval_folder(settings: Settings) -> Path:
    """Where the eval sets are: ``KB_EVAL_DIR``, else ``<home>/eval``."""
    return settings.eval_dir if settings.eval_dir is not None else settings.home / "eval"


def _search(index: VectorReader, embedder: Any, reranker: Any, acronyms: AcronymTable | None):
    def run(question: str) -> tuple[list[Retrieved], bool]:
        answer = search_docs(
            index, embedder, question, top_k=EVAL_TOP_K, reranker=reranker, acronyms=acronyms
        )
        return [Retrieved.from_point(p.point) for p in answer.results], answer.low_confidence

    return run


def outcome_metadata(outcomes: list[SetOutcome]) -> dict[str, Any]:
    """The materialisation metadata of ``outcomes`` (module docstring, "Metadata")."""
    metadata: dict[str, Any] = {"sets": len(outcomes)}
    rows = ["| set | kind | questions | R@1 | R@5 | R@10 | MRR |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for outcome in outcomes:
        overall = outcome.overall
        for metric in SET_METRICS:
            metadata[f"{outcome.name}/{metric}"] = dg.MetadataValue.float(getattr(overall, metric))
        metadata[f"{outcome.name}/questions"] = overall.questions
        metadata[f"{outcome.name}/skipped_questions"] = outcome.skipped
        metadata[f"{outcome.name}/absent_flagged"] = f"{outcome.absent_flagged}/{outcome.absent}"
        for kind, scores in [("all", overall), *outcome.by_kind.items()]:
            if kind != "all":
                metadata[f"{outcome.name}/{kind}/mrr"] = dg.MetadataValue.float(scores.mrr)
            rows.append(
                f"| {outcome.name} | {kind} | {scores.questions} | {scores.recall_at_1:.3f} | "
                f"{scores.recall_at_5:.3f} | {scores.recall_at_10:.3f} | {scores.mrr:.3f} |"
            )
    metadata["scores"] = dg.MetadataValue.md("\n".join(rows))
    return metadata


@dg.asset(
    name=RETRIEVAL_EVAL,
    group_name=QUALITY_GROUP,
    deps=[RECORD],
    kinds={"python"},
    automation_condition=AFTER_BUILDS,
    description=(
        "Runs the eval sets that apply to the corpus (KB_EVAL_DIR, default KB_HOME/eval) "
        "through search_docs and records Recall@1/5/10 and MRR per set and per question kind."
    ),
)
def retrieval_eval(
    context: dg.AssetExecutionContext, stores: StoresResource,
    providers: dg.ResourceParam[Providers],
) -> dg.MaterializeResult:
    """Score every applicable eval set (module docstring); a corpus no set applies to
    materialises with ``sets = 0`` and a ``skipped`` reason naming the folder."""
    settings = stores.settings
    folder = eval_folder(settings)
    ready = {row.name for row in stores.catalog().list_documents("ready")}
    index = stores.existing_vectors()
    sets: list[EvalSet] = find_eval_sets(folder)
    outcomes: list[SetOutcome] = []
    if index is not None and ready and sets:
        reranker = factory.reranker(settings)
        try:
            pairs = acronyms_for(stores.graph())  # as the MCP tool: kb_shared.search.acronyms
            search = _search(index, providers.embedder(), reranker, pairs)
            for eval_set in sets:
                outcome = run_eval_set(eval_set, ready, search)
                if outcome is not None:
                    outcomes.append(outcome)
        finally:
            reranker.close()
    metadata = outcome_metadata(outcomes)
    if not outcomes:
        reason = (
            f"no eval set in {folder} has questions whose documents are all ready "
            f"({len(sets)} sets, {len(ready)} ready documents); put <name>/questions.jsonl "
            "there or set KB_EVAL_DIR"
        )
        context.log.warning("retrieval_eval: %s", reason)
        metadata[SKIPPED] = reason
    return dg.MaterializeResult(metadata=metadata)


@dataclass(frozen=True)
class FloorBreach:
    """A recorded figure under its floor: metadata key, value and floor (shares in 0-1)."""

    key: str
    value: float
    floor: float


def load_floors(path: Path = FLOORS_FILE) -> dict[str, float]:
    """The floors file as metadata keys -> floor (``<set>/<metric>``, ``<set>/<kind>/mrr``).

    Raises:
        ValueError: a floor that is not a number in [0, 1] (naming the key and the file).
    """
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    floors: dict[str, float] = {}
    for name, section in data.items():
        if not isinstance(section, Mapping):
            continue  # measured_on, commit
        for metric, value in section.items():
            if metric == "kinds" and isinstance(value, Mapping):
                pairs = [(f"{name}/{kind}/mrr", floor) for kind, floor in value.items()]
            else:
                pairs = [(f"{name}/{metric}", value)]
            for key, floor in pairs:
                if not isinstance(floor, int | float) or not 0 <= floor <= 1:
                    raise ValueError(f"{path}: floor {key} must be a number in [0, 1], got {floor!r}")
                floors[key] = float(floor)
    return floors


def breaches(metadata: Mapping[str, Any], floors: Mapping[str, float]) -> list[FloorBreach]:
    """Every floor whose figure is present in ``metadata`` and below it (a set or kind the
    corpus does not hold is not a breach: it was not measured)."""
    found: list[FloorBreach] = []
    for key, floor in sorted(floors.items()):
        value = metadata.get(key)
        value = getattr(value, "value", value)
        if isinstance(value, int | float) and value < floor:
            found.append(FloorBreach(key, float(value), floor))
    return found


@dg.asset_check(
    name=CHECK_FLOORS,
    asset=RETRIEVAL_EVAL,
    description=(
        "Warns when a recorded Recall@k or MRR (per set, or MRR per question kind) is below "
        "its floor in kb_assets/retrieval_floors.toml."
    ),
)
def retrieval_above_floors(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """Compare the latest ``retrieval_eval`` materialisation's metadata with the floors;
    passes (with ``checked = 0``) when nothing was measured."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey(RETRIEVAL_EVAL))
    materialization = event.asset_materialization if event is not None else None
    metadata = dict(materialization.metadata) if materialization is not None else {}
    floors = load_floors()
    found = breaches(metadata, floors)
    checked = sum(1 for key in floors if key in metadata)
    lines = [f"- {b.key}: {b.value:.3f} < floor {b.floor:.3f}" for b in found]
    return dg.AssetCheckResult(
        passed=not found,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "checked": checked,
            "below_floor": len(found),
            "breaches": dg.MetadataValue.md("\n".join(lines) or "none"),
        },
    )


#: Evaluates ``AFTER_BUILDS`` (running by default; Dagster's own automation sensor is off).
quality_automation_sensor = dg.AutomationConditionSensorDefinition(
    "quality_automation_sensor",
    target=[RETRIEVAL_EVAL],
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Runs retrieval_eval after documents are recorded (kb_assets.quality).",
)

QUALITY_ASSETS = (retrieval_eval,)
QUALITY_CHECKS = (retrieval_above_floors,)
