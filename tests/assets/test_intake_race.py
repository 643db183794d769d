"""Two intakes racing (the 2026-12-07 audit): both look the catalog up before either writes,
so a unique index refuses the second one's row. The loser is then decided on what the winner
wrote, as if the winner had come first: a name clash (the same name, other content) stays a
name clash with its ``--new-version`` hint, which makes ``kb add`` fail, instead of a harmless
"duplicate"; the same content under another name is refused, naming the winner; the same file
twice is a duplicate. Nothing of the loser is stored.

The race is forced, not timed: each intake waits at a barrier after its first lookup of the
content among the versions (the last catalog read of a file the catalog does not hold) until
the other has made its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.intake import IntakeOutcome, IntakeStatus, admit
from kb_assets.resources import StoresResource
from tests.fakes import tiny_pdf


@pytest.fixture
def shared_instance() -> Iterator[dg.DagsterInstance]:
    """A Dagster instance on files, which two threads may write at once."""
    with dg.instance_for_test() as instance:
        yield instance


def race(
    home: Path, instance: dg.DagsterInstance, first: Path, second: Path
) -> list[IntakeOutcome]:
    """``admit`` of ``first`` and of ``second`` at once, each with its own stores, both
    lookups done before either write; the two outcomes, the added one first."""
    barrier = threading.Barrier(2)
    outcomes: list[IntakeOutcome] = []
    failures: list[BaseException] = []

    def intake(path: Path) -> None:
        stores = StoresResource(home=str(home))
        catalog = stores.catalog()
        lookup = catalog.find_version_by_sha256
        waited: list[bool] = []

        def find_version_by_sha256(sha256: str):  # a new file's last read before its writes
            found = lookup(sha256)
            if not waited:
                waited.append(True)
                barrier.wait(timeout=60)
            return found

        catalog.find_version_by_sha256 = find_version_by_sha256
        try:
            outcomes.extend(admit([path], stores, instance))
        except BaseException as error:  # reported by the test thread
            failures.append(error)
        finally:
            stores.close()

    StoresResource(home=str(home)).catalog()  # the schema, before the race
    threads = [threading.Thread(target=intake, args=(path,)) for path in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    return sorted(outcomes, key=lambda o: o.status != IntakeStatus.ADDED)


def stored(home: Path, instance: dg.DagsterInstance) -> tuple[list[str], list[str], list[str]]:
    stores = StoresResource(home=str(home))
    try:
        rows = [row.doc_id for row in stores.catalog().list_documents()]
        return rows, sorted(stores.blobs().list()), instance.get_dynamic_partitions("documents")
    finally:
        stores.close()


def test_a_name_clash_that_lost_a_race_is_still_a_name_clash(
    tmp_path: Path, shared_instance: dg.DagsterInstance
) -> None:
    one, other = tmp_path / "a" / "Rules.pdf", tmp_path / "b" / "Rules.pdf"
    for path, label in ((one, "one"), (other, "other")):
        path.parent.mkdir()
        path.write_bytes(tiny_pdf(label))
    won, lost = race(tmp_path / "kb", shared_instance, one, other)
    assert (won.status, won.doc_id) == (IntakeStatus.ADDED, "rules.pdf")
    assert (lost.status, lost.name_clash, lost.doc_id) == (
        IntakeStatus.DUPLICATE, True, "rules.pdf",
    )
    assert lost.hint == (
        f"to add it as a new version of 'Rules.pdf', run `kb add --new-version {lost.path}`"
    )
    assert lost.reason == (
        "'Rules.pdf' is already in the corpus (doc_id rules.pdf, pending). To add it as a new "
        f"version: `kb add --new-version {lost.path}`; to replace it entirely: `kb delete "
        "rules.pdf` first"
    )
    assert stored(tmp_path / "kb", shared_instance) == (
        ["rules.pdf"], ["pdfs/rules.pdf"], ["rules.pdf"],
    )


def test_the_same_content_under_another_name_that_lost_a_race_is_refused(
    tmp_path: Path, shared_instance: dg.DagsterInstance
) -> None:
    data = tiny_pdf("same")
    one, other = tmp_path / "A.pdf", tmp_path / "B.pdf"
    one.write_bytes(data)
    other.write_bytes(data)
    won, lost = race(tmp_path / "kb", shared_instance, one, other)
    assert won.status == IntakeStatus.ADDED
    assert (lost.status, lost.doc_id, lost.reason) == (
        IntakeStatus.REFUSED, won.doc_id,
        f"identical content is already in the corpus as {won.name!r}",
    )
    assert stored(tmp_path / "kb", shared_instance) == (
        [won.doc_id], [f"pdfs/{won.doc_id}"], [won.doc_id],
    )


def test_the_same_file_twice_at_once_is_a_duplicate(
    tmp_path: Path, shared_instance: dg.DagsterInstance
) -> None:
    data = tiny_pdf("twice")
    one, other = tmp_path / "a" / "Rules.pdf", tmp_path / "b" / "Rules.pdf"
    for path in (one, other):
        path.parent.mkdir()
        path.write_bytes(data)
    won, lost = race(tmp_path / "kb", shared_instance, one, other)
    assert won.status == IntakeStatus.ADDED
    assert (lost.status, lost.name_clash, lost.hint) == (IntakeStatus.DUPLICATE, False, "")
    assert lost.reason == (
        "'Rules.pdf' is already in the corpus (doc_id rules.pdf, pending); this content is its "
        "version 1, waiting to be built: nothing was added. To build it: `kb build rules.pdf`"
    )
