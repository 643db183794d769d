"""Hostile file names at every way a name reaches intake (the 2026-12-07 audit of kb's edges):
a name whose bytes are not UTF-8, an invisible bidirectional control that makes a name show
as another (``x<RLO>txt.pdf`` reads ``xfdp.txt``), a line separator. Each is refused by
``identity.check_file_name`` with its reason, the rest of the batch is added, nothing of the
refused file is stored; the inbox files it away with the reason, and the upload page's check
and a download's name give the same reason. A file the system will not let kb read is refused
alone too.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import dagster as dg
import pytest

from kb_assets import url_intake
from kb_assets.constants import ADD_JOB
from kb_assets.intake import IntakeStatus, admit
from kb_assets.jobs import add_documents_job
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_assets.upload.checks import check_files
from kb_assets.url_intake import admit_sources, url_document_name
from kb_shared.errors import IdentityError
from kb_shared.fetch.fetcher import Fetched
from kb_shared.identity import sha256_bytes
from tests.fakes import settled, tiny_pdf

NOT_UTF8 = (
    "'r\\udcffport.pdf' is not UTF-8 text (byte 0xFF is no character); rename the file with "
    "a UTF-8 name"
)

#: (name, the reason it is refused): a right-to-left override, a right-to-left mark, an
#: isolate, a line separator, a zero width space, a byte order mark.
SPOOFING = [
    (
        "x\u202etxt.pdf",
        "'x\\u202etxt.pdf' holds an invisible bidirectional control (U+202E RIGHT-TO-LEFT "
        "OVERRIDE) that changes how the name is shown; rename the file without it",
    ),
    (
        "Rules\u200f.pdf",
        "'Rules\\u200f.pdf' holds an invisible bidirectional control (U+200F RIGHT-TO-LEFT "
        "MARK) that changes how the name is shown; rename the file without it",
    ),
    (
        "a\u2067b\u2069.pdf",
        "'a\\u2067b\\u2069.pdf' holds an invisible bidirectional control (U+2067 RIGHT-TO-LEFT "
        "ISOLATE) that changes how the name is shown; rename the file without it",
    ),
    ("line\u2028break.pdf", "'line\\u2028break.pdf' holds a line break (U+2028)"),
    # invisible: looks like "report.pdf", is another document
    (
        "report\u200b.pdf",
        "'report\\u200b.pdf' holds an invisible character (U+200B ZERO WIDTH SPACE), so the "
        "name looks like another; rename the file without it",
    ),
    (
        "\ufeffreport.pdf",
        "'\\ufeffreport.pdf' holds an invisible character (U+FEFF ZERO WIDTH NO-BREAK SPACE), "
        "so the name looks like another; rename the file without it",
    ),
]


def stored(stores: StoresResource, instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """The catalog's doc_ids, the blob keys and the Dagster partitions."""
    return {
        "rows": [row.doc_id for row in stores.catalog().list_documents()],
        "blobs": sorted(stores.blobs().list()),
        "partitions": instance.get_dynamic_partitions("documents"),
    }


def test_a_name_that_is_not_utf8_is_refused_and_the_rest_of_the_folder_added(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    # a file system name with byte 0xFF: Python decodes it as the lone surrogate U+DCFF, which
    # once failed the whole batch with "'utf-8' codec can't encode character '\udcff'"
    Path(os.fsdecode(os.fsencode(folder) + b"/r\xffport.pdf")).write_bytes(tiny_pdf("bad"))
    (folder / "good.pdf").write_bytes(tiny_pdf("good"))
    outcomes = admit([folder], stores, instance)
    assert [(o.name, o.status, o.reason) for o in outcomes] == [
        ("good.pdf", IntakeStatus.ADDED, ""),
        ("r\udcffport.pdf", IntakeStatus.REFUSED, NOT_UTF8),
    ]
    assert stored(stores, instance) == {
        "rows": ["good.pdf"], "blobs": ["pdfs/good.pdf"], "partitions": ["good.pdf"],
    }


def test_the_inbox_files_away_a_name_that_is_not_utf8_and_takes_the_rest(
    home: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    # such a name once failed the intake sensor's every tick (hashing its batch as UTF-8),
    # which stopped the inbox and every build request the sensor makes
    inbox = home / "inbox"
    inbox.mkdir(parents=True)
    bad = Path(os.fsdecode(os.fsencode(inbox) + b"/r\xffport.pdf"))
    bad.write_bytes(tiny_pdf("bad"))
    (inbox / "good.pdf").write_bytes(tiny_pdf("good"))
    settled(bad)
    settled(inbox / "good.pdf")
    with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
        (request,) = intake_sensor(context).run_requests
    assert request.run_config["ops"]["add_documents_op"]["config"]["paths"] == [
        str(inbox / "good.pdf"), str(bad),
    ]
    defs = dg.Definitions(jobs=[add_documents_job], resources={"stores": stores})
    run = defs.resolve_job_def(ADD_JOB).execute_in_process(
        run_config=request.run_config, instance=instance
    )
    assert run.success
    assert sorted(p.relative_to(inbox).as_posix() for p in inbox.rglob("*") if p.is_file()) == [
        "added/good.pdf", "refused/r\udcffport.pdf", "refused/r\udcffport.pdf.reason.txt",
    ]
    note = inbox / "refused" / (bad.name + ".reason.txt")
    assert note.read_text(encoding="utf-8") == f"refused: {NOT_UTF8}\n"
    assert stored(stores, instance)["rows"] == ["good.pdf"]


def test_the_inbox_refuses_a_symbolic_link_and_files_it_away_unread(
    home: Path, tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    # a link dropped in the inbox once had kb store and serve whatever it pointed to
    inbox = home / "inbox"
    inbox.mkdir(parents=True)
    secret = tmp_path / "elsewhere" / "settings.pdf"
    secret.parent.mkdir()
    kept = tiny_pdf("not for the corpus")
    secret.write_bytes(kept)
    (inbox / "notes.pdf").symlink_to(secret)
    (inbox / "gone.pdf").symlink_to(tmp_path / "nowhere.pdf")  # leads nowhere
    (inbox / "good.pdf").write_bytes(tiny_pdf("good"))
    settled(secret)
    settled(inbox / "good.pdf")
    with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
        (request,) = intake_sensor(context).run_requests
    defs = dg.Definitions(jobs=[add_documents_job], resources={"stores": stores})
    run = defs.resolve_job_def(ADD_JOB).execute_in_process(
        run_config=request.run_config, instance=instance
    )
    assert run.success
    assert stored(stores, instance) == {
        "rows": ["good.pdf"], "blobs": ["pdfs/good.pdf"], "partitions": ["good.pdf"],
    }
    assert (inbox / "refused" / "notes.pdf").is_symlink()  # the link moved, its target kept
    assert (inbox / "refused" / "gone.pdf").is_symlink()
    assert (inbox / "refused" / "notes.pdf.reason.txt").read_text(encoding="utf-8") == (
        "refused: a symbolic link; the inbox takes files only: copy the file itself into the "
        "inbox\n"
    )
    assert secret.read_bytes() == kept
    assert (inbox / "added" / "good.pdf").is_file()


def make_unreadable(path: Path) -> None:
    """Make ``path`` a file the operating system refuses to read: mode 000, or, for root (whom
    modes do not stop), a link to a write-only sysfs attribute (skips the test when there is
    none)."""
    path.write_bytes(b"%PDF-1.7\n%%EOF\n")
    path.chmod(0)
    try:
        path.read_bytes()
    except PermissionError:
        return
    path.unlink()
    for attribute in sorted(glob.glob("/sys/bus/*/uevent")):
        try:
            Path(attribute).read_bytes()
        except PermissionError:
            path.symlink_to(attribute)
            return
        except OSError:
            continue
    pytest.skip("no file this process is refused to read")


def test_a_file_that_cannot_be_read_is_refused_and_the_rest_of_the_batch_added(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    # once a PermissionError out of the intake: nothing of the batch added, no reason given
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a-good.pdf").write_bytes(tiny_pdf("good"))
    make_unreadable(folder / "b-locked.pdf")
    outcomes = admit([folder], stores, instance)
    assert [(o.name, o.status, o.reason) for o in outcomes] == [
        ("a-good.pdf", IntakeStatus.ADDED, ""),
        ("b-locked.pdf", IntakeStatus.REFUSED, "the file cannot be read (Permission denied); "
         "check that it is there and that kb may read it, then add it again"),
    ]
    assert stored(stores, instance) == {
        "rows": ["a-good.pdf"], "blobs": ["pdfs/a-good.pdf"], "partitions": ["a-good.pdf"],
    }


def test_a_name_given_with_a_url_that_is_not_utf8_is_refused_with_the_reason() -> None:
    # `kb add URL --name NAME` in a shell whose argument bytes are not UTF-8
    with pytest.raises(IdentityError) as caught:
        url_document_name("r\udcffport.pdf")
    assert str(caught.value) == NOT_UTF8


@pytest.mark.parametrize(("name", "reason"), SPOOFING, ids=["rlo", "rlm", "isolate", "u2028", "zwsp", "bom"])
def test_a_name_that_displays_as_another_is_refused_and_nothing_stored(
    name: str, reason: str, tmp_path: Path, stores: StoresResource,
    instance: dg.DagsterInstance,
) -> None:
    given = tmp_path / "in" / name
    given.parent.mkdir()
    given.write_bytes(tiny_pdf("spoof"))
    (outcome,) = admit([given], stores, instance)
    assert (outcome.status, outcome.reason) == (IntakeStatus.REFUSED, reason)
    assert stored(stores, instance) == {"rows": [], "blobs": [], "partitions": []}
    # the upload page refuses it before a byte is sent, with the same reason
    (check,) = check_files([(name, 1000)], stores.catalog(), 10_000_000)
    assert (check.accepted, check.status, check.reason) == (False, IntakeStatus.REFUSED, reason)


def test_a_download_named_by_its_server_with_a_bidi_override_is_refused(
    stores: StoresResource, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tiny_pdf("download")
    url = "https://example.org/download"

    def download(asked: str) -> Fetched:
        # Content-Disposition: attachment; filename*=UTF-8''invoice%E2%80%AEfdp.exe.pdf
        return Fetched(asked, asked, (), "93.184.215.14", "invoice\u202efdp.exe.pdf",
                       "application/pdf", data, sha256_bytes(data))

    monkeypatch.setattr(url_intake, "fetcher_for", lambda settings: download)
    (outcome,) = admit_sources([url], stores, instance)
    assert (outcome.path, outcome.status) == (url, IntakeStatus.REFUSED)
    assert outcome.reason == (
        "'invoice\\u202efdp.exe.pdf' holds an invisible bidirectional control (U+202E "
        "RIGHT-TO-LEFT OVERRIDE) that changes how the name is shown; rename the file without "
        "it; give the document a name (--name, or name in the Launchpad)"
    )
    assert stored(stores, instance) == {"rows": [], "blobs": [], "partitions": []}


@pytest.mark.parametrize("name", ["Résumé règles.pdf", "שלום.pdf", "تقرير ٢٠٢٥.pdf"])
def test_names_in_other_scripts_are_still_taken(
    name: str, tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    given = tmp_path / "in" / name
    given.parent.mkdir()
    given.write_bytes(tiny_pdf("script"))
    (outcome,) = admit([given], stores, instance)
    assert (outcome.name, outcome.status) == (name, IntakeStatus.ADDED)
