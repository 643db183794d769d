"""``batch.document_step``: the compute function ``corpus_asset`` makes of one document's work.
Dagster sees ``context``, ``config``, ``stores`` and the work's other parameters; the work gets,
by name, only what it declares (``doc_id`` included). Batched runs: ``test_backfill.py``.

No ``from __future__ import annotations``: the works here, like the asset modules' own, keep
their annotations as classes (Dagster reads them)."""

import inspect
from typing import Any

import dagster as dg

from kb_assets.assets.batch import document_step
from kb_assets.assets.common import BuildConfig
from kb_assets.resources import Providers, StoresResource

STORES = StoresResource(home="/nonexistent/kb-home")  # never opened: a single run reads no store


def test_dagster_sees_the_fixed_parameters_then_the_works_own_but_doc_id() -> None:
    def work(
        doc_id: str, providers: dg.ResourceParam[Providers], document: str
    ) -> dg.Output[str]:
        return dg.Output(doc_id)

    compute = document_step(work, inputs=["document"], checks=[], stored=True)
    signature = inspect.signature(compute)
    assert list(signature.parameters) == ["context", "config", "stores", "providers", "document"]
    annotations = [p.annotation for p in signature.parameters.values()]
    assert annotations == [
        dg.AssetExecutionContext, BuildConfig, StoresResource, dg.ResourceParam[Providers], str,
    ]
    # a batched run returns an Output of a Batch, not the work's type
    assert signature.return_annotation is inspect.Signature.empty
    assert (compute.__name__, inspect.isgeneratorfunction(compute)) == ("work", False)


def test_a_single_run_gives_the_work_what_it_declares_by_name() -> None:
    seen: dict[str, Any] = {}

    def work(document: str, config: BuildConfig, doc_id: str) -> dg.Output[str]:
        seen.update(document=document, force=config.force, doc_id=doc_id)
        return dg.Output(f"{doc_id}: {document}")

    compute = document_step(work, inputs=["document"], checks=[], stored=True)
    context = dg.build_asset_context(partition_key="sample.pdf")
    output = compute(context, config=BuildConfig(force=True), stores=STORES, document="# Title")
    assert output.value == "sample.pdf: # Title"
    assert seen == {"document": "# Title", "force": True, "doc_id": "sample.pdf"}


def test_an_asset_with_checks_yields_the_works_events_in_order() -> None:
    def work(document: str) -> Any:
        yield dg.Output(len(document))
        yield dg.AssetCheckResult(check_name="not_empty", passed=bool(document))

    compute = document_step(work, inputs=["document"], checks=["not_empty"], stored=True)
    assert inspect.isgeneratorfunction(compute)
    context = dg.build_asset_context(partition_key="sample.pdf")
    output, check = compute(context, config=BuildConfig(), stores=STORES, document="")
    assert output.value == 0
    assert (check.check_name, check.passed) == ("not_empty", False)
