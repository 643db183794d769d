"""Admitting one file into a test's KB_HOME, as ``kb add`` does (intake rules, catalog row,
blob, Dagster partition)."""

from pathlib import Path

import dagster as dg

from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_shared.stores.catalog import DocumentRow


def admit_one(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance, name: str, data: bytes
) -> DocumentRow:
    """``data`` written as ``tmp_path/in/name`` and admitted (pending, with its partition);
    its catalog row. Fails the test with the intake's reason when it is not added."""
    pdf = tmp_path / "in" / name
    pdf.parent.mkdir(parents=True, exist_ok=True)
    pdf.write_bytes(data)
    (outcome,) = admit([pdf], stores, instance)
    assert outcome.status == IntakeStatus.ADDED, outcome.reason
    return stores.catalog().get(outcome.doc_id)
