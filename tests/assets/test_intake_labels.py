"""A name clash is not a duplicate (a new-user trial found them labelled and counted alike):
identical content added again is a duplicate (not an error); other content under a name the
corpus holds is a name clash (not added, with the ``--new-version`` hint). ``admit``'s
outcomes, ``kb add`` (table and ``--json``) and the ``add_documents`` job's summary say which.
The upload page's side is in ``tests/assets/test_upload_labels.py``."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.constants import ADD_JOB
from kb_assets.definitions import defs
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_shared.settings import Settings

FIRST = b"%PDF-1.7\n% the rules, first edition\n%%EOF\n"
CHANGED = b"%PDF-1.7\n% the rules, second edition\n%%EOF\n"


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def test_admit_tells_a_duplicate_from_a_name_clash(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    assert admit([write(tmp_path / "a", "Rules.pdf", FIRST)], stores, instance)[0].status == "added"
    (same,) = admit([write(tmp_path / "b", "rules.PDF", FIRST)], stores, instance)
    changed_path = write(tmp_path / "c", "Rules.pdf", CHANGED)
    (clash,) = admit([changed_path], stores, instance)
    assert (same.status, same.name_clash, same.label, same.hint) == (
        IntakeStatus.DUPLICATE, False, "duplicate", "",
    )
    assert (clash.status, clash.name_clash, clash.label, clash.doc_id) == (
        IntakeStatus.DUPLICATE, True, "name clash", "rules.pdf",
    )
    assert clash.hint == (
        f"to add it as a new version of 'Rules.pdf', run `kb add --new-version {changed_path}`"
    )
    assert clash.as_dict()["name_clash"] is True and same.as_dict()["name_clash"] is False
    # a repeat inside one batch collapses to the first file, as before: a duplicate
    first, repeat = admit(
        [write(tmp_path / "d", "New.pdf", FIRST + b"%new"),
         write(tmp_path / "e", "NEW.pdf", CHANGED + b"%new")],
        stores, instance,
    )
    assert (first.status, repeat.status, repeat.name_clash) == ("added", "duplicate", False)
    # with --new-version the changed file is the next version, not a clash
    stores.catalog().mark_ready("rules.pdf", pages=1, chunk_count=1)  # as if built
    (version,) = admit([changed_path], stores, instance, new_version=True)
    assert (version.status, version.version, version.name_clash) == ("added", 2, False)


def test_kb_add_labels_and_json_say_which(tmp_path: Path) -> None:
    runner = CliRunner()
    first = write(tmp_path / "one", "Rules.pdf", FIRST)
    assert runner.invoke(cli.app, ["add", str(first)]).exit_code == 0

    again = runner.invoke(cli.app, ["add", str(write(tmp_path / "two", "Rules.pdf", FIRST))])
    assert again.exit_code == 0, again.output  # identical content: a duplicate, no error
    row = next(line for line in again.output.splitlines() if "Rules.pdf" in line)
    assert "duplicate" in row and "name clash" not in row

    changed = write(tmp_path / "three", "Rules.pdf", CHANGED)
    clash = runner.invoke(cli.app, ["add", str(changed)])
    assert clash.exit_code == 1
    row = next(line for line in clash.output.splitlines() if "Rules.pdf" in line)
    assert "name clash" in row and "duplicate" not in row

    as_json = runner.invoke(cli.app, ["add", "--json", str(changed), str(first)])
    assert as_json.exit_code == 1  # the clash fails it, as without --json
    outcomes = json.loads(as_json.stdout)
    assert [(o["path"], o["status"], o["name_clash"], o["doc_id"]) for o in outcomes] == [
        (str(changed), "duplicate", True, "rules.pdf"),
        (str(first), "duplicate", False, "rules.pdf"),
    ]
    assert outcomes[0]["hint"].endswith(f"`kb add --new-version {changed}`")
    assert outcomes[1]["hint"] == ""
    only_same = runner.invoke(cli.app, ["add", "--json", str(first)])
    assert only_same.exit_code == 0
    assert [o["name_clash"] for o in json.loads(only_same.stdout)] == [False]
    both = runner.invoke(cli.app, ["add", "--json", "--build", str(first)])
    assert both.exit_code == 2
    assert "kb build --json" in both.output


def test_the_add_job_counts_duplicates_and_name_clashes_apart(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    instance = dagster_instance(Settings(home=home))

    def run(*paths: Path) -> dict[str, object]:
        result = defs.resolve_job_def(ADD_JOB).execute_in_process(
            run_config={
                "ops": {"add_documents_op": {"config": {"paths": [str(p) for p in paths]}}},
                "resources": {"stores": {"config": {"home": str(home)}}},
            },
            instance=instance,
        )
        assert result.success
        (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
        return {k: v.value for k, v in output.event_specific_data.metadata.items()}

    guide = b"%PDF-1.7\n% the guide\n%%EOF\n"
    assert run(write(tmp_path / "a", "Rules.pdf", FIRST), write(tmp_path / "a", "Guide.pdf", guide))[
        "added"
    ] == 2
    summary = run(
        write(tmp_path / "b", "Rules.pdf", FIRST),
        write(tmp_path / "c", "guide.PDF", CHANGED),
        write(tmp_path / "d", "Other.pdf", CHANGED + b"%other"),
    )
    assert {k: summary[k] for k in ("added", "duplicates", "name_clashes", "refused")} == {
        "added": 1, "duplicates": 1, "name_clashes": 1, "refused": 0,
    }
    table = str(summary["outcomes"]).splitlines()
    assert table[2].startswith("| Rules.pdf | duplicate | rules.pdf |")
    assert table[3].startswith("| guide.PDF | name clash | guide.pdf |")
    StoresResource(home=str(home)).close()


def test_json_carries_the_tables_label(tmp_path: Path) -> None:
    runner = CliRunner()
    first = write(tmp_path / "one", "Rules.pdf", FIRST)
    assert runner.invoke(cli.app, ["add", str(first)]).exit_code == 0
    changed = write(tmp_path / "two", "Rules.pdf", CHANGED)
    outcomes = json.loads(runner.invoke(cli.app, ["add", "--json", str(changed), str(first)]).stdout)
    assert [o["label"] for o in outcomes] == ["name clash", "duplicate"]


def test_re_adding_a_superseded_version_names_that_version(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    original = write(tmp_path / "a", "Rules.pdf", FIRST)
    assert admit([original], stores, instance)[0].status == "added"
    stores.catalog().mark_ready("rules.pdf", pages=1, chunk_count=1)
    (second,) = admit([write(tmp_path / "b", "Rules.pdf", CHANGED)], stores, instance,
                      new_version=True)
    assert second.version == 2
    stores.catalog().record_version("rules.pdf", 2, pages=1, chunk_count=1)  # v2 serves
    (again,) = admit([original], stores, instance)
    assert (again.status, again.name_clash) == (IntakeStatus.DUPLICATE, False)
    assert "with the same content" not in again.reason
    assert "this content is its version 1" in again.reason
    assert "nothing was added" in again.reason


def test_re_adding_a_version_waiting_for_its_build_says_so_and_how_to_build_it(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    original = write(tmp_path / "a", "Rules.pdf", FIRST)
    assert admit([original], stores, instance)[0].status == "added"  # version 1, never built
    (again,) = admit([write(tmp_path / "b", "Rules.pdf", FIRST)], stores, instance)
    assert (again.status, again.name_clash) == (IntakeStatus.DUPLICATE, False)
    assert again.reason == (
        "'Rules.pdf' is already in the corpus (doc_id rules.pdf, pending); this content is its "
        "version 1, waiting to be built: nothing was added. To build it: `kb build rules.pdf`"
    )
