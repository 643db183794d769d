"""The ``reference_sensor``, the ``index_references`` job and ``kb references list|remove``
(issue 12, "find_reference / add_reference"): a queued page is indexed as one ``reference``
point and registered; the index is kept at one point per registered page."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from kb_assets import references
from kb_assets.cli import main as cli
from kb_assets.jobs import kb_resources
from kb_assets.references import INDEX_JOB, index_references_job, reference_sensor
from kb_assets.resources import StoresResource
from kb_shared.identity import REFERENCE_DOCUMENT, reference_id
from kb_shared.stores.vectors import KIND_REFERENCE
from tests.assets.fake_providers import FakeProviders

URL = "https://www.aemo.com.au/developer/b2b-api"
TITLE = "AEMO B2B e-Hub API reference"
DESCRIPTION = "REST endpoints for B2B meter data notifications."


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """KB_HOME for the stores and for the CLI (``KB_HOME``)."""
    monkeypatch.setenv("KB_HOME", str(tmp_path))
    return tmp_path


def tick(home: Path) -> dg.SensorResult:
    with dg.build_sensor_context(resources={"stores": StoresResource(home=str(home))}) as context:
        return reference_sensor(context)


def run_job(home: Path, providers: FakeProviders) -> dg.ExecuteInProcessResult:
    definitions = dg.Definitions(
        jobs=[index_references_job],
        resources=kb_resources(StoresResource(home=str(home)), providers),
    )
    return definitions.resolve_job_def(INDEX_JOB).execute_in_process()


def reference_points(stores: StoresResource) -> list[str]:
    index = stores.existing_vectors()
    return [] if index is None else index.list_ids(REFERENCE_DOCUMENT, KIND_REFERENCE)


def test_a_queued_page_is_requested_indexed_registered_and_then_skipped(home: Path) -> None:
    stores = StoresResource(home=str(home))
    assert tick(home).skip_reason.skip_message == (
        "the reference index matches the registered pages"
    )
    request = stores.catalog().add_reference_request(URL, TITLE, DESCRIPTION)

    (run,) = tick(home).run_requests
    assert run.run_key.startswith("references:") and len(run.run_key) == 11 + 64
    assert stores.catalog().list_reference_sources() == []  # the tick wrote nothing

    providers = FakeProviders()
    result = run_job(home, providers)
    assert result.success
    [source] = stores.catalog().list_reference_sources()
    assert (source.url, source.title, source.description) == (URL, TITLE, DESCRIPTION)
    [decided] = stores.catalog().list_reference_requests()
    assert (decided.id, decided.status) == (request.id, "approved")
    assert reference_points(stores) == [reference_id(source.id)]
    [point] = stores.existing_vectors().fetch([reference_id(source.id)])
    assert point.text == f"{TITLE}\n\n{DESCRIPTION}\n\n{URL}"
    assert point.payload == {
        "reference_id": source.id, "url": URL, "title": TITLE, "description": DESCRIPTION,
    }
    assert tick(home).run_requests == []
    stores.close()


def test_a_dropped_index_is_refilled_and_a_stray_point_deleted(home: Path) -> None:
    stores = StoresResource(home=str(home))
    stores.catalog().add_reference_request(URL, TITLE, DESCRIPTION)
    providers = FakeProviders()
    assert run_job(home, providers).success
    stores.drop_vectors()  # `kb rebuild embeddings --all --reset` drops every point
    embedder = providers.embedder()
    index = stores.vectors(embedder.model, embedder.dimension)
    [source] = stores.catalog().list_reference_sources()
    gone = dataclasses.replace(source, id=99)  # a page removed while the index was away
    index.upsert(references.reference_points([gone], embedder))
    stray = reference_id(99)
    assert reference_points(stores) == [stray]
    assert len(tick(home).run_requests) == 1  # no pending request, but the points differ
    assert run_job(home, providers).success
    assert reference_points(stores) == [reference_id(source.id)]
    assert stray not in reference_points(stores)
    stores.close()


def test_kb_references_list_and_remove(home: Path) -> None:
    stores = StoresResource(home=str(home))
    stores.catalog().add_reference_request(URL, TITLE, DESCRIPTION)
    assert run_job(home, FakeProviders()).success
    stores.catalog().add_reference_request("https://example.org/queued", "Queued page", "Later.")
    runner = CliRunner()

    listed = runner.invoke(cli.app, ["references", "list"])
    assert listed.exit_code == 0, listed.output
    words = " ".join(listed.output.split())
    assert "kb references (1)" in words and URL in words and "yes" in words
    assert "request #2 https://example.org/queued (Queued page): queued" in words

    removed = runner.invoke(cli.app, ["references", "remove", "1"])
    assert removed.exit_code == 0, removed.output
    assert removed.output.strip() == f"removed reference #1: {TITLE} ({URL})"
    assert stores.catalog().list_reference_sources() == []
    assert reference_points(stores) == []

    missing = runner.invoke(cli.app, ["references", "remove", "1"])
    assert missing.exit_code == 2
    assert "no registered reference #1; `kb references list` lists them" in " ".join(
        missing.output.split()
    )
    stores.close()
