"""Documents added by URL (issue 12, "Adding documents by URL"): ``kb add URL`` and the
``add_documents`` job download through the safe fetcher and then admit like a file.

The refusals run the production fetcher (the addresses are refused before any connection).
The downloads reach a local HTTPS server with a test CA (``tests/fetch_server.py``) through
``LocalSite.fetcher``, which the tests install as ``kb_assets.url_intake.fetcher_for``: a resolver
that maps the test host names to 127.0.0.1 and a policy that exempts exactly 127.0.0.1/32 —
test-only, no setting can do it. ``LocalSite`` is shared with the request and MCP tests.
"""

from __future__ import annotations

import hashlib
import ipaddress
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from kb_assets import intake, url_intake
from kb_assets.cli import main as cli
from kb_assets.constants import ADD_JOB, DOCUMENTS
from kb_assets.definitions import defs
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus
from kb_assets.url_intake import admit_sources
from kb_assets.jobs import AddDocumentsConfig
from kb_assets.resources import StoresResource
from kb_shared.fetch.fetcher import Expectation, FetchPolicy, fetch
from kb_shared.settings import Settings
from tests.fakes import tiny_pdf
from tests.fetch_server import FetchServer, LocalCertificates, Route, body, make_certificates, redirect

HOST = "docs.example.test"
#: Resolves to a private address: any URL on it must be refused.
PRIVATE_HOST = "intranet.example.test"

PDF = tiny_pdf("downloaded procedure")
OTHER_PDF = tiny_pdf("another procedure")
DISPOSITION = "attachment; filename*=UTF-8''B2B%20Procedure%20v3.2.pdf"
#: The cloud metadata address: refused by the test policy as by the production one.
METADATA_URL = "https://169.254.169.254/latest/meta-data/x.pdf"


@dataclass
class LocalSite:
    """A local HTTPS server for ``HOST`` and the fetcher that reaches it.

    Attributes:
        server: the running server (its ``requests`` record every path asked for).
        certs: the test CA and the server's certificate.
    """

    server: FetchServer
    certs: LocalCertificates

    def url(self, path: str, host: str = HOST) -> str:
        """``https://{host}:{port}{path}`` on this server."""
        return f"https://{host}:{self.server.port}{path}"

    def resolve(self, host: str, port: int) -> list[str]:
        """``HOST`` → 127.0.0.1, ``PRIVATE_HOST`` → 10.0.0.5; anything else fails as DNS."""
        table = {HOST: ["127.0.0.1"], PRIVATE_HOST: ["10.0.0.5"]}
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    def fetcher(self, settings: Settings) -> url_intake.UrlFetcher:
        """The production fetcher's rules with the test resolver, CA and 127.0.0.1 exempt."""
        policy = FetchPolicy(
            max_bytes=settings.max_upload_bytes,
            connect_timeout=5.0,
            read_timeout=5.0,
            total_timeout=20.0,
            allow_addresses=(ipaddress.IPv4Network("127.0.0.1/32"),),
            ssl_context=self.certs.client_context(),
        )
        return partial(fetch, expect=Expectation.PDF, policy=policy, resolver=self.resolve)


def site_routes() -> dict[str, Route]:
    """What the local site serves."""
    return {
        "/files/b2b.pdf": body("application/pdf", PDF, {"Content-Disposition": DISPOSITION}),
        "/docs/Retail%20Guide.pdf": body("application/pdf", OTHER_PDF),
        "/download": body("application/pdf", OTHER_PDF),
        "/page.html": body("text/html", b"<html>not a pdf</html>"),
        "/to-intranet": redirect(f"https://{PRIVATE_HOST}/secret.pdf"),
    }


@contextmanager
def local_site(folder: Path, routes: dict[str, Route] | None = None) -> Iterator[LocalSite]:
    """Serve ``routes`` (default ``site_routes()``) over TLS with a fresh test CA."""
    certs = make_certificates(folder, [HOST])
    with FetchServer(routes or site_routes(), tls=certs.server_context()) as server:
        yield LocalSite(server, certs)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSite]:
    with local_site(tmp_path_factory.mktemp("site-tls")) as running:
        yield running


@pytest.fixture
def reach_site(site: LocalSite, monkeypatch: pytest.MonkeyPatch) -> LocalSite:
    """Intake downloads through ``site``'s fetcher for this test."""
    monkeypatch.setattr(url_intake, "fetcher_for", site.fetcher)
    return site


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The KB_HOME the CLI uses in these tests (tests/conftest.py sets it)."""
    return tmp_path / "kbhome"


@pytest.fixture
def stores(home: Path) -> Iterator[StoresResource]:
    resource = StoresResource(home=str(home))
    yield resource
    resource.close()


@pytest.fixture
def instance(home: Path) -> dg.DagsterInstance:
    return dagster_instance(Settings(home=home))


def assert_nothing_written(stores: StoresResource, instance: dg.DagsterInstance) -> None:
    """No catalog row, no blob, no partition."""
    assert stores.catalog().list_documents() == []
    assert stores.blobs().list() == []
    assert instance.get_dynamic_partitions(DOCUMENTS) == []


def outcome_rows(outcomes: Sequence[intake.IntakeOutcome]) -> list[tuple[str, str, str | None]]:
    return [(o.name, o.status.value, o.doc_id) for o in outcomes]


# --- refused downloads write nothing ---------------------------------------------------------


def test_kb_add_of_a_loopback_url_is_refused_with_the_reason_and_writes_nothing(
    stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    result = CliRunner().invoke(cli.app, ["add", "https://127.0.0.1/x.pdf"])
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert "download refused: 127.0.0.1 is a loopback address" in output
    assert "1 file(s) refused; see the reasons above" in output
    assert_nothing_written(stores, instance)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://169.254.169.254/latest/meta-data/x.pdf",
         "download refused: 169.254.169.254 is a link-local address (where cloud metadata "
         "services live)"),
        ("https://[::ffff:10.0.0.5]/x.pdf",
         "download refused: ::ffff:10.0.0.5 is an IPv4-mapped address of 10.0.0.5, a private "
         "address"),
        ("http://example.org/x.pdf",
         "download refused: http://example.org/x.pdf is plain http; only https is fetched "
         "(KB_FETCH_ALLOW_HTTP_HOSTS may list example.org to allow plain http; its addresses "
         "must still be public)"),
        ("file:///etc/passwd", "download refused: file:///etc/passwd uses file scheme; only "
         "https is fetched"),
    ],
)
def test_the_production_fetcher_refuses_before_anything_is_written(
    url: str, reason: str, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    [outcome] = admit_sources([url], stores, instance)
    assert (outcome.path, outcome.status, outcome.reason) == (url, IntakeStatus.REFUSED, reason)
    assert_nothing_written(stores, instance)


def test_a_redirect_into_a_private_network_is_refused(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    [outcome] = admit_sources([reach_site.url("/to-intranet")], stores, instance)
    assert outcome.status == IntakeStatus.REFUSED
    assert outcome.reason == (
        f"download refused: {PRIVATE_HOST} resolved to 10.0.0.5, a private address"
    )
    assert_nothing_written(stores, instance)


def test_a_page_that_is_not_a_pdf_is_refused(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    [outcome] = admit_sources([reach_site.url("/page.html")], stores, instance)
    assert outcome.status == IntakeStatus.REFUSED
    assert outcome.reason.startswith("download refused: ")
    assert "text/html" in outcome.reason
    assert_nothing_written(stores, instance)


def test_a_bad_name_is_refused_before_the_download(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    asked = len(reach_site.server.requests)
    url = reach_site.url("/download")
    [outcome] = admit_sources([url], stores, instance, name="notes.md")
    assert (outcome.name, outcome.status) == ("notes.md", IntakeStatus.REFUSED)
    assert outcome.reason == (
        "'notes.md' ends in .md, but a download is a PDF; give a name ending in .pdf; give "
        "the document a name (--name, or name in the Launchpad)"
    )
    assert len(reach_site.server.requests) == asked  # nothing was downloaded
    assert_nothing_written(stores, instance)
    with pytest.raises(ValueError, match="a name goes with exactly one URL; this batch has 2"):
        admit_sources([url, reach_site.url("/files/b2b.pdf")], stores, instance, name="x.pdf")


# --- downloads admitted like files -------------------------------------------------------------


def test_a_download_is_admitted_under_its_content_disposition_name(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    url = reach_site.url("/files/b2b.pdf")
    [outcome] = admit_sources([url], stores, instance)
    assert (outcome.path, outcome.name, outcome.status, outcome.doc_id) == (
        url, "B2B Procedure v3.2.pdf", IntakeStatus.ADDED, "b2b-procedure-v3.2.pdf",
    )
    row = stores.catalog().get("b2b-procedure-v3.2.pdf")
    assert (row.name, row.status, row.sha256, row.size_bytes) == (
        "B2B Procedure v3.2.pdf", "pending", hashlib.sha256(PDF).hexdigest(), len(PDF),
    )
    assert stores.blobs().get(row.blob_key) == PDF
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["b2b-procedure-v3.2.pdf"]

    # the same URL again is a duplicate by name; the same bytes under another name refused
    [again] = admit_sources([url], stores, instance)
    assert (again.status, again.doc_id) == (IntakeStatus.DUPLICATE, "b2b-procedure-v3.2.pdf")
    [renamed] = admit_sources([url], stores, instance, name="Copy of B2B")
    assert (renamed.name, renamed.status) == ("Copy of B2B.pdf", IntakeStatus.REFUSED)
    assert renamed.reason == (
        "identical content is already in the corpus as 'B2B Procedure v3.2.pdf'"
    )
    assert [r.doc_id for r in stores.catalog().list_documents()] == ["b2b-procedure-v3.2.pdf"]


def test_names_come_from_the_url_path_or_the_given_name(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    local = tmp_path / "server" / "Local Rules.pdf"
    local.parent.mkdir()
    local.write_bytes(tiny_pdf("a file on the server"))
    sources = [reach_site.url("/docs/Retail%20Guide.pdf"), str(local)]
    outcomes = admit_sources(sources, stores, instance)
    assert outcome_rows(outcomes) == [
        ("Retail Guide.pdf", "added", "retail-guide.pdf"),
        ("Local Rules.pdf", "added", "local-rules.pdf"),
    ]
    assert [o.path for o in outcomes] == sources
    # a name without .pdf gets it; /download names itself "download" otherwise
    [named] = admit_sources([reach_site.url("/download")], stores, instance, name="Metering Guide")
    assert outcome_rows([named]) == [("Metering Guide.pdf", "refused", "retail-guide.pdf")]
    assert named.reason == "identical content is already in the corpus as 'Retail Guide.pdf'"


def test_a_file_and_a_url_of_one_name_collapse_to_the_first_in_the_batch(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    local = tmp_path / "server" / "Retail Guide.pdf"
    local.parent.mkdir()
    server_copy = tiny_pdf("the server's copy")
    local.write_bytes(server_copy)
    outcomes = admit_sources(
        [str(local), reach_site.url("/docs/Retail%20Guide.pdf")], stores, instance
    )
    assert outcome_rows(outcomes) == [
        ("Retail Guide.pdf", "added", "retail-guide.pdf"),
        ("Retail Guide.pdf", "duplicate", "retail-guide.pdf"),
    ]
    assert outcomes[1].reason == "same name as 'Retail Guide.pdf' earlier in this batch"
    assert stores.blobs().get("pdfs/retail-guide.pdf") == server_copy


def test_kb_add_with_a_url_and_a_name(reach_site: LocalSite, stores: StoresResource) -> None:
    url = reach_site.url("/download")
    result = CliRunner().invoke(cli.app, ["add", url, "--name", "Metering Guide v2.pdf"])
    assert result.exit_code == 0, result.output
    assert "1 added; run `kb build` to build them." in result.output
    [row] = stores.catalog().list_documents()
    assert (row.name, row.doc_id) == ("Metering Guide v2.pdf", "metering-guide-v2.pdf")
    two = CliRunner().invoke(cli.app, ["add", url, url, "--name", "x.pdf"])
    assert two.exit_code == 2
    assert "a name goes with exactly one URL; this batch has 2" in two.output


# --- the Launchpad job -----------------------------------------------------------------------


def test_add_documents_job_takes_urls_and_describes_its_config(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance, home: Path
) -> None:
    fields = AddDocumentsConfig.model_fields
    assert "an https URL of a PDF" in (fields["paths"].description or "")
    assert "e.g. /data/pdfs" in (fields["paths"].description or "")
    assert "the document name for a single URL" in (fields["name"].description or "")
    job = defs.resolve_job_def(ADD_JOB)
    assert "https://" in (job.description or "") and "add_documents_op" in (job.description or "")

    url = reach_site.url("/files/b2b.pdf")
    result = job.execute_in_process(
        run_config={
            "ops": {"add_documents_op": {"config": {"paths": [url], "name": "B2B TDS.pdf"}}},
            "resources": {"stores": {"config": {"home": str(home)}}},
        },
        instance=instance,
    )
    assert result.success
    assert result.output_for_node("add_documents_op") == ["b2b-tds.pdf"]
    assert instance.has_dynamic_partition(DOCUMENTS, "b2b-tds.pdf")

    refused = job.execute_in_process(
        run_config={
            "ops": {"add_documents_op": {"config": {"paths": [METADATA_URL]}}},
            "resources": {"stores": {"config": {"home": str(home)}}},
        },
        instance=instance,
    )
    assert refused.success  # a refused file is reported, not a failed run
    [output] = [e for e in refused.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata
    assert (metadata["added"].value, metadata["refused"].value) == (0, 1)
    assert "download refused: 169.254.169.254 is a link-local address" in metadata["outcomes"].value
    assert [r.doc_id for r in stores.catalog().list_documents()] == ["b2b-tds.pdf"]
