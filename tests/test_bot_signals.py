"""The bot signals a request carries besides its User-Agent and IP (HEAD, From, X-Scanner, the alternative
User-Agent headers crawlerdetect reads, Sec-CH-UA): read at the edge, decided on the click path and
journaled as a bot's click, the same in `lanner simulate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import click, request, subid_of
from crawlerdetect import CrawlerDetect

from models.lookups.bots import MAX_SIGNAL_VALUE, BotDetector, request_signals

CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Safari/537.36"
)
CHROME_BRANDS = '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'
SAMPLE = Path(__file__).resolve().parent / "fixtures" / "device_detector" / "bots_sample.jsonl"

# The issue's five: a Chrome User-Agent with a header that gives the bot away (crawlerdetect, given the
# headers, flags all five; Lanner judged the User-Agent alone and stored five human desktop clicks).
ISSUE_CASES = [
    (
        {"HTTP_SEC_CH_UA": '"HeadlessChrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'},
        "sec-ch-ua: crawler: Headless",
    ),
    ({"HTTP_FROM": "googlebot(at)googlebot.com"}, "from header"),
    (
        {"HTTP_X_ORIGINAL_USER_AGENT": "Googlebot/2.1 (+http://www.google.com/bot.html)"},
        "x-original-user-agent: crawler: Googlebot",
    ),
    (
        {"HTTP_X_DEVICE_USER_AGENT": "Mozilla/5.0 (compatible; bingbot/2.0)"},
        "x-device-user-agent: crawler: bingbot",
    ),
    ({"HTTP_X_SCANNER": "Netsparker"}, "scanner header"),
]


@pytest.fixture(scope="module")
def detector() -> BotDetector:
    return BotDetector()


@pytest.mark.parametrize(("headers", "reason"), ISSUE_CASES)
def test_a_header_crawlerdetect_reads_makes_a_chrome_user_agent_a_bot(detector, headers, reason):
    environ = {"REQUEST_METHOD": "GET", "HTTP_USER_AGENT": CHROME, **headers}
    assert CrawlerDetect(headers=environ).is_crawler()
    assert detector.reason(CHROME, "203.0.113.9") is None
    assert detector.reason(CHROME, "203.0.113.9", request_signals(environ)) == reason


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_X_OPERAMINI_PHONE_UA": "facebookexternalhit/1.1"},
        {"HTTP_DEVICE_STOCK_UA": "Mozilla/5.0 (compatible; Googlebot/2.1)"},
        {"HTTP_X_UCBROWSER_DEVICE_UA": "curl/8.5.0"},
        {"HTTP_X_SKYFIRE_PHONE": "python-requests/2.31"},
        {"HTTP_X_BOLT_PHONE_UA": "Wget/1.21"},
    ],
)
def test_every_alternative_user_agent_header_is_judged_as_a_user_agent(detector, headers):
    assert detector.reason(CHROME, "203.0.113.9", request_signals({"REQUEST_METHOD": "GET", **headers}))


def test_head_is_a_bot_signal(detector):
    assert (
        detector.reason(CHROME, "203.0.113.9", request_signals({"REQUEST_METHOD": "HEAD"})) == "head request"
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"HTTP_SEC_CH_UA": CHROME_BRANDS},
        {"HTTP_SEC_CH_UA": '"Chromium";v="124", "YaBrowser";v="24.4", "Not-A.Brand";v="99", "Yandex";v="24"'},
        {"HTTP_SEC_CH_UA_PLATFORM": '"Android"', "HTTP_SEC_CH_UA_MOBILE": "?1"},  # Not a bot signal.
        {"HTTP_X_ORIGINAL_USER_AGENT": CHROME},
        {"HTTP_X_DEVICE_USER_AGENT": "   "},
        {"HTTP_FROM": ""},
    ],
)
def test_a_browser_s_own_headers_are_no_signal(detector, headers):
    signals = request_signals({"REQUEST_METHOD": "GET", **headers})
    assert detector.reason(CHROME, "203.0.113.9", signals) is None


def test_no_person_s_client_hints_in_device_detector_s_fixtures_make_a_bot(detector):
    people = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    hinted = [row for row in people if "bot" not in row and "Sec-CH-UA" in row.get("headers", {})]
    assert len(hinted) > 100
    for row in hinted:
        environ = {"REQUEST_METHOD": "GET", "HTTP_SEC_CH_UA": row["headers"]["Sec-CH-UA"]}
        assert detector.signals_reason(request_signals(environ)) is None, row["headers"]["Sec-CH-UA"]


def test_signals_are_bounded_and_tabs_cannot_forge_a_part(detector):
    environ = {"HTTP_X_ORIGINAL_USER_AGENT": "x" * 5000 + "Googlebot", "HTTP_SEC_CH_UA": 'a\thead\t"b"'}
    signals = request_signals(environ)
    assert len(signals) < 2 * MAX_SIGNAL_VALUE + 64
    assert signals.count("\t") == 1  # Two parts: the header and the brand list, whose tabs are spaces.
    assert detector.signals_reason(signals) is None  # Googlebot was cut off; "head" inside is no HEAD.


def test_the_signal_cache_stays_bounded(detector):
    for n in range(5000):
        detector.signals_reason(f'sec-ch-ua "Brand{n}";v="1"')
    assert len(detector._signal_cache) <= 4096


# --- the click path and `lanner simulate` -------------------------------------------------------------------


@pytest.fixture
def campaign(lanner):
    lanner(
        "campaign",
        "create",
        "Plain",
        "--alias",
        "plain",
        "--offer-url",
        "https://offer.example/?click={subid}",
    )
    return "plain"


def stored(settings, subid: str) -> dict | None:
    """The click's row by column name, read on the test's own connection (either backend)."""
    from models.store.database import db

    cursor = db.connection().execute("SELECT * FROM click WHERE subid = ?", (subid,))
    try:
        row = cursor.fetchone()
        return dict(zip([column[0] for column in cursor.description], row, strict=True)) if row else None
    finally:
        cursor.close()


def test_a_header_signal_is_journaled_as_a_bot_and_stored_as_one(campaign, app_client, lanner, settings):
    # The plain campaign needs no bot check, so the User-Agent and IP are left to the flusher, which
    # cannot see the headers: the click path decides them and journals is_bot 1.
    headers = {"X-Real-IP": "203.0.113.7", "User-Agent": CHROME, "X-Original-User-Agent": "Googlebot/2.1"}
    status, answer, _ = request(app_client, "/plain", headers)
    person_status, person, _ = click(app_client, campaign, ip="203.0.113.70", ua=CHROME)
    assert status == person_status == 302
    lines = b"".join(path.read_bytes() for path in sorted(settings.spool_dir.glob("*.log")))
    assert len(lines.splitlines()) == 2
    lanner("spool", "flush")
    bot, human = (
        stored(settings, subid_of(answer["location"])),
        stored(settings, subid_of(person["location"])),
    )
    assert (bot["is_bot"], bot["device_type"]) == (1, "bot")
    assert (human["is_bot"], human["device_type"]) == (0, "desktop")


def test_head_is_answered_like_get_without_a_body_and_counted_as_a_bot(
    campaign, app_client, lanner, settings
):
    status, headers, body = request(
        app_client, "/plain", {"X-Real-IP": "203.0.113.8", "User-Agent": CHROME}, "HEAD"
    )
    assert status == 302 and body == b""  # Was 405: no route for HEAD, so neither tracked nor redirected.
    assert headers["location"].startswith("https://offer.example/?click=")
    lanner("spool", "flush")
    row = stored(settings, subid_of(headers["location"]))
    assert (row["is_bot"], row["device_type"], row["user_agent"]) == (1, "bot", CHROME)


def test_simulate_takes_the_headers_and_the_method_and_prints_the_same_verdict(campaign, lanner):
    def verdict(*args: str) -> str | None:
        output = lanner("simulate", "/plain", "--ua", CHROME, "--json", *args).stdout
        return json.loads(output)["visitor"]["bot_reason"]

    assert verdict() is None
    assert verdict("--header", "From: googlebot(at)googlebot.com") == "from header"
    brands = '"HeadlessChrome";v="131", "Chromium";v="131"'
    assert verdict("--header", f"Sec-CH-UA: {brands}") == "sec-ch-ua: crawler: Headless"
    assert verdict("--method", "HEAD") == "head request"
    refused = lanner("simulate", "/plain", "--method", "POST", check=False)
    assert refused.returncode != 0 and "POST" in refused.stderr
