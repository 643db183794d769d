"""The obligations register and "what changed" through the real assets on fake providers, then
through the MCP client and the CLI, as a user meets them: version 1 of a procedure built, a
version 2 with three edits (a number changed in an obligation, a sentence deleted, a "must"
sentence added in another section) built beside it, and then

* ``compare_versions`` reports exactly those three changes with their pages and flags, and
  ``kb diff`` prints the same;
* ``search_obligations`` lists the served version's register only, exactly counted, and
  ``kb obligations --csv`` exports it;
* the upload page's "Changes" view shows the three side by side in Chromium.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from mcp import Client
from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.jobs import kb_resources
from kb_assets.intake import admit
from kb_assets.resources import StoresResource
from kb_assets.upload.service import UploadService
from kb_mcp.server import build_server
from kb_shared import layout
from tests.assets.fake_providers import FakeProviders
from tests.assets.test_upload_page import serving
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.fakes import tiny_pdf

NAME = "Fake Procedure.pdf"
DOC = "fake-procedure.pdf"

V1 = """<!-- page 1 -->
# Fake Retail Procedure

## 1 Notifications

The Retailer must notify the Distributor within 2 business days after a customer registers life support equipment.

The Distributor confirms each notification by email.

## 2 Records

The Distributor keeps the register of every site and reports it monthly. Old registers are archived for seven years.

<!-- page 2 -->
## 3 Flow

The Retailer must notify the Distributor again when the customer leaves the site.
"""
V2 = (
    V1.replace("within 2 business days", "within 5 business days")
    .replace(" Old registers are archived for seven years.", "")
    .replace(
        "when the customer leaves the site.\n",
        "when the customer leaves the site.\n\nThe Retailer must keep a copy of each notice.\n",
    )
)


def _build(stores: StoresResource, providers: FakeProviders, instance) -> None:
    result = dg.materialize(
        CORPUS_ASSETS, partition_key=DOC, resources=kb_resources(stores, providers),
        instance=instance,
    )
    assert result.success


@pytest.fixture
def two_versions(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders, instance
) -> StoresResource:
    _add_version(tmp_path, stores, providers, instance, 1, V1)
    _build(stores, providers, instance)
    _add_version(tmp_path, stores, providers, instance, 2, V2)
    _build(stores, providers, instance)
    return stores


def _add_version(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders, instance, number: int,
    markdown: str,
) -> None:
    """Admit version ``number`` of the document (a tiny PDF of its own), which the fake
    converter will read as ``markdown``."""
    path = tmp_path / f"v{number}" / NAME
    path.parent.mkdir()
    path.write_bytes(tiny_pdf(("first", "second")[number - 1]))
    providers.converter_.markdown = markdown
    assert admit([path], stores, instance, new_version=number > 1)[0].version == number


def _server(stores: StoresResource, providers: FakeProviders):
    return build_server(stores.settings, embedder=providers.embedder_, warm=False)


@pytest.mark.anyio
async def test_compare_versions_reports_exactly_the_three_edits(
    two_versions: StoresResource, providers: FakeProviders
) -> None:
    async with Client(_server(two_versions, providers)) as client:
        result = await client.call_tool("compare_versions", {"document": NAME})
    assert result.is_error is False, result.content[0].text
    data = result.structured_content
    assert (data["doc_id"], data["version"], data["previous_version"]) == (DOC, 2, 1)
    assert data["summary"] == {
        "added": 1, "removed": 1, "changed": 1, "moved": 0, "unchanged_sections": 0,
        "obligations_changed": 2, "numbers_changed": 1,
    }
    changed, removed, added = data["changes"]
    assert (changed["kind"], changed["section_after"], changed["obligation"]) == (
        "changed", "Fake Retail Procedure › 1 Notifications", True
    )
    assert changed["numbers"] == [["2 business days", "5 business days"]]
    assert (changed["before"]["pages"], changed["after"]["pages"]) == ([1], [1])
    assert (removed["kind"], removed["before"]["text"], removed["obligation"]) == (
        "removed", "Old registers are archived for seven years.", False
    )
    assert (added["kind"], added["after"]["text"], added["after"]["pages"]) == (
        "added", "The Retailer must keep a copy of each notice.", [2]
    )
    assert added["obligation"] is True
    # each side opens its own version's PDF: version 1's file is kept as the "before"
    assert changed["before"]["url"].endswith(f"/files/pdfs/{DOC}?before=1#page=1")
    assert changed["after"]["url"].endswith(f"/files/pdfs/{DOC}%40v2#page=1")
    assert two_versions.blobs().exists(layout.pdf_key(DOC))
    text = result.content[0].text
    assert text.splitlines()[0] == (
        "3 changes in Fake Procedure.pdf (v2) against v1: obligations touched by 2, numbers "
        "changed by 1; 1 added, 1 removed, 1 changed, 0 moved; 0 sections unchanged."
    )
    assert (
        "[C1] changed · Fake Retail Procedure › 1 Notifications — p. 1 (v1) → p. 1 (v2) · "
        "obligation · numbers: 2 business days → 5 business days"
    ) in text

    diff = CliRunner().invoke(
        cli.app, ["diff", DOC, "--json"], env={"KB_HOME": str(two_versions.settings.home)}
    )
    assert diff.exit_code == 0, diff.output
    assert '"numbers_changed": 1' in diff.stdout


@pytest.mark.anyio
async def test_a_first_version_has_no_previous_issue_and_says_how_to_add_one(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders, instance
) -> None:
    first = tmp_path / NAME
    first.write_bytes(tiny_pdf("first"))
    providers.converter_.markdown = V1
    admit([first], stores, instance)
    _build(stores, providers, instance)
    async with Client(_server(stores, providers)) as client:
        result = await client.call_tool("compare_versions", {"document": DOC})
    assert result.is_error is True
    assert (
        "'Fake Procedure.pdf' version 1 has no previous issue to compare with; add the new "
        "issue with `kb add NEW.pdf --new-version`"
    ) in result.content[0].text
    diff = CliRunner().invoke(cli.app, ["diff", DOC], env={"KB_HOME": str(stores.settings.home)})
    assert diff.exit_code == 2
    assert "has no previous issue" in diff.stderr


@pytest.mark.anyio
async def test_search_obligations_serves_the_new_versions_register_exactly(
    two_versions: StoresResource, providers: FakeProviders
) -> None:
    async with Client(_server(two_versions, providers)) as client:
        result = await client.call_tool("search_obligations", {"party": "retailer"})
    data = result.structured_content
    assert data["count"] == 3  # version 2's three "must" sentences; version 1's are gone
    assert data["by_document"] == {DOC: 3}
    assert [o["version"] for o in data["obligations"]] == [2, 2, 2]
    assert [o["page"] for o in data["obligations"]] == [1, 2, 2]
    assert data["obligations"][0]["deadline"] == (
        "within 5 business days after a customer registers life support equipment"
    )
    exported = CliRunner().invoke(
        cli.app, ["obligations", "--csv", "-"], env={"KB_HOME": str(two_versions.settings.home)}
    )
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [r["text"] for r in rows] == [
        "The Retailer must notify the Distributor within 5 business days after a customer "
        "registers life support equipment.",
        "The Retailer must notify the Distributor again when the customer leaves the site.",
        "The Retailer must keep a copy of each notice.",
    ]


def test_the_upload_page_shows_the_changes_side_by_side_with_both_pdfs(
    two_versions: StoresResource, instance, browser_page: Any,  # noqa: F811
) -> None:
    page = browser_page
    with serving(UploadService(two_versions.settings, instance)) as base:
        page.goto(base + "/")
        link = page.locator(f'#corpus tr[data-doc="{DOC}"] .changes-link')
        link.wait_for()
        assert link.inner_text() == "Changes (3)"
        link.click()
        page.wait_for_selector('#changes-table tr[data-change="3"]')
        assert page.locator("#changes-title").inner_text() == (
            "Changes in Fake Procedure.pdf (v2) against v1"
        )
        assert page.locator("#changes-summary").inner_text() == (
            "obligations touched by 2, numbers changed by 1; 1 added, 1 removed, 1 changed, "
            "0 moved; "
            "0 sections unchanged."
        )
        first = page.locator('#changes-table tr[data-change="1"]')
        assert first.locator(".flag.number").inner_text() == "2 business days → 5 business days"
        before, after = first.locator("td.side").all()
        assert "within 2 business days" in before.inner_text()
        assert "within 5 business days" in after.inner_text()
        assert before.locator("a.page").get_attribute("href").endswith(
            f"/pdfs/{DOC}?before=1#page=1"
        )
        assert after.locator("a.page").inner_text() == "v2, p. 1"
        assert page.locator('#changes-table tr[data-change="3"] .badge').inner_text() == "added"
        page.screenshot(path=str(two_versions.settings.home / "changes.png"), full_page=True)
    assert page.kb_errors == []


@pytest.mark.anyio
async def test_versions_given_in_the_wrong_order_are_refused_with_the_rule(
    two_versions: StoresResource, providers: FakeProviders
) -> None:
    async with Client(_server(two_versions, providers)) as client:
        reversed_ = await client.call_tool(
            "compare_versions", {"document": NAME, "from_version": 2, "to_version": 1}
        )
        older = await client.call_tool("compare_versions", {"document": NAME, "to_version": 1})
    assert reversed_.is_error is True
    assert (
        "from_version (2) must be older than to_version (1); kb compares an issue with the one "
        "before it"
    ) in reversed_.content[0].text
    assert "'Fake Procedure.pdf' version 1 has no previous issue" in older.content[0].text


@pytest.mark.anyio
async def test_an_older_version_asked_for_names_the_version_compared_with_it(
    two_versions: StoresResource, providers: FakeProviders
) -> None:
    async with Client(_server(two_versions, providers)) as client:
        older = await client.call_tool("compare_versions", {"document": NAME, "to_version": 1})
    assert older.is_error is True
    text = older.content[0].text
    assert (
        "version 1 has no previous issue: it is the first; version 2 is compared with it: ask "
        "for to_version=2"
    ) in text
    assert "kb add" not in text  # a second issue exists: adding one is no advice


@pytest.mark.anyio
async def test_a_new_version_not_built_yet_is_named_not_asked_to_be_added(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders, instance
) -> None:
    _add_version(tmp_path, stores, providers, instance, 1, V1)
    _build(stores, providers, instance)
    _add_version(tmp_path, stores, providers, instance, 2, V2)  # not built
    async with Client(_server(stores, providers)) as client:
        result = await client.call_tool("compare_versions", {"document": DOC})
    assert result.is_error is True
    assert result.content[0].text.endswith(
        "'Fake Procedure.pdf' version 1 has no previous issue; its version 2 is pending: it is "
        "compared with version 1 once it is built"
    )
