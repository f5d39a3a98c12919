"""The bot decision on the User-Agent against device-detector's fixtures (a committed sample, see
tests/fixtures/device_detector/BOTS.md): Lanner's own list (models/lookups/botsignatures.py) and the real
browsers it exempts, the Cronet exclusion, and device=bot exactly when is_bot, on the click path's and the
flusher's way alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import re2
from crawlerdetect import CrawlerDetect

from models.clicks.record import CLICK_COLUMNS, DEVICE_TYPE, IP, IS_BOT, NOT_CHECKED, USER_AGENT
from models.clicks.spool import fill_lookups
from models.lookups import bots, botsignatures
from models.lookups.bots import BotDetector
from models.lookups.useragent import DeviceInfo, UserAgentParser, device_type

SAMPLE = Path(__file__).resolve().parent / "fixtures" / "device_detector" / "bots_sample.jsonl"
FIXTURES = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
BOTS = [row for row in FIXTURES if "bot" in row]
PEOPLE = [row for row in FIXTURES if "bot" not in row]


@pytest.fixture(scope="module")
def detector() -> BotDetector:
    return BotDetector(cache_size=100_000)


@pytest.fixture(scope="module")
def parser() -> UserAgentParser:
    return UserAgentParser(cache_size=100_000)


def test_the_sample_is_what_its_readme_says():
    assert (len(BOTS), len(PEOPLE)) == (1339, 2118)


# device-detector's one bot that is a whole Firefox User-Agent with the WebMoney Advisor add-on's token, the
# shape of a person's browser in Crawler-Detect's devices.txt (line 122646): Lanner calls both people.
WEBMONEY_ADVISOR_FIREFOX = (
    "Mozilla/5.0 (X11; U; Linux i686; ru; rv:1.9.0.5) Gecko/2008121621 Ubuntu/8.04 (hardy) Firefox/3.0.5 "
    "WebMoney Advisor"
)


def test_every_device_detector_bot_in_the_sample_is_a_bot_but_a_browser_add_on(detector):
    # Before the extra list, 279 of device-detector's 1,342 bots passed as people.
    missed = [row["ua"] for row in BOTS if detector.reason(row["ua"], "198.51.100.1") is None]
    assert missed == [WEBMONEY_ADVISOR_FIREFOX]


@pytest.mark.parametrize(
    ("user_agent", "reason"),
    [  # device-detector's fixtures of the bots the issue names.
        (
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko; GoogleAdSenseInfeed) "
            "Chrome/131.0.0.0 Mobile Safari/537.36",
            "ad review: GoogleAdSenseInfeed",
        ),
        ("meta-externalads", "ad review: meta-externalads"),
        ("meta-externalagent/1.1", "ai: meta-externalagent"),  # Its fixture's URL says "crawler".
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Perplexity-User/1.0; "
            "+https://perplexity.ai/perplexity-user)",
            "ai: Perplexity-User",
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Anthropic-Claude/1.0; "
            "+https://www.anthropic.com)",
            "ai: Anthropic-Claude",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko; compatible; "
            "BW/1.1; bit.ly/2W6Px8S) Chrome/84.0.4147.105 Safari/537.36",
            "seo: compatible; BW/",
        ),
        (
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like "
            "Gecko) Chrome/109.0.0.0 Mobile Safari/537.36 +https://sitebulb.com",
            "seo: sitebulb",
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/92.0.4515.107 Safari/537.36 (compatible; +https://developers.cloudflare.com/security-center/)",
            "monitoring: developers.cloudflare.com",
        ),
    ],
)
def test_the_extra_list_names_its_family(detector, user_agent, reason):
    assert detector.reason(user_agent, "198.51.100.1") == reason
    assert CrawlerDetect().is_crawler(user_agent) is False  # What crawlerdetect alone misses.


def test_the_extra_list_matches_no_person_in_the_sample(detector):
    signatures = detector._signatures
    assert [row["ua"] for row in PEOPLE if signatures.reason(row["ua"]) is not None] == []


# Real browsers a shape or token rule caught (botsignatures.EXEMPT_BROWSERS), each beside what the rule is
# there for: a bot of the same shape, still flagged, with its reason.
EXEMPT_CASES = [
    # The bare "Mozilla/5.0 (compatible; Name/1.0; ...)": KDE 2 and 3's Konqueror said no more.
    ("Mozilla/5.0 (compatible; Konqueror/2.2.2)", None),
    ("Mozilla/5.0 (compatible; Konqueror/3.1; Linux; en)", None),
    ("Mozilla/5.0 (compatible; Konqueror/2.2.2; Linux 2.4.14-xfs; X11; i686)", None),
    ("Mozilla/5.0 (compatible; CsQuery/1.3)", "script: Mozilla/5.0 (compatible; CsQuery/1.3)"),
    (
        "Mozilla/5.0 (compatible; KonquerorX/3.1; Linux)",
        "script: Mozilla/5.0 (compatible; KonquerorX/3.1; Linux)",
    ),
    ("Mozilla/5.0 (compatible; Konqueror/3.1; me@example.com)", "script: me@example.com"),
    # "+http" after a browser's tokens: K-Meleon's own comment may carry its distributor's address.
    (
        "Mozilla/5.0 (Windows; U; Windows NT 5.1; de-DE; rv:1.8.1.14) Gecko/20080406 K-Meleon/1.1.5 "
        "(+http://www.kangaroo-personal.de)",
        None,
    ),
    (
        "Mozilla/5.0 (Windows; U; Windows NT 5.1; de-DE; rv:1.8.1.14) Gecko/20080406 Zorblax/1.1.5 "
        "(+http://zorblax.example)",
        "script: Mozilla/5.0 (Windows; U; Windows NT 5.1; de-DE; rv:1.8.1.14)",
    ),
    (
        "Mozilla/5.0 (Windows; U; Windows NT 5.1; +http://zorblax.example) Gecko/20080406 K-Meleon/1.1.5 "
        "(+http://www.kangaroo-personal.de)",
        "script: Mozilla/5.0 (Windows; U; Windows NT 5.1; +http://zorblax.exa",
    ),
    # "Mozilla/5.0; ..." without parentheses: an iOS app's copy of Mobile Safari's tokens is a person's.
    (
        "Mozilla/5.0; iPhone; CPU iPhone OS 8_1_2 like Mac OS X; AppleWebKit/600.1.4; KHTML, like Gecko; "
        "Version/8.0 Mobile/12B440 Safari/600.1.4",
        None,
    ),
    ("Mozilla/5.0; Zorblax/2.0", "script: Mozilla/5.0; "),
    ("Mozilla/5.0; iPhone; CPU iPhone OS 8_1_2 like Mac OS X; Zorblax/8.4", "script: Mozilla/5.0; "),
    # WebMoney Advisor: the add-on's token in a whole Firefox or Internet Explorer User-Agent is a person's.
    ("Mozilla/5.0 (Windows NT 6.1; WOW64; rv:2.0.1) Gecko/20100101 Firefox/4.0.1 WebMoney Advisor", None),
    (WEBMONEY_ADVISOR_FIREFOX, None),
    (
        "Mozilla/5.0 (Windows; U; Windows NT 6.1; ru; rv:1.9.2.6) Gecko/20100625 MRA 5.6 (build 03402) "
        "Firefox/3.6.6 ( .NET CLR 3.5.30729) WebMoney Advisor",
        None,
    ),
    (
        "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 5.1; Trident/4.0; WebMoney Advisor; GTB7.4; "
        ".NET CLR 2.0.50727)",
        None,
    ),
    ("WebMoney Advisor", "seo: WebMoney Advisor"),
    ("Mozilla/5.0 (compatible; WebMoney Advisor)", "seo: WebMoney Advisor"),
    ("Mozilla/5.0 Firefox/4.0.1 WebMoney Advisor", "seo: WebMoney Advisor"),
    (
        "Mozilla/5.0 (Windows NT 6.1; rv:2.0.1) Gecko/20100101 Firefox/4.0.1 Sitebulb WebMoney Advisor",
        "seo: Sitebulb",
    ),
    (
        "Mozilla/5.0 (Windows NT 6.1; research; rv:2.0.1) Gecko/20100101 Firefox/4.0.1 WebMoney Advisor",
        "scanner: research",
    ),
]


@pytest.mark.parametrize(("user_agent", "reason"), EXEMPT_CASES)
def test_a_real_browser_is_exempt_from_the_rule_that_caught_it_and_no_other(detector, user_agent, reason):
    assert detector.reason(user_agent, "198.51.100.1") == reason


def test_every_exempt_browser_names_a_rule_of_the_list():
    rules = {rule for patterns in botsignatures.FAMILIES.values() for rule in patterns}
    assert set(botsignatures.EXEMPT_BROWSERS) <= rules


def test_an_exempt_browser_s_reason_is_the_one_the_family_union_gives_without_the_rule(detector):
    # The rule-by-rule search an exempt browser takes finds what re2's union finds (leftmost, then the rule
    # listed first) on every signature hit of the fixtures, with nothing exempted.
    signatures = detector._signatures
    options = bots._re2_options()
    checked = 0
    for family, pattern, _rules in signatures.families:
        rules = tuple((re2.compile(rule, options), None) for rule in botsignatures.FAMILIES[family])
        for ua in (row["ua"] for row in FIXTURES):
            union = pattern.search(ua)
            one_by_one = bots._first_match(ua, rules)
            assert (union and union.group(0)) == (one_by_one and one_by_one.group(0)), (family, ua)
            checked += union is not None
    assert checked > 800


def test_the_rule_set_gives_the_reason_the_families_searched_in_order_give(detector):
    # A hit's reason comes from an RE2 set of every rule; without it (its DFA out of memory) the families
    # are searched in turn. Both ways agree, on the fixtures and on the exempt browsers' cases.
    signatures = detector._signatures
    agents = [row["ua"] for row in FIXTURES] + [ua for ua, _reason in EXEMPT_CASES]
    assert [signatures.reason(ua) for ua in agents] == [signatures.reason_by_family(ua) for ua in agents]
    assert sum(signatures.reason(ua) is not None for ua in agents) > 700


def test_cronet_is_chromium_s_network_stack_not_a_cron_job(detector):
    cronet = [row["ua"] for row in PEOPLE if "Cronet" in row["ua"]]
    assert len(cronet) == 21
    assert all(CrawlerDetect().is_crawler(ua) for ua in cronet)  # crawlerdetect's generic "cron".
    assert [ua for ua in cronet if detector.reason(ua, "198.51.100.1") is not None] == []
    # crawlerdetect's own crawler fixtures need "cron" inside words: still bots.
    for crawler in (
        "EasyCron/1.0 (https://www.easycron.com/)",
        "SetCronJob/1.0",
        "Cronless/1.1",
        "CronDroid/1.0",
    ):
        assert detector.reason(crawler, "198.51.100.1") is not None, crawler


def test_bot_recall_does_not_depend_on_ua_parser(detector):
    # The decision never asks ua-parser (its "Spider" device family is no signal): a detector used with
    # no parser anywhere in the process finds the same bots.
    fresh = BotDetector(cache_size=10)
    assert [row["ua"] for row in BOTS if fresh.reason(row["ua"], "") is None] == [WEBMONEY_ADVISOR_FIREFOX]
    assert fresh.reason("Microsoft Edge Update/1.3.153.47;winhttp", "") is None  # ua-parser: "Spider".


def test_device_bot_and_is_bot_never_disagree_on_the_click_path_or_the_flusher(detector, parser):
    rows = []
    for fixture in FIXTURES:
        row = [""] * len(CLICK_COLUMNS)
        row[USER_AGENT], row[IP], row[IS_BOT] = fixture["ua"], "198.51.100.1", NOT_CHECKED
        rows.append(row)
    fill_lookups(rows, parser, detector)  # The flusher's way.
    disagree = [row[USER_AGENT] for row in rows if (row[DEVICE_TYPE] == "bot") != (row[IS_BOT] == 1)]
    assert disagree == []
    # The click path's way: the same function types the device once the decision is known.
    for fixture in FIXTURES:
        is_bot = detector.is_bot(fixture["ua"], "198.51.100.1")
        assert (device_type(parser.parse(fixture["ua"]), is_bot) == "bot") == is_bot


def test_a_parser_s_bot_device_is_unknown_unless_the_decision_says_bot():
    spider = DeviceInfo("bot", "", "")
    assert device_type(spider, False) == "unknown"
    assert device_type(spider, True) == "bot"
    assert device_type(DeviceInfo("mobile", "Android", "Chrome Mobile"), True) == "bot"
    assert device_type(DeviceInfo("mobile", "Android", "Chrome Mobile"), False) == "mobile"
