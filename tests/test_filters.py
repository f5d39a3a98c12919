"""Stream filters: every filter IS and IS NOT, unknown values, AND/OR, the text syntax, JSON specs, times in
the campaign's timezone, traces, errors and Accept-Language parsing."""

from __future__ import annotations

import datetime
import ipaddress
import json
import random
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import models.routing.filters
from models.routing.filters import (
    FILTER_NAMES,
    MAX_LANGUAGES,
    FilterError,
    FilterSubject,
    compile_filters,
    describe_filter,
    parse_accept_language,
    parse_filter,
    validate_filters,
)

UTC = ZoneInfo("UTC")
NEW_YORK = ZoneInfo("America/New_York")
STREAM_ID = 7


def at(text: str, tz: ZoneInfo = NEW_YORK) -> float:
    """Unix seconds of a wall-clock time in `tz` (first occurrence if it repeats)."""
    return datetime.datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()


def subject(**changes: Any) -> FilterSubject:
    """A known desktop Chrome visitor from New York; `changes` override fields."""
    fields: dict[str, Any] = {
        "ip": "203.0.113.7",
        "user_agent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0",
        "referrer": "https://www.google.com/search?q=shoes",
        "keyword": "shoes",
        "params": {"utm_source": "fb", "keyword": "shoes"},
        "sub_ids": [""] * 30,
        "languages": ("en", "de"),
        "country": "US",
        "region": "New York",
        "city": "New York",
        "device_type": "desktop",
        "os": "Windows",
        "browser": "Chrome",
        "is_bot": False,
        "now": at("2026-07-06 12:00"),  # a Monday
        "is_unique_campaign": True,
        "seen_in_stream": lambda stream_id: False,
    }
    fields.update(changes)
    return FilterSubject(**fields)


def passes(expression: str, tz: ZoneInfo = NEW_YORK, stream_id: int = STREAM_ID, **changes: Any) -> bool:
    return compile_filters([parse_filter(expression)], "and", tz).matches(subject(**changes), stream_id)


# --- value lists and the `unknown` literal -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "changes", "expected"),
    [
        ("country=US,GB", {"country": "US"}, True),
        ("country=US,GB", {"country": "GB"}, True),
        ("country=US,GB", {"country": "DE"}, False),
        ("country=US,GB", {"country": ""}, False),
        ("country=us", {"country": "US"}, True),
        ("country!=US", {"country": "US"}, False),
        ("country!=US", {"country": "DE"}, True),
        ("country!=US", {"country": ""}, True),
        ("country=unknown,DE", {"country": ""}, True),
        ("country=unknown,DE", {"country": "DE"}, True),
        ("country=unknown,DE", {"country": "US"}, False),
        ("country!=unknown", {"country": ""}, False),
        ("country!=unknown", {"country": "US"}, True),
        ("region=california", {"region": "California"}, True),
        ("region=California", {"region": "Nevada"}, False),
        ("region=California", {"region": ""}, False),
        ("region=unknown", {"region": ""}, True),
        ("region!=California", {"region": ""}, True),
        ('city=London,"New York"', {"city": "new york"}, True),
        ('city=London,"New York"', {"city": "York"}, False),
        ('city=London,"New York"', {"city": ""}, False),
        ("city!=London", {"city": ""}, True),
        ("city=unknown", {"city": ""}, True),
        ("city=unknown", {"city": "London"}, False),
        ("device=mobile,tablet", {"device_type": "mobile"}, True),
        ("device=mobile,tablet", {"device_type": "desktop"}, False),
        ("device=mobile,tablet", {"device_type": "unknown"}, False),
        ("device=mobile,tablet", {"device_type": ""}, False),
        ("device!=desktop", {"device_type": "desktop"}, False),
        ("device!=desktop", {"device_type": "mobile"}, True),
        ("device!=desktop", {"device_type": "unknown"}, True),
        ("device=unknown", {"device_type": "unknown"}, True),
        ("device=unknown", {"device_type": ""}, True),
        ("device=unknown", {"device_type": "tv"}, False),
        ("device=BOT", {"device_type": "bot"}, True),
        ("os=iOS,Android", {"os": "iOS"}, True),
        ("os=ios", {"os": "iOS"}, True),
        ("os=iOS", {"os": "Mac OS X"}, False),
        ("os=iOS", {"os": ""}, False),
        ("os!=iOS", {"os": ""}, True),
        ("os=unknown", {"os": ""}, True),
        ("browser=Chrome,Mobile Safari", {"browser": "Mobile Safari"}, True),
        ("browser=Chrome,Mobile Safari", {"browser": "Safari"}, False),
        ("browser=Chrome", {"browser": ""}, False),
        ("browser!=Chrome", {"browser": ""}, True),
        ("browser=unknown", {"browser": ""}, True),
        ("browser=unknown", {"browser": "Chrome"}, False),
    ],
)
def test_value_list_filters(expression: str, changes: dict, expected: bool) -> None:
    assert passes(expression, **changes) is expected


@pytest.mark.parametrize(
    ("expression", "languages", "expected"),
    [
        ("language=en,de", ("de", "en"), True),
        ("language=en", ("en",), True),
        # Only the first, preferred language counts: a French speaker who also accepts English is French.
        ("language=en", ("fr", "en"), False),
        ("language!=en", ("fr", "en"), True),
        ("language=en", (), False),
        ("language!=en", (), True),
        ("language=unknown", (), True),
        ("language=unknown", ("en",), False),
        ("language!=unknown", (), False),
        ("language=EN", ("en",), True),
    ],
)
def test_language_looks_at_the_first_language(expression: str, languages: tuple, expected: bool) -> None:
    assert passes(expression, languages=languages) is expected


# --- ip ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "expected"),
    [
        ("10.0.0.0", True),
        ("10.255.255.255", True),
        ("9.255.255.255", False),
        ("11.0.0.0", False),
        ("192.168.1.1", True),
        ("192.168.1.2", False),
        ("2001:db8::", True),
        ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", True),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", True),
        ("2001:db9::1", False),
        ("2001:db7:ffff::1", False),
        ("::ffff:10.1.2.3", True),
        ("::ffff:11.1.2.3", False),
        ("::1", False),
        ("", False),
        ("garbage", False),
        ("10.0.0", False),
        ("10.0.0.1\x00", False),
        ("10.0.0.1 ", False),
        ("١٠.0.0.1", False),
    ],
)
def test_ip_filter_matches_v4_and_v6_networks(ip: str, expected: bool) -> None:
    expression = "ip=10.0.0.0/8,192.168.1.1,2001:db8::/32"
    assert passes(expression, ip=ip) is expected
    # IS NOT is the exact opposite, including for addresses that cannot be read.
    assert passes(expression.replace("=", "!=", 1), ip=ip) is not expected


def test_ip_filter_agrees_with_ipaddress_on_overlapping_and_adjacent_networks() -> None:
    rng = random.Random(20261201)
    networks = [
        "10.0.0.0/9",
        "10.128.0.0/9",
        "10.0.0.0/16",
        "172.16.5.0/24",
        "172.16.6.0/23",
        "100.64.0.0/10",
    ]
    networks += [f"198.51.{n}.0/24" for n in range(0, 256, 3)]
    networks += ["2001:db8::/48", "2001:db8:0:1::/64", "fd00::/8", "2a00:1450::/29"]
    parsed = [ipaddress.ip_network(network) for network in networks]
    filters = compile_filters([parse_filter("ip=" + ",".join(networks))], "and", UTC)
    samples = [str(ipaddress.ip_address(rng.getrandbits(32))) for _ in range(2000)]
    samples += [str(network.network_address + offset) for network in parsed for offset in (0, 1)]
    samples += [str(network.broadcast_address + delta) for network in parsed for delta in (0, 1)]
    samples += [str(ipaddress.IPv6Address(0x20010DB8 << 96 | rng.getrandbits(64))) for _ in range(500)]
    hits = 0
    for text in samples:
        address = ipaddress.ip_address(text)
        expected = any(address in network for network in parsed)
        hits += expected
        assert filters.matches(subject(ip=text), STREAM_ID) is expected, text
    assert 100 < hits < len(samples) - 100  # the sample exercises both answers


# --- text filters ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "changes", "expected"),
    [
        ("referrer~google", {"referrer": "https://www.GOOGLE.com/"}, True),
        ("referrer~google,bing", {"referrer": "https://bing.com/"}, True),
        ("referrer~google", {"referrer": "https://duckduckgo.com/"}, False),
        ("referrer~google", {"referrer": ""}, False),
        ("referrer!~google", {"referrer": ""}, True),
        ("referrer!~google", {"referrer": "https://google.com/"}, False),
        ("referrer=", {"referrer": ""}, True),
        ("referrer=", {"referrer": "https://a.example/"}, False),
        ("referrer!=", {"referrer": ""}, False),
        ("referrer!=", {"referrer": "https://a.example/"}, True),
        ("referrer=https://a.example/", {"referrer": "HTTPS://A.EXAMPLE/"}, True),
        ("referrer=https://a.example/", {"referrer": "https://a.example/x"}, False),
        ("referrer~/fb|ig/", {"referrer": "https://m.FB.com/"}, True),
        ("referrer~/fb|ig/", {"referrer": "https://x.com/"}, False),
        ("referrer~/fb|ig/", {"referrer": ""}, False),
        ("referrer!~/fb|ig/", {"referrer": ""}, True),
        ("referrer!~/fb|ig/", {"referrer": "https://ig.me/x"}, False),
        ('referrer~"/promo/"', {"referrer": "https://a.example/promo/x"}, True),
        ('referrer~"/promo/"', {"referrer": "https://a.example/promotion"}, False),
        ("keyword=shoes,boots", {"keyword": "Boots"}, True),
        ("keyword=shoes,boots", {"keyword": "shoe"}, False),
        ("keyword=shoes", {"keyword": ""}, False),
        ("keyword!=shoes", {"keyword": ""}, True),
        ("keyword~sho", {"keyword": "running SHOES"}, True),
        ("keyword=", {"keyword": ""}, True),
        ("keyword=", {"keyword": "x"}, False),
        ("keyword~/^sh/", {"keyword": "shoes"}, True),
        ("keyword~/^sh/", {"keyword": "fresh"}, False),
        ('keyword=" red "', {"keyword": " red "}, True),
        ('keyword=" red "', {"keyword": "red"}, False),
        ("param.utm_source=fb", {"params": {"utm_source": "FB"}}, True),
        ("param.utm_source=fb", {"params": {"utm_source": "fbx"}}, False),
        ("param.utm_source=fb", {"params": {}}, False),
        ("param.utm_source!=fb", {"params": {}}, True),
        ("param.UTM_SOURCE=fb", {"params": {"utm_source": "fb"}}, False),
        ("param.utm_source=", {"params": {}}, True),
        ("param.utm_source=", {"params": {"utm_source": ""}}, True),
        ("param.utm_source!=", {"params": {}}, False),
        ("param.utm_source~/^f/", {"params": {"utm_source": "fb"}}, True),
        ("param.a.b~x", {"params": {"a.b": "xyz"}}, True),
        ("sub_id_3=x", {"sub_ids": ["", "", "X"]}, True),
        ("sub_id_3=x", {"sub_ids": ["x", "", ""]}, False),
        ("sub_id_3=x", {"sub_ids": []}, False),
        ("sub_id_30=", {"sub_ids": ["a"]}, True),
        ("sub_id_30!=", {"sub_ids": [""] * 29 + ["z"]}, True),
        ("sub_id_1~promo", {"sub_ids": ["summer-promo"]}, True),
        ("user_agent~/bot|spider/", {"user_agent": "Googlebot/2.1"}, True),
        ("user_agent~/bot|spider/", {"user_agent": "Mozilla/5.0"}, False),
        ("user_agent!~/bot|spider/", {"user_agent": "Baiduspider"}, False),
        ("user_agent~iphone", {"user_agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0)"}, True),
        ("user_agent=", {"user_agent": ""}, True),
    ],
)
def test_text_filters(expression: str, changes: dict, expected: bool) -> None:
    assert passes(expression, **changes) is expected


def test_keyword_filter_reads_the_keyword_field_not_the_params() -> None:
    assert passes("keyword=shoes", keyword="shoes", params={}) is True
    assert passes("keyword=shoes", keyword="", params={"keyword": "shoes"}) is False


# --- schedule and date in the campaign's timezone ----------------------------------------------------------


@pytest.mark.parametrize(
    ("local_time", "expected"),
    [
        ("2026-07-06 09:00", True),  # Monday
        ("2026-07-06 08:59", False),
        ("2026-07-06 17:59", True),
        ("2026-07-06 18:00", False),
        ("2026-07-10 12:00", True),  # Friday
        ("2026-07-11 12:00", False),  # Saturday
        ("2026-07-12 12:00", False),  # Sunday
    ],
)
def test_schedule_weekdays_and_hours_in_campaign_timezone(local_time: str, expected: bool) -> None:
    assert passes("schedule=mon-fri 09:00-18:00", now=at(local_time)) is expected
    assert passes("schedule!=mon-fri 09:00-18:00", now=at(local_time)) is not expected


def test_schedule_uses_the_campaign_timezone_not_utc() -> None:
    monday_10_utc = at("2026-07-06 10:00", UTC)  # 06:00 in New York
    assert passes("schedule=09:00-18:00", tz=NEW_YORK, now=monday_10_utc) is False
    assert passes("schedule=09:00-18:00", tz=UTC, now=monday_10_utc) is True
    monday_23_new_york = at("2026-07-06 23:00")  # already Tuesday in UTC
    assert passes("schedule=mon", tz=NEW_YORK, now=monday_23_new_york) is True
    assert passes("schedule=mon", tz=UTC, now=monday_23_new_york) is False


@pytest.mark.parametrize(
    ("local_time", "expected"),
    [
        ("2026-07-10 21:59", False),  # Friday
        ("2026-07-10 22:00", True),
        ("2026-07-10 23:59", True),
        ("2026-07-11 00:00", True),  # Saturday, still Friday night
        ("2026-07-11 05:59", True),
        ("2026-07-11 06:00", False),
        ("2026-07-10 05:00", False),  # Friday morning belongs to Thursday night
        ("2026-07-11 22:30", False),  # Saturday night
    ],
)
def test_schedule_interval_wrapping_midnight_belongs_to_the_day_it_starts(
    local_time: str, expected: bool
) -> None:
    assert passes("schedule=fri 22:00-06:00", now=at(local_time)) is expected


@pytest.mark.parametrize(
    ("local_time", "expected"),
    [
        ("2026-07-06 23:00", True),
        ("2026-07-07 03:00", True),
        ("2026-07-07 06:00", False),
        ("2026-07-07 12:00", False),
    ],
)
def test_schedule_wrapping_interval_without_days(local_time: str, expected: bool) -> None:
    assert passes("schedule=22:00-06:00", now=at(local_time)) is expected


def test_schedule_days_only_and_all_day_hours() -> None:
    assert passes("schedule=sat,sun", now=at("2026-07-11 03:00")) is True
    assert passes("schedule=sat,sun", now=at("2026-07-13 03:00")) is False
    assert passes("schedule=fri-mon", now=at("2026-07-13 03:00")) is True  # a range wrapping the week
    assert passes("schedule=fri-mon", now=at("2026-07-14 03:00")) is False
    assert passes("schedule=mon 00:00-24:00", now=at("2026-07-06 23:59")) is True


def test_schedule_follows_dst_changes_in_one_compiled_filter() -> None:
    # 2026-03-08: New York jumps from 02:00 EST to 03:00 EDT (07:00 UTC). One filter is evaluated across
    # the change in order, as a worker would, so a stale cached offset would show.
    spring = compile_filters([parse_filter("schedule=sun 03:00-04:00")], "and", NEW_YORK)
    steps = [
        ("2026-03-08 06:59", False),  # 01:59 EST
        ("2026-03-08 07:00", True),  # 03:00 EDT
        ("2026-03-08 07:59", True),  # 03:59 EDT
        ("2026-03-08 08:00", False),  # 04:00 EDT; without DST this would be 03:00
    ]
    for utc_time, expected in steps:
        assert spring.matches(subject(now=at(utc_time, UTC)), STREAM_ID) is expected, utc_time

    # 2026-11-01: back from 02:00 EDT to 01:00 EST (06:00 UTC); 01:xx happens twice.
    autumn = compile_filters([parse_filter("schedule=sun 01:00-02:00")], "and", NEW_YORK)
    steps = [
        ("2026-11-01 04:59", False),  # 00:59 EDT
        ("2026-11-01 05:30", True),  # 01:30 EDT
        ("2026-11-01 06:30", True),  # 01:30 EST
        ("2026-11-01 07:00", False),  # 02:00 EST
        ("2026-11-02 01:00", False),  # 20:00 EST Sunday, outside the hours
    ]
    for utc_time, expected in steps:
        assert autumn.matches(subject(now=at(utc_time, UTC)), STREAM_ID) is expected, utc_time
    trace: list = []
    autumn.matches(subject(now=at("2026-11-01 06:30", UTC)), STREAM_ID, trace)
    assert trace[0][2] == "01:30 Sun"


@pytest.mark.parametrize(
    ("expression", "local_time", "expected"),
    [
        ("date=2026-12-01..2026-12-31", "2026-11-30 23:59:59", False),
        ("date=2026-12-01..2026-12-31", "2026-12-01 00:00:00", True),
        ("date=2026-12-01..2026-12-31", "2026-12-31 23:59:59", True),
        ("date=2026-12-01..2026-12-31", "2027-01-01 00:00:00", False),
        ("date!=2026-12-01..2026-12-31", "2026-12-15 12:00:00", False),
        ("date!=2026-12-01..2026-12-31", "2027-01-01 00:00:00", True),
        ("date=2026-12-01..", "2031-06-01 00:00:00", True),
        ("date=2026-12-01..", "2026-11-30 23:59:59", False),
        ("date=..2026-12-31", "2020-01-01 00:00:00", True),
        ("date=..2026-12-31", "2027-01-01 00:00:00", False),
        ("date=2026-12-25", "2026-12-25 23:59:59", True),
        ("date=2026-12-25", "2026-12-26 00:00:00", False),
    ],
)
def test_date_range_is_inclusive_in_campaign_timezone(
    expression: str, local_time: str, expected: bool
) -> None:
    assert passes(expression, now=at(local_time)) is expected


def test_date_range_uses_the_campaign_timezone() -> None:
    # 03:00 UTC on 1 December is still 30 November in New York.
    now = at("2026-12-01 03:00", UTC)
    assert passes("date=2026-12-01..", tz=NEW_YORK, now=now) is False
    assert passes("date=2026-12-01..", tz=UTC, now=now) is True


def test_date_on_a_dst_day_covers_the_23_local_hours() -> None:
    # 2026-03-08 in New York runs from 05:00 UTC (EST) to 04:00 UTC the next day (EDT).
    assert passes("date=2026-03-08", now=at("2026-03-08 04:59:59", UTC)) is False
    assert passes("date=2026-03-08", now=at("2026-03-08 05:00", UTC)) is True
    assert passes("date=2026-03-08", now=at("2026-03-09 03:59:59", UTC)) is True
    assert passes("date=2026-03-08", now=at("2026-03-09 04:00", UTC)) is False


# --- unique and bot ----------------------------------------------------------------------------------------


def test_unique_campaign_reads_the_campaign_flag() -> None:
    assert passes("unique=campaign", is_unique_campaign=True) is True
    assert passes("unique=campaign", is_unique_campaign=False) is False
    assert passes("unique!=campaign", is_unique_campaign=False) is True


def test_unique_stream_asks_about_the_stream_being_evaluated() -> None:
    asked: list[int] = []

    def seen_in_stream(stream_id: int) -> bool:
        asked.append(stream_id)
        return stream_id == 7

    assert passes("unique=stream", stream_id=7, seen_in_stream=seen_in_stream) is False
    assert passes("unique=stream", stream_id=8, seen_in_stream=seen_in_stream) is True
    assert passes("unique!=stream", stream_id=7, seen_in_stream=seen_in_stream) is True
    assert asked == [7, 8, 7]


@pytest.mark.parametrize(
    ("expression", "is_bot", "expected"),
    [
        ("bot=yes", True, True),
        ("bot=yes", False, False),
        ("bot=no", True, False),
        ("bot=no", False, True),
        ("bot!=yes", False, True),
        ("bot!=no", True, True),
    ],
)
def test_bot_filter(expression: str, is_bot: bool, expected: bool) -> None:
    assert passes(expression, is_bot=is_bot) is expected


# --- AND / OR ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "country", "device", "expected"),
    [
        ("and", "US", "mobile", True),
        ("and", "US", "desktop", False),
        ("and", "DE", "mobile", False),
        ("or", "US", "desktop", True),
        ("or", "DE", "mobile", True),
        ("or", "DE", "desktop", False),
    ],
)
def test_and_or_modes(mode: str, country: str, device: str, expected: bool) -> None:
    filters = compile_filters([parse_filter("country=US"), parse_filter("device=mobile")], mode, UTC)
    assert filters.matches(subject(country=country, device_type=device), STREAM_ID) is expected
    assert filters.matches(subject(country=country, device_type=device), STREAM_ID, []) is expected


@pytest.mark.parametrize("mode", ["and", "or"])
def test_empty_filter_list_matches_everything_in_both_modes(mode: str) -> None:
    filters = compile_filters([], mode, UTC)
    trace: list = []
    assert len(filters) == 0
    assert filters.matches(subject(), STREAM_ID) is True
    assert filters.matches(subject(), STREAM_ID, trace) is True
    assert trace == []


def explode(stream_id: int) -> bool:
    raise AssertionError("seen_in_stream was called although the verdict was already known")


@pytest.mark.parametrize(
    ("mode", "first"),
    [("and", "country=DE"), ("or", "country=US")],
)
def test_evaluation_stops_once_the_verdict_is_known(mode: str, first: str) -> None:
    filters = compile_filters([parse_filter(first), parse_filter("unique=stream")], mode, UTC)
    assert filters.matches(subject(seen_in_stream=explode), STREAM_ID) is (mode == "or")


def test_trace_evaluates_every_filter_and_returns_the_same_verdict() -> None:
    asked: list[int] = []
    specs = [parse_filter("country=US"), parse_filter("unique=stream")]
    for mode in ("and", "or"):
        filters = compile_filters(specs, mode, UTC)
        visitor = subject(
            country="DE" if mode == "and" else "US", seen_in_stream=lambda s: asked.append(s) or False
        )
        trace: list = []
        verdict = filters.matches(visitor, STREAM_ID, trace)
        assert verdict is filters.matches(visitor, STREAM_ID) is (mode == "or")
        assert [row[0] for row in trace] == ["country=US", "unique=stream"]
    assert asked == [STREAM_ID, STREAM_ID]  # once per traced run, never in the short-circuited ones


def test_trace_lists_description_verdict_and_seen_value() -> None:
    specs = [
        parse_filter(text)
        for text in (
            "country=US,GB",
            "language=en",
            "schedule=mon-fri 09:00-18:00",
            "ip=10.0.0.0/8",
            "referrer=",
            "keyword~shoe",
            "unique=stream",
            "unique!=campaign",
            "bot=no",
            "date=2026-07-01..2026-07-31",
            "device=mobile",
            "city!=unknown",
        )
    ]
    visitor = subject(
        country="",
        languages=("de", "en"),
        now=at("2026-07-11 22:15"),  # Saturday in New York, Sunday 02:15 UTC
        ip="10.1.2.3",
        referrer="",
        keyword="Red Shoes",
        is_unique_campaign=True,
        device_type="unknown",
        city="",
    )
    expected = [
        ("country=US,GB", False, "unknown"),
        ("language=en", False, "de,en"),
        ("schedule=mon-fri 09:00-18:00", False, "22:15 Sat"),
        ("ip=10.0.0.0/8", True, "10.1.2.3"),
        ("referrer=", True, "(empty)"),
        ("keyword~shoe", True, "Red Shoes"),
        ("unique=stream", True, "unique"),
        ("unique!=campaign", False, "unique"),
        ("bot=no", True, "no"),
        ("date=2026-07-01..2026-07-31", True, "2026-07-11 22:15"),
        ("device=mobile", False, "unknown"),
        ("city!=unknown", False, "unknown"),
    ]
    for mode, verdict in (("and", False), ("or", True)):
        trace: list = []
        assert compile_filters(specs, mode, NEW_YORK).matches(visitor, STREAM_ID, trace) is verdict
        assert trace == expected


def test_trace_shortens_long_text_values() -> None:
    trace: list = []
    compile_filters([parse_filter("user_agent~x")], "and", UTC).matches(
        subject(user_agent="a" * 5000), 1, trace
    )
    assert len(trace[0][2]) == 200


def test_verdict_with_trace_always_equals_verdict_without() -> None:
    rng = random.Random(7)
    pool = [
        "country=US,GB",
        "country!=unknown",
        "device=mobile",
        "language=en",
        "ip=10.0.0.0/8",
        "referrer~google",
        "keyword=",
        "bot=no",
        "unique=campaign",
    ]
    for _ in range(300):
        specs = [parse_filter(text) for text in rng.sample(pool, rng.randint(0, 5))]
        visitor = subject(
            country=rng.choice(["US", "DE", ""]),
            device_type=rng.choice(["mobile", "desktop", "unknown"]),
            languages=rng.choice([(), ("en",), ("de", "en")]),
            ip=rng.choice(["10.0.0.1", "8.8.8.8", ""]),
            referrer=rng.choice(["", "https://google.com/"]),
            keyword=rng.choice(["", "x"]),
            is_bot=rng.random() < 0.5,
            is_unique_campaign=rng.random() < 0.5,
        )
        for mode in ("and", "or"):
            filters = compile_filters(specs, mode, UTC)
            trace: list = []
            verdict = filters.matches(visitor, STREAM_ID, trace)
            assert verdict is filters.matches(visitor, STREAM_ID)
            assert len(trace) == len(specs)
            passed = [row[1] for row in trace]
            assert verdict is (all(passed) if mode == "and" else (any(passed) or not specs))


def test_names_and_len_report_what_the_stream_uses() -> None:
    filters = compile_filters(
        [parse_filter("country=US"), parse_filter("country!=GB"), parse_filter("param.a=b")], "and", UTC
    )
    assert filters.names == frozenset({"country", "param"})
    assert len(filters) == 3


def test_compile_does_not_change_the_given_specs() -> None:
    specs = [{"name": "country", "values": [" us "]}]
    compile_filters(specs, "and", UTC)
    assert specs == [{"name": "country", "values": [" us "]}]


# --- text syntax and JSON ----------------------------------------------------------------------------------

ROUND_TRIPS = [
    # (as typed, as described)
    ("country=US,GB", "country=US,GB"),
    ("country!=us", "country!=US"),
    ("Country = US , gb", "country=US,GB"),
    ("country=US,us,Unknown", "country=US,unknown"),
    ('city=London,"New York"', "city=London,New York"),
    ('city="Washington, D.C."', 'city="Washington, D.C."'),
    ("region=unknown", "region=unknown"),
    ("device=mobile,Tablet", "device=mobile,tablet"),
    ("device!=desktop", "device!=desktop"),
    ("os=iOS", "os=iOS"),
    ("browser=Chrome,Mobile Safari", "browser=Chrome,Mobile Safari"),
    ("language=en,DE", "language=en,de"),
    ("ip=10.0.0.0/8,2001:DB8::/32", "ip=10.0.0.0/8,2001:db8::/32"),
    ("ip!=192.0.2.1,192.0.2.1/32,10.0.0.0/255.0.0.0", "ip!=192.0.2.1,10.0.0.0/8"),
    ("referrer~google", "referrer~google"),
    ("referrer!~google,bing", "referrer!~google,bing"),
    ("referrer=", "referrer="),
    ("referrer!=", "referrer!="),
    ("referrer=https://a.example/", 'referrer="https://a.example/"'),
    ("referrer~/fb|ig/", "referrer~/fb|ig/"),
    ("referrer!~/a/b,c{1,3}/", "referrer!~/a/b,c{1,3}/"),
    ('referrer~"/promo/",x', 'referrer~"/promo/",x'),
    ("keyword=shoes,Shoes,boots", "keyword=shoes,boots"),
    ("keyword~sho", "keyword~sho"),
    ("keyword=", "keyword="),
    ('keyword=" a,b ","say ""hi"""', 'keyword=" a,b ","say ""hi"""'),
    ("keyword==x", "keyword==x"),
    ("keyword!=~x", "keyword!=~x"),
    ("param.utm_source=fb", "param.utm_source=fb"),
    ("param.utm_source!~/^f/", "param.utm_source!~/^f/"),
    ("param.a[b]=", "param.a[b]="),
    ("sub_id_3=x", "sub_id_3=x"),
    ("SUB_ID_30!=", "sub_id_30!="),
    ("user_agent~/bot|spider/", "user_agent~/bot|spider/"),
    ("user_agent~iphone", "user_agent~iphone"),
    ("schedule=mon-fri 09:00-18:00", "schedule=mon-fri 09:00-18:00"),
    ("schedule=sat,sun", "schedule=sat,sun"),
    ("schedule=09:00-18:00", "schedule=09:00-18:00"),
    ("schedule=mon,wed", "schedule=mon,wed"),
    ("schedule!=Monday , Tuesday 9:30 - 17:00", "schedule!=mon,tue 09:30-17:00"),
    ("schedule=22:00-06:00 fri-mon", "schedule=mon,fri-sun 22:00-06:00"),
    ("schedule=mon-sun 00:00-24:00", "schedule=mon-sun 00:00-24:00"),
    ("date=2026-12-01..2026-12-31", "date=2026-12-01..2026-12-31"),
    ("date=2026-12-01..", "date=2026-12-01.."),
    ("date=..2026-12-31", "date=..2026-12-31"),
    ("date=2026-12-25", "date=2026-12-25"),
    ("date!=2026-12-25..2026-12-25", "date!=2026-12-25"),
    ("unique=campaign", "unique=campaign"),
    ("unique!=stream", "unique!=stream"),
    ("bot=yes", "bot=yes"),
    ("bot=no", "bot=no"),
    ("bot!=yes", "bot=no"),
    ("bot!=no", "bot=yes"),
    ("bot=YES", "bot=yes"),
    ('isp = "Comcast Cable Communications, LLC"', 'isp="Comcast Cable Communications, LLC"'),
    ("isp~comcast", "isp~comcast"),
    ("isp=", "isp="),
    ("carrier!~/vodafone|o2/", "carrier!~/vodafone|o2/"),
    ("connection=Cellular,unknown", "connection=Cellular,unknown"),
]


@pytest.mark.parametrize(("typed", "described"), ROUND_TRIPS)
def test_text_syntax_round_trips(typed: str, described: str) -> None:
    spec = parse_filter(typed)
    assert describe_filter(spec) == described
    assert parse_filter(described) == spec
    assert json.loads(json.dumps(spec)) == spec
    assert validate_filters([spec]) == [spec]


def test_round_trip_every_filter_name() -> None:
    covered = {parse_filter(typed)["name"] for typed, _described in ROUND_TRIPS}
    assert covered == set(FILTER_NAMES)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("country=us,GB", {"name": "country", "negate": False, "values": ["US", "GB"]}),
        ("ip!=10.0.0.0/8", {"name": "ip", "negate": True, "values": ["10.0.0.0/8"]}),
        ("referrer~google", {"name": "referrer", "negate": False, "match": "contains", "values": ["google"]}),
        ("referrer!=", {"name": "referrer", "negate": True, "match": "empty"}),
        ("keyword~/a|b/", {"name": "keyword", "negate": False, "match": "regex", "pattern": "a|b"}),
        (
            "param.utm_source=fb",
            {"name": "param", "negate": False, "param": "utm_source", "match": "exact", "values": ["fb"]},
        ),
        ("sub_id_3=x", {"name": "sub_id", "negate": False, "slot": 3, "match": "exact", "values": ["x"]}),
        (
            "schedule=mon-wed 09:00-18:00",
            {
                "name": "schedule",
                "negate": False,
                "days": ["mon", "tue", "wed"],
                "start": "09:00",
                "end": "18:00",
            },
        ),
        ("schedule=sun", {"name": "schedule", "negate": False, "days": ["sun"], "start": None, "end": None}),
        ("date=2026-12-01..", {"name": "date", "negate": False, "start": "2026-12-01", "end": None}),
        ("unique=stream", {"name": "unique", "negate": False, "scope": "stream"}),
        ("bot=no", {"name": "bot", "negate": True}),
    ],
)
def test_specs_have_the_documented_json_shape(text: str, spec: dict) -> None:
    assert parse_filter(text) == spec


def test_validate_filters_normalises_hand_written_json() -> None:
    stored = json.dumps(
        [
            {"name": "country", "values": [" us ", "US", "gb"]},
            {"name": "keyword", "negate": True, "match": "exact", "values": ["A", "a", "b"]},
            {"name": "schedule", "days": ["FRI", "mon", "fri"], "start": "9:00", "end": "18:00"},
        ]
    )
    assert validate_filters(json.loads(stored)) == [
        {"name": "country", "negate": False, "values": ["US", "GB"]},
        {"name": "keyword", "negate": True, "match": "exact", "values": ["A", "b"]},
        {"name": "schedule", "negate": False, "days": ["mon", "fri"], "start": "09:00", "end": "18:00"},
    ]


# --- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("contry=US", "Unknown filter 'contry'; known filters are bot, browser, carrier, city"),
        ("sub_id=x", "Unknown filter 'sub_id'"),
        ("country US", "is not of the form name=value"),
        ("", "is not of the form name=value"),
        ("=US", "is not of the form name=value"),
        ("param.a b=1", "is not of the form name=value"),
        ("country~US", "The country filter takes = or !=, not ~"),
        ("bot~yes", "The bot filter takes = or !=, not ~"),
        ("country.x=US", "Only param filters take a dotted name"),
        ("country=", "The country filter needs at least one value, as in country=US,GB."),
        ("device!=", "The device filter needs at least one value"),
        ("country=USA", "Country 'USA' is not a two-letter ISO code"),
        ("device=phone", "Device 'phone' is not one of desktop, mobile"),
        ("language=en-US", "Language 'en-US' is not a primary language code"),
        ("country=US,,GB", "The country filter has an empty value in its list"),
        ("keyword=a,", "The keyword filter has an empty value in its list"),
        ('keyword=""', "The keyword filter has an empty value in its list"),
        ('city="London', "The city filter has a double quote that is never closed."),
        ('city="New" York', "The city filter has text after a closing quote"),
        ('city=New "York"', "The city filter has a double quote inside a value"),
        ("ip=", "The ip filter needs at least one address or network, as in ip=10.0.0.0/8"),
        ("ip=10.0.0.300", "'10.0.0.300' is not an IP address or CIDR network"),
        ("ip=10.0.0.0/33", "'10.0.0.0/33' is not an IP address or CIDR network"),
        ("ip=2001:db8::/129", "'2001:db8::/129' is not an IP address or CIDR network"),
        ("ip=unknown", "'unknown' is not an IP address or CIDR network"),
        ("ip=10.1.0.0/8", "IP network '10.1.0.0/8' has host bits set; write 10.0.0.0/8 instead."),
        ("ip=2001:db8::1/32", "write 2001:db8::/32 instead."),
        ("referrer~", "The referrer filter needs a value after ~, as in referrer~promo."),
        ("referrer~//", "The referrer filter needs a regex between slashes"),
        ("referrer~/(/", "The referrer filter's regex '(' is not valid: missing ), unterminated subpattern"),
        ("user_agent~/a{2,1}/", "The user_agent filter's regex 'a{2,1}' is not valid"),
        ("keyword~/" + "a" * 501 + "/", "The keyword filter's regex is longer than 500 characters."),
        ("sub_id_0=x", "names a sub_id slot outside 1 to 30"),
        ("sub_id_31=x", "names a sub_id slot outside 1 to 30"),
        ("param=x", "A param filter needs the parameter name, as in param.utm_source=fb."),
        ("param.=x", "A param filter needs the parameter name"),
        ('param.a"b=x', "The param filter needs a parameter name without spaces, quotes"),
        ("schedule=", "The schedule filter needs weekdays, hours or both"),
        ("schedule=someday", "Schedule weekday 'someday' is not one of mon, tue"),
        ("schedule=mon tue", "takes its weekdays as one comma-separated list"),
        ("schedule=09:00-12:00 13:00-18:00", "The schedule filter takes one hours interval"),
        ("schedule=09:00", "Schedule hours '09:00' need a start and an end"),
        ("schedule=9-18", "Schedule time '9' is not a time from 00:00 to 23:59 in HH:MM form."),
        ("schedule=24:00-06:00", "Schedule time '24:00' is not a time from 00:00 to 23:59"),
        ("schedule=10:00-24:01", "Schedule time '24:01' is not a time from 00:00 to 24:00"),
        ("schedule=10:60-11:00", "Schedule time '10:60' is not a time"),
        ("schedule=09:00-09:00", "start and end at the same time; use 00:00-24:00 for all day."),
        ("date=", "The date filter needs a date range"),
        ("date=..", "The date filter needs a start, an end or both"),
        ("date=2026-02-30", "Date '2026-02-30' is not a calendar date in YYYY-MM-DD form."),
        ("date=26-12-01..", "Date '26-12-01' is not a calendar date"),
        ("date=2026-12-31..2026-12-01", "range 2026-12-31..2026-12-01 ends before it starts."),
        ("unique=global", "The unique filter's scope must be campaign or stream, not 'global'."),
        ("unique=", "The unique filter's scope must be campaign or stream"),
        ("bot=maybe", "The bot filter takes yes or no, not 'maybe'."),
        ("bot=", "The bot filter takes yes or no"),
    ],
)
def test_bad_expressions_are_rejected_with_one_sentence(text: str, message: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(text)
    error = str(caught.value)
    assert message in error
    assert error.endswith(".") and "\n" not in error


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ({"name": "country"}, "Stream filters must be a JSON list of filter objects."),
        (["country=US"], "Filter 1: A filter must be a JSON object with a name"),
        ([{"values": ["US"]}], "Filter 1: Unknown filter None; known filters are country, region"),
        ([{"name": "sub_id_3"}], "Unknown filter 'sub_id_3'"),
        (
            [{"name": "bot"}, {"name": "bot", "negate": "yes"}],
            "Filter 2: The bot filter's negate must be true",
        ),
        (
            [{"name": "country", "value": ["US"]}],
            "The country filter has unknown key(s) value; it takes negate, values.",
        ),
        ([{"name": "bot", "values": ["yes"]}], "The bot filter has unknown key(s) values; it takes negate."),
        ([{"name": "country", "values": "US"}], "The country filter's values must be a list of strings."),
        (
            [{"name": "country", "values": ["US", 1]}],
            "The country filter's values must be a list of strings.",
        ),
        ([{"name": "country", "values": ["  "]}], "The country filter has an empty value in its list."),
        ([{"name": "ip", "values": []}], "The ip filter needs at least one address or network"),
        (
            [{"name": "keyword", "match": "fuzzy", "values": ["a"]}],
            "The keyword filter's match must be one of",
        ),
        ([{"name": "keyword", "values": ["a"]}], "The keyword filter's match must be one of exact"),
        (
            [{"name": "keyword", "match": "exact", "values": []}],
            "The keyword filter needs at least one value",
        ),
        (
            [{"name": "keyword", "match": "exact", "pattern": "a"}],
            "matches exact, so it takes values and no pattern",
        ),
        ([{"name": "keyword", "match": "regex", "values": ["a"]}], "matches a regex, so it takes a pattern"),
        (
            [{"name": "keyword", "match": "regex", "pattern": "("}],
            "The keyword filter's regex '(' is not valid",
        ),
        (
            [{"name": "keyword", "match": "empty", "values": ["a"]}],
            "matches an empty value, so it takes no values",
        ),
        ([{"name": "param", "match": "empty"}], "The param filter needs a parameter name"),
        ([{"name": "param", "param": "a b", "match": "empty"}], "The param filter needs a parameter name"),
        (
            [{"name": "sub_id", "slot": 0, "match": "empty"}],
            "The sub_id filter's slot must be a number from 1 to 30",
        ),
        ([{"name": "sub_id", "slot": True, "match": "empty"}], "The sub_id filter's slot must be a number"),
        ([{"name": "sub_id", "slot": "3", "match": "empty"}], "The sub_id filter's slot must be a number"),
        ([{"name": "schedule", "days": "mon"}], "The schedule filter's days must be a list of weekday names"),
        ([{"name": "schedule", "days": [], "start": "09:00"}], "hours need both a start and an end"),
        ([{"name": "schedule", "days": []}], "The schedule filter needs weekdays, hours or both"),
        ([{"name": "schedule", "start": 900, "end": "18:00"}], "Schedule time 900 is not a time"),
        (
            [{"name": "date", "start": "2026-12-01T00:00", "end": None}],
            "is not a calendar date in YYYY-MM-DD form",
        ),
        ([{"name": "unique"}], "The unique filter's scope must be campaign or stream, not None."),
    ],
)
def test_bad_json_specs_are_rejected_with_one_sentence(specs: Any, message: str) -> None:
    with pytest.raises(FilterError) as caught:
        validate_filters(specs)
    assert message in str(caught.value)
    with pytest.raises(FilterError):
        compile_filters(specs, "and", UTC)


@pytest.mark.parametrize("mode", ["AND", "xor", "", None])
def test_unknown_filter_mode_is_rejected(mode: Any) -> None:
    with pytest.raises(FilterError, match="Filter mode must be 'and' or 'or'"):
        compile_filters([], mode, UTC)


def test_filter_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_filter("nope=1")


# --- Accept-Language ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "languages"),
    [
        ("en-US,en;q=0.9,de;q=0.8", ("en", "de")),
        ("de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7", ("de", "en")),
        ("ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7,uk;q=0.6", ("ru", "en", "uk")),
        ("fr;q=0.5, ru", ("ru", "fr")),
        ("de;q=0.8,fr;q=0.8", ("de", "fr")),
        ("en;q=0, de", ("de",)),
        ("en;q=0.000, de;q=0.001", ("de",)),
        ("*", ()),
        ("*;q=0.5, pt-BR", ("pt",)),
        ("EN-us", ("en",)),
        ("zh-Hant-TW;q=0.9, en_GB", ("en", "zh")),
        ("es-419", ("es",)),
        ("en; q=0.8 ;level=1, de", ("de", "en")),
        ("", ()),
    ],
)
def test_accept_language_real_headers(header: str, languages: tuple) -> None:
    assert parse_accept_language(header) == languages


@pytest.mark.parametrize(
    ("header", "languages"),
    [
        (";;;,,,", ()),
        ("en;q=abc, de", ("de",)),
        ("en;q=2, de;q=0.5", ("de",)),
        ("en;q=1.5", ()),
        ("en;q=nan, fr", ("fr",)),
        ("en;q=-1", ()),
        ("q=0.5", ()),
        ("1234, 5", ()),
        ("e, x-klingon, i-default", ()),
        ("\x00en\xff, ру", ()),
        ("a" * 10_000, ()),
        ("en" + ",xx" * 10_000, ("en", "xx")),
    ],
)
def test_accept_language_garbage_never_raises(header: str, languages: tuple) -> None:
    assert parse_accept_language(header) == languages


def test_accept_language_is_bounded() -> None:
    codes = [a + b for a in "abcdefgh" for b in "xyz"]
    header = ",".join(f"{code};q=0.{index:02d}" for index, code in enumerate(reversed(codes), 10))
    parsed = parse_accept_language(header)
    assert len(parsed) == MAX_LANGUAGES
    assert parsed[0] == codes[0]  # highest q first, even though it came last


def test_accept_language_survives_random_input() -> None:
    rng = random.Random(99)
    alphabet = "enderufr-_;,=q.0123456789* \t\x00é"
    for _ in range(3000):
        header = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        parsed = parse_accept_language(header)
        assert len(parsed) <= MAX_LANGUAGES
        assert len(set(parsed)) == len(parsed)
        assert all(code.isascii() and code.isalpha() and code.islower() for code in parsed)


# --- documentation -----------------------------------------------------------------------------------------


def test_module_docstring_documents_every_filter_and_operator() -> None:
    doc = models.routing.filters.__doc__ or ""
    for name in FILTER_NAMES:
        assert name in doc, name
    for operator in ("!=", "!~", "~/re/", "unknown"):
        assert operator in doc, operator
