"""The resources are configurable: ``home``, ``overrides`` and secrets reach ``Settings`` from
the constructor, from run config (the Launchpad) and through ``EnvVar``; the IO manager uses
the run's own ``stores``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB, CHUNKS
from kb_assets.definitions import defs
from kb_assets.jobs import kb_resources
from kb_assets.instance import dagster_instance
from kb_assets.intake import admit
from kb_assets.jobs import build_documents_job
from kb_assets.resources import ProvidersResource, StoresResource
from kb_shared.errors import SettingsError
from kb_shared.settings import Settings
from tests.assets.fake_providers import FakeProviders
from tests.fakes import tiny_pdf


def test_fields_and_overrides_become_settings(tmp_path: Path) -> None:
    stores = StoresResource(
        home=str(tmp_path / "kb"),
        overrides={"chunk_words": "120", "qdrant_url": "http://qdrant:6333"},
        qdrant_api_key="q-secret",
    )
    settings = stores.settings
    assert settings.home == tmp_path / "kb"
    assert (settings.chunk_words, settings.qdrant_url) == (120, "http://qdrant:6333")
    assert settings.qdrant_api_key.get_secret_value() == "q-secret"
    # run config for a run that should see the same settings: never the secret
    assert stores.launch_config() == {
        "home": str(tmp_path / "kb"),
        "overrides": {"chunk_words": "120", "qdrant_url": "http://qdrant:6333"},
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"chunk_word": "120"}, "unknown setting(s) chunk_word in the resource's overrides"),
        ({"anthropic_api_key": "sk"}, "anthropic_api_key is a secret: set the resource field"),
        ({"chunk_words": "40"}, "KB_CHUNK_WORDS=40 is not valid: use an integer from 50 to 4000."),
    ],
)
def test_bad_overrides_are_one_clear_error(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as error:
        ProvidersResource(overrides=overrides).settings
    assert message in str(error.value)


def test_the_launchpad_can_set_every_setting_of_both_resources() -> None:
    job = defs.resolve_job_def(BUILD_JOB)
    resources = job.run_config_schema.config_type.fields["resources"].config_type.fields
    stores = resources["stores"].config_type.fields["config"].config_type.fields
    providers = resources["providers"].config_type.fields["config"].config_type.fields
    assert sorted(stores) == ["home", "neo4j_password", "overrides", "qdrant_api_key"]
    assert sorted(providers) == [
        "anthropic_api_key", "cohere_api_key", "gemini_api_key", "home", "overrides",
    ]


def test_a_secret_comes_from_an_env_var_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, str] = {}

    @dg.asset
    def probe(providers: ProvidersResource) -> None:
        key = providers.settings.gemini_api_key
        seen["key"] = key.get_secret_value() if key else ""

    monkeypatch.setenv("PROBE_GEMINI_KEY", "g-from-env")
    resource = ProvidersResource(gemini_api_key=dg.EnvVar("PROBE_GEMINI_KEY"))
    assert dg.materialize_to_memory([probe], resources={"providers": resource}).success
    assert seen == {"key": "g-from-env"}


def test_run_config_reaches_the_assets_and_the_io_manager(tmp_path: Path) -> None:
    """A run configured with another home and chunk budget writes there, through both the
    assets and the IO manager (which depends on the run's ``stores``)."""
    home = tmp_path / "kb"
    stores = StoresResource(home=str(home))
    instance = dagster_instance(Settings(home=home))
    pdf = tmp_path / "Fake Procedure.pdf"
    pdf.write_bytes(tiny_pdf("config"))
    admit([pdf], stores, instance)
    run_defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(StoresResource.configure_at_launch(), FakeProviders()),
    )
    result = run_defs.resolve_job_def(BUILD_JOB).execute_in_process(
        partition_key="fake-procedure.pdf",
        instance=instance,
        run_config={
            "resources": {
                "stores": {"config": {"home": str(home), "overrides": {"chunk_words": "50"}}}
            }
        },
    )
    assert result.success
    chunked = next(
        e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == CHUNKS
    )
    assert chunked.metadata["budget_words"].value == 50
    assert stores.blobs().exists("chunks/fake-procedure.pdf.parquet")  # the IO manager's write
    assert stores.catalog().get("fake-procedure.pdf").status == "ready"
    stores.close()
