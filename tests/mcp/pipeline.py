"""Build a corpus with the real pipeline (``kb_assets``: intake, then one Dagster run per
document) for the end-to-end and retrieval tests, and run ``kb-mcp serve`` against it.

Tests may use ``kb_assets``; only ``kb_mcp`` may not (``tests/test_import_rules.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks import mcp_server


def build_corpus(home: Path, pdfs: Sequence[Path]) -> list:
    """Add ``pdfs`` to a fresh ``home`` and build them; returns the build outcomes.

    Raises:
        AssertionError: a file was not added or a build failed (with the reason).
    """
    from kb_assets import operations  # noqa: PLC0415 - heavy, only for the tests that build
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.intake import IntakeStatus, admit  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    home.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KB_HOME", str(home))
        patch.setenv("DAGSTER_HOME", str(home / "dagster"))
        settings = Settings()
        stores = StoresResource(home=str(home))
        instance = dagster_instance(settings)
        outcomes = admit(list(pdfs), stores, instance)
        assert [o.status for o in outcomes] == [IntakeStatus.ADDED] * len(pdfs), outcomes
        built = operations.build_documents(stores, instance, [o.doc_id for o in outcomes])
        stores.close()
    failed = [(b.name, b.reason) for b in built if b.status != "ready"]
    assert not failed, failed
    return built


@contextmanager
def running_server(home: Path, log: Path, *args: str, **env: str) -> Iterator[str]:
    """Run ``kb-mcp serve`` on ``home`` (``benchmarks.mcp_server.running_server``) with
    ``env`` added to its environment; yield its base URL once /healthz answers 200."""
    environment = mcp_server.server_env(home, **env)
    with mcp_server.running_server(home, log, *args, env=environment) as server:
        yield server.base
