"""Reading the Notion tracker over HTTP (``kb_shared.market.notion.NotionTracker``): the real
recorded responses in ../shared/corpus/notion/ and built tracker pages, served by
``FakeNotion`` through respx at the network edge (notion-client's own httpx client talks
to it). Retries are observed through an injected ``sleep`` that records instead of waiting."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml

from kb_shared.errors import NotionSyncError
from kb_shared.market.notion import (
    MAX_RETRIES,
    NotionTracker,
    missing_notion_settings,
    retry_after_seconds,
)
from kb_shared.settings import Settings
from tests.conftest import corpus_dir
from tests.market.notion_server import (
    API_URL,
    DATA_SOURCE_ID,
    DATABASE_ID,
    TOKEN,
    FakeNotion,
    error,
    load_json,
    page_id,
    rate_limited,
    tracker_page,
)

RECORDED_2025 = "notion_data_sources_query_response_3rows__api-2025-09-03__notion-sdk-py.json"
RECORDED_2022_P1 = "notion_databases_query_response_page1__api-2022-06-28__notion-objects.json"
RECORDED_2022_P2 = "notion_databases_query_response_page2__api-2022-06-28__notion-objects.json"
CASSETTE = "notion-sdk-py__test_data_sources_query.cassette.HEAD.yaml"


def notion_corpus() -> Path:
    return corpus_dir() / "notion"


def tracker(ident: str = DATA_SOURCE_ID, **kwargs) -> tuple[NotionTracker, list[float]]:
    slept: list[float] = []
    return NotionTracker(TOKEN, ident, api_url=API_URL, sleep=slept.append, **kwargs), slept


def pages(n: int) -> list[dict]:
    return [tracker_page(f"p{i}", summary=f"Action {i}", fine=1000 * i) for i in range(n)]


# --- the real recorded responses ------------------------------------------------------------


def test_recorded_2025_query_reads_its_three_live_pages(fake: FakeNotion) -> None:
    body = load_json(notion_corpus() / RECORDED_2025)
    fake.recorded[("3aaabc1e-edcd-8180-bf96-000b39bf4303", None)] = body
    client, slept = tracker("3aaabc1e-edcd-8180-bf96-000b39bf4303")
    read = client.read()
    assert [p["id"] for p in read.pages] == [
        "3aaabc1e-edcd-81d8-a094-ff17f952ac1d",
        "3aaabc1e-edcd-8126-b2e7-c4fcca6af0f0",
        "3aaabc1e-edcd-8159-8df2-efe939377efa",
    ]
    assert (read.trashed, read.other, read.requests, slept) == (0, 0, 1, [])
    sent = fake.requests[0]
    assert sent.url == f"{API_URL}/v1/data_sources/3aaabc1e-edcd-8180-bf96-000b39bf4303/query"
    assert sent.headers["notion-version"] == "2025-09-03"
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert fake.bodies() == [{"page_size": 100}]


def test_recorded_2022_pages_are_followed_through_next_cursor(fake: FakeNotion) -> None:
    first = load_json(notion_corpus() / RECORDED_2022_P1)
    second = load_json(notion_corpus() / RECORDED_2022_P2)
    fake.recorded[(DATA_SOURCE_ID, None)] = first
    fake.recorded[(DATA_SOURCE_ID, "db14e46a-c365-454e-9408-7b1841b593e4")] = second
    read = tracker()[0].read()
    assert [p["id"] for p in read.pages] == [
        "794e8d6f-e25a-4071-a630-ec1f24eee771",
        "390100a5-4808-4236-b8b4-87352b65c403",
        "ea329848-0c05-48ee-950a-8df7578a5bd0",
    ]
    assert read.requests == 2 and read.trashed == 0  # 2022 pages carry only "archived": false
    assert fake.bodies() == [
        {"page_size": 100},
        {"page_size": 100, "start_cursor": "db14e46a-c365-454e-9408-7b1841b593e4"},
    ]


def test_a_database_id_is_resolved_to_its_data_source(fake: FakeNotion) -> None:
    """The cassette's real database object (``data_sources[].id``) and empty query answer."""
    cassette = yaml.safe_load((notion_corpus() / CASSETTE).read_text(encoding="utf-8"))
    answers = {
        (i["request"]["method"], i["request"]["uri"].rsplit("/v1/", 1)[1]): i["response"]
        for i in cassette["interactions"]
    }
    database = json.loads(answers[("POST", "databases")]["body"]["string"])
    query = "data_sources/393abc1e-edcd-81a2-8d0b-000bae7f15dc/query"
    empty = json.loads(answers[("POST", query)]["body"]["string"])
    fake.databases[database["id"]] = database
    fake.recorded[("4ee04178-60dc-4b13-a1ea-14e3b9661a33", None)] = empty
    read = tracker("daf41515-aa5f-4d14-97a8-9193425ec491")[0].read()
    assert (read.data_source_id, read.pages, read.requests) == (
        "4ee04178-60dc-4b13-a1ea-14e3b9661a33",
        (),
        1,
    )
    assert [(r.method, r.url.path) for r in fake.requests] == [
        ("POST", "/v1/data_sources/daf41515-aa5f-4d14-97a8-9193425ec491/query"),
        ("GET", "/v1/databases/daf41515-aa5f-4d14-97a8-9193425ec491"),
        ("POST", "/v1/data_sources/4ee04178-60dc-4b13-a1ea-14e3b9661a33/query"),
    ]


# --- built tracker pages --------------------------------------------------------------------


def test_paging_follows_has_more_over_three_pages(fake: FakeNotion) -> None:
    fake.pages = pages(7)
    read = tracker()[0].read(page_size=3)
    assert [p["id"] for p in read.pages] == [page_id(f"p{i}") for i in range(7)]
    bodies = fake.bodies()
    assert read.requests == 3 and len(bodies) == 3
    assert [b["page_size"] for b in bodies] == [3, 3, 3]
    assert "start_cursor" not in bodies[0]
    assert bodies[1]["start_cursor"] != bodies[2]["start_cursor"]


def test_trashed_and_archived_pages_are_skipped(fake: FakeNotion) -> None:
    fake.pages = pages(4)
    fake.serve_trashed = True
    fake.trash("p1")
    fake.pages[2]["archived"] = True  # the pre-2026 name of in_trash
    read = tracker()[0].read()
    assert [p["id"] for p in read.pages] == [page_id("p0"), page_id("p3")]
    assert read.trashed == 2


def test_a_database_with_two_data_sources_is_refused_listing_them(fake: FakeNotion) -> None:
    fake.databases[DATABASE_ID] = {
        "object": "database",
        "id": DATABASE_ID,
        "data_sources": [
            {"id": "aaaaaaaa-0000-4000-8000-000000000001", "name": "Actions"},
            {"id": "aaaaaaaa-0000-4000-8000-000000000002", "name": "Archive"},
        ],
    }
    with pytest.raises(NotionSyncError) as info:
        tracker(DATABASE_ID)[0].read()
    assert str(info.value) == (
        f"Notion database {DATABASE_ID} has 2 data sources: "
        "Actions (aaaaaaaa-0000-4000-8000-000000000001), "
        "Archive (aaaaaaaa-0000-4000-8000-000000000002). "
        "Set KB_NOTION_DATA_SOURCE_ID to the tracker's."
    )


def test_an_unknown_id_names_the_setting(fake: FakeNotion) -> None:
    with pytest.raises(NotionSyncError, match="KB_NOTION_DATA_SOURCE_ID=nope-123 is not a data "):
        tracker("nope-123")[0].read()
    assert [r.method for r in fake.requests] == ["POST", "GET"]


# --- retries ----------------------------------------------------------------------------------


def test_429_waits_what_retry_after_asks(fake: FakeNotion) -> None:
    fake.pages = pages(5)
    fake.failures.extend([rate_limited("2"), rate_limited("0.5")])
    client, slept = tracker()
    read = client.read(page_size=2)
    assert slept == [2.0, 0.5]
    assert len(read.pages) == 5 and read.requests == 3
    assert len(fake.requests) == 5  # two refused, three answered


def test_529_overloaded_honours_retry_after_too(fake: FakeNotion) -> None:
    fake.pages = pages(1)
    fake.failures.append(error(529, "service_overloaded", "Overloaded.", Retry_After="3"))
    client, slept = tracker()
    assert len(client.read().pages) == 1
    assert slept == [3.0]


def test_500s_then_success_back_off_exponentially(fake: FakeNotion) -> None:
    fake.pages = pages(3)
    fake.failures.extend(
        [
            error(500, "internal_server_error", "Unexpected error."),
            error(502, "bad_gateway", "Bad gateway."),
            error(503, "service_unavailable", "Notion is unavailable."),
        ]
    )
    client, slept = tracker()
    assert len(client.read().pages) == 3
    # wait_exponential_jitter: 1 s, 2 s, 4 s, each plus up to 1 s of jitter
    assert len(slept) == 3
    assert [1 <= slept[0] <= 2, 2 <= slept[1] <= 3, 4 <= slept[2] <= 5] == [True, True, True]


def test_retries_are_bounded(fake: FakeNotion) -> None:
    fake.pages = pages(3)
    fake.fail_after = 0
    fake.fail_with = error(503, "service_unavailable", "Notion is unavailable.")
    client, slept = tracker(max_retries=2)
    with pytest.raises(NotionSyncError) as info:
        client.read()
    assert len(fake.requests) == 3 and len(slept) == 2
    assert "HTTP 503 service_unavailable" in str(info.value)
    assert "after 3 attempts; try again later. Nothing was written." in str(info.value)


def test_default_retry_budget(fake: FakeNotion) -> None:
    fake.fail_after = 0
    fake.fail_with = rate_limited("1")
    client, slept = tracker()
    with pytest.raises(NotionSyncError, match="HTTP 429 rate_limited"):
        client.read()
    assert slept == [1.0] * MAX_RETRIES
    assert len(fake.requests) == MAX_RETRIES + 1


def test_a_retry_after_longer_than_kb_waits_ends_the_read(fake: FakeNotion) -> None:
    fake.failures.append(rate_limited("3600"))
    client, slept = tracker()
    with pytest.raises(NotionSyncError, match="asked kb to wait 3600 s") as info:
        client.read()
    assert slept == [] and len(fake.requests) == 1
    assert "run the sync later" in str(info.value)


def test_a_refused_token_is_named_but_never_shown(fake: FakeNotion) -> None:
    client = NotionTracker("ntn_wrong_secret", DATA_SOURCE_ID, api_url=API_URL, sleep=[].append)
    with pytest.raises(NotionSyncError) as info:
        client.read()
    message = str(info.value)
    assert "Notion refused NOTION_TOKEN" in message and "401 unauthorized" in message
    assert "ntn_wrong_secret" not in message
    assert len(fake.requests) == 1  # 401 is final


def test_has_more_without_a_next_cursor_fails(fake: FakeNotion) -> None:
    fake.recorded[(DATA_SOURCE_ID, None)] = {
        "object": "list", "results": [pages(1)[0]], "has_more": True, "next_cursor": None,
    }
    with pytest.raises(NotionSyncError, match="has more results but gave no next_cursor"):
        tracker()[0].read()


# --- settings ---------------------------------------------------------------------------------


def test_settings_read_the_vendor_token_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTION_TOKEN", "ntn_from_env")
    monkeypatch.setenv("KB_NOTION_DATA_SOURCE_ID", DATA_SOURCE_ID)
    settings = Settings()
    assert settings.notion_token is not None
    assert settings.notion_token.get_secret_value() == "ntn_from_env"
    assert settings.notion_data_source_id == DATA_SOURCE_ID
    assert settings.notion_api_url == "https://api.notion.com"
    assert missing_notion_settings(settings) == []
    assert "ntn_from_env" not in repr(settings)


def test_missing_settings_are_named() -> None:
    settings = Settings(notion_token=None, notion_data_source_id=None)
    assert missing_notion_settings(settings) == ["NOTION_TOKEN", "KB_NOTION_DATA_SOURCE_ID"]
    with pytest.raises(NotionSyncError) as info:
        NotionTracker.from_settings(settings)
    assert str(info.value) == (
        "the Notion sync needs NOTION_TOKEN and KB_NOTION_DATA_SOURCE_ID: set them "
        "(see the README's settings table)"
    )


def test_from_settings_uses_the_api_url(fake: FakeNotion) -> None:
    fake.pages = pages(2)
    settings = Settings(
        notion_token=TOKEN, notion_data_source_id=DATA_SOURCE_ID, notion_api_url=API_URL + "/"
    )
    with NotionTracker.from_settings(settings) as client:
        assert len(client.read().pages) == 2
    assert str(fake.requests[0].url).startswith("https://notion.test/v1/data_sources/")


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_values(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


def test_retry_after_as_an_http_date() -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90)
    wait = retry_after_seconds({"retry-after": later.strftime("%a, %d %b %Y %H:%M:%S GMT")})
    assert wait is not None and 85 <= wait <= 90
