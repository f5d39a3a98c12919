"""LANNER_ANONYMIZE_IP: clicks kept with a truncated address; geo, uniqueness and the bot check by IP exact.

Real SQLite files, real trackers (in-process workers and the in-process app), the real flusher.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import click
from mmdb_writer import MMDBWriter
from netaddr import IPSet

from models.admin.services import create_campaign
from models.clicks.privacy import anonymized_ip
from models.clicks.record import (
    LINE_COLUMNS,
    VISITOR_KEY,
    decode_line,
    encode_line,
    line_tail,
    new_subid,
    peek_visitor,
    ua_hash,
    visitor_key,
)
from models.clicks.spool import flush_spool, read_position, segment_path
from models.clicks.visit import Visit
from settings import load_settings

UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
OFFER = "https://offer.example/lp?click={subid}&ip={ip}"


def flush(db, settings):
    return flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)


def stored_clicks(db) -> list[dict]:
    cursor = db.execute_sql(
        "SELECT subid, ip, country, city, visitor_key, ua_hash, is_bot, is_unique_global, is_unique_campaign "
        "FROM click ORDER BY id"
    )
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def journal(settings) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(settings.spool_dir.glob("clicks.*.log")))


@pytest.fixture
def campaign_alias(db):
    create_campaign(db, "Private", "private", offer_url=OFFER)
    return "private"


@pytest.fixture
def geo_file(tmp_path: Path) -> Path:
    """Countries of single addresses and small networks whose /24 (/48) lies elsewhere: a country is right
    only if it was looked up with the full address."""
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoLite2-City", languages=["en"])
    writer.insert_network(
        IPSet(["198.51.100.128/25"]), {"country": {"iso_code": "GB"}, "city": {"names": {"en": "London"}}}
    )
    writer.insert_network(IPSet(["198.51.100.0/25"]), {"country": {"iso_code": "FR"}})
    writer.insert_network(IPSet(["2a02:ff0::/48"]), {"country": {"iso_code": "AT"}})
    writer.insert_network(
        IPSet(["2a02:ff0:0:1::/64"]), {"country": {"iso_code": "DE"}}
    )  # Inserted last: wins.
    path = tmp_path / "city.mmdb"
    writer.to_db_file(str(path))
    return path


@pytest.mark.parametrize(
    ("ip", "kept"),
    [
        ("203.0.113.77", "203.0.113.0"),
        ("10.1.2.255", "10.1.2.0"),
        ("2001:db8:85a3:8d3:1319:8a2e:370:7348", "2001:db8:85a3::"),
        ("2a02:ff0:0:1::5", "2a02:ff0::"),
        ("::1", "::"),
        ("::ffff:198.51.100.200", "::ffff:198.51.100.0"),  # An IPv4 visitor: its /24, not a /48.
    ],
)
def test_anonymized_ip_zeroes_the_last_octet_or_the_last_80_bits(ip, kept):
    assert anonymized_ip(ip) == kept


def test_the_setting_is_on_or_off():
    assert load_settings({}).anonymize_ip is False
    assert load_settings({"LANNER_ANONYMIZE_IP": "on"}).anonymize_ip is True
    with pytest.raises(ValueError, match="LANNER_ANONYMIZE_IP"):
        load_settings({"LANNER_ANONYMIZE_IP": "yes"})


@pytest.mark.parametrize(
    ("ip", "kept", "country"),
    [
        ("198.51.100.200", "198.51.100.0", "GB"),
        ("2a02:ff0:0:1::5", "2a02:ff0::", "DE"),
        ("::ffff:198.51.100.200", "::ffff:198.51.100.0", "GB"),
    ],
)
def test_a_click_is_kept_truncated_with_the_country_of_its_full_address(
    start_app, campaign_alias, db, settings, geo_file, ip, kept, country
):
    app = start_app(LANNER_ANONYMIZE_IP="on", LANNER_GEO_DATABASE=str(geo_file))
    status, headers, _ = click(app, campaign_alias, ip=ip, ua=UA)
    assert status == 302
    # The {ip} macro gives what is kept: the Location is in the journal line, and goes to a third party.
    assert headers["location"].endswith("&ip=" + kept.replace(":", "%3A"))
    assert ip.encode() not in journal(settings)
    flush(db, settings)
    [row] = stored_clicks(db)
    assert (row["ip"], row["country"]) == (kept, country)
    # Keyed by the full address: the stored one would give another key.
    assert row["visitor_key"] == visitor_key(ip, ua_hash(UA)) != visitor_key(kept, ua_hash(UA))


def test_with_the_option_off_the_full_address_is_kept_as_before(
    start_app, campaign_alias, db, settings, geo_file
):
    app = start_app(LANNER_GEO_DATABASE=str(geo_file))
    status, headers, _ = click(app, campaign_alias, ip="198.51.100.200", ua=UA)
    assert status == 302 and headers["location"].endswith("&ip=198.51.100.200")
    [line] = journal(settings).splitlines(keepends=True)
    assert line.count(b"\t") == len(LINE_COLUMNS) - 1  # The line's shape of before: no key in it.
    assert decode_line(line)[VISITOR_KEY] is None
    flush(db, settings)
    [row] = stored_clicks(db)
    assert (row["ip"], row["country"], row["city"]) == ("198.51.100.200", "GB", "London")
    assert row["visitor_key"] == visitor_key("198.51.100.200", ua_hash(UA))


def test_two_visitors_of_one_24_with_the_same_browser_are_both_unique(
    make_tracker, campaign_alias, db, settings, clock
):
    tracker = make_tracker(anonymize_ip=True)
    campaign = tracker.campaign(campaign_alias)
    first = tracker.track(campaign, Visit(ip="203.0.113.7", user_agent=UA))
    second = tracker.track(campaign, Visit(ip="203.0.113.8", user_agent=UA))
    assert not second.is_repeat and second.subid != first.subid
    assert first.is_unique_global and second.is_unique_global and second.is_unique_campaign
    flush(db, settings)
    rows = stored_clicks(db)
    assert [row["ip"] for row in rows] == ["203.0.113.0", "203.0.113.0"]
    assert rows[0]["visitor_key"] != rows[1]["visitor_key"]
    # Another one of the same /24, after both landed: the database probe is by the full address's key.
    clock.advance(60)
    tracker.refresh()
    third = tracker.track(campaign, Visit(ip="203.0.113.9", user_agent=UA))
    assert third.is_unique_global and third.is_unique_campaign


def test_a_returning_visitor_is_not_unique_in_memory_on_another_worker_and_from_the_database(
    make_tracker, campaign_alias, db, settings, clock
):
    one, other = make_tracker(anonymize_ip=True), make_tracker(anonymize_ip=True)
    visit = Visit(ip="2001:db8:85a3:8d3:1319:8a2e:370:7348", user_agent=UA)
    assert one.track(one.campaign(campaign_alias), visit).is_unique_global
    clock.advance(10)  # Past debounce: a new click, not a repeat.
    again = one.track(one.campaign(campaign_alias), visit)
    assert not again.is_repeat and not again.is_unique_global and not again.is_unique_campaign
    # The other worker knows the visitor from the first one's line, which holds only the truncated IP.
    clock.advance(10)
    elsewhere = other.track(other.campaign(campaign_alias), visit)
    assert not elsewhere.is_repeat and not elsewhere.is_unique_global
    flush(db, settings)
    clock.advance(10)
    fresh = make_tracker(anonymize_ip=True)  # Knows the visitor from the database alone.
    later = fresh.track(fresh.campaign(campaign_alias), visit)
    assert not later.is_unique_global and not later.is_unique_campaign
    rows = stored_clicks(db)
    assert {row["ip"] for row in rows} == {"2001:db8:85a3::"}
    assert [row["is_unique_global"] for row in rows] == [1, 0, 0]


def test_a_repeat_within_debounce_on_another_worker_gets_the_same_subid(make_tracker, campaign_alias, clock):
    one, other = make_tracker(anonymize_ip=True), make_tracker(anonymize_ip=True)
    visit = Visit(ip="203.0.113.7", user_agent=UA)
    first = one.track(one.campaign(campaign_alias), visit)
    clock.advance(1)
    repeat = other.track(other.campaign(campaign_alias), visit)
    assert repeat.is_repeat and (repeat.subid, repeat.location) == (first.subid, first.location)
    assert first.location.endswith("&ip=203.0.113.0")


@pytest.mark.parametrize(
    ("listed", "ip", "is_bot"),
    [
        ("198.51.100.77", "198.51.100.77", 1),  # Listed, in the part anonymising zeroes: still a bot.
        ("2001:db8:85a3::1", "2001:db8:85a3::1", 1),
        ("198.51.100.0", "198.51.100.5", 0),  # Its kept address is listed, the visitor is not.
    ],
)
def test_the_bot_check_by_ip_sees_the_full_address(
    start_app, campaign_alias, db, env, lanner, ip, listed, is_bot
):
    app = start_app(LANNER_ANONYMIZE_IP="on", LANNER_BOT_IPS=listed)
    assert click(app, campaign_alias, ip=ip, ua=UA)[0] == 302
    env["LANNER_BOT_IPS"] = listed  # The flusher has the list too: it must not decide again.
    lanner("spool", "flush")
    [row] = stored_clicks(db)
    assert (row["ip"], row["is_bot"]) == (anonymized_ip(ip), is_bot)


def _line(ip: str, created_at: int, key: int | None = None) -> bytes:
    texts = [UA, "", "", "", *[""] * 30, *[""] * 9, "https://offer.example/"]
    tail = line_tail(new_subid(created_at), 1, None, None, 0.0, False, texts)
    return encode_line(ip, ua_hash(UA), created_at, (1, 1, 1), tail, key)


def append_lines(db, spool_dir: Path, *lines: bytes) -> None:
    """Journal lines as another worker writes them, at the flusher's position: the consumer is stopped."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    with open(segment_path(spool_dir, read_position(db, spool_dir)[0]), "ab") as segment:
        segment.write(b"".join(lines))


def test_lines_written_before_the_option_land_beside_anonymised_ones(campaign_alias, db, settings):
    """An upgrade, or the option turned on: the journal holds lines of both shapes."""
    full_key = visitor_key("203.0.113.7", ua_hash(UA))
    old, new = _line("203.0.113.7", 1_800_000_000_000), _line("203.0.113.0", 1_800_000_000_001, full_key)
    append_lines(db, settings.spool_dir, old, new)
    result = flush(db, settings)
    assert (result.inserted, result.rejected) == (2, 0)
    rows = stored_clicks(db)
    assert [(row["ip"], row["visitor_key"]) for row in rows] == [
        ("203.0.113.7", full_key),
        ("203.0.113.0", full_key),
    ]
    assert peek_visitor(old)[0] == peek_visitor(new)[0] == full_key


def test_a_worker_replaying_old_lines_with_the_option_on_knows_their_visitors(
    make_tracker, campaign_alias, db, settings, clock
):
    append_lines(db, settings.spool_dir, _line("203.0.113.7", int(clock() * 1000) - 60_000))
    tracker = make_tracker(anonymize_ip=True)
    decision = tracker.track(tracker.campaign(campaign_alias), Visit(ip="203.0.113.7", user_agent=UA))
    assert not decision.is_unique_global


@pytest.mark.parametrize("key", [b"abc", b"", str(1 << 63).encode(), str(-(1 << 63) - 1).encode(), b"1.5"])
def test_a_line_with_a_broken_visitor_key_is_refused(key):
    line = _line("203.0.113.0", 1_800_000_000_000, 1)
    line = line[: line.rindex(b"\t") + 1] + key + b"\n"
    with pytest.raises(ValueError):
        decode_line(line)  # The flusher moves it to rejected.log.
    if key.lstrip(b"-").isdigit():  # A key out of range; a worker takes a key that is no number for text.
        with pytest.raises(ValueError):
            peek_visitor(line)


def test_a_location_that_is_a_number_is_not_taken_for_a_key():
    texts = [UA, "", "", "", *[""] * 30, *[""] * 9, "12345"]
    line = encode_line(
        "203.0.113.7",
        ua_hash(UA),
        1_800_000_000_000,
        (1, 1, 1),
        line_tail(new_subid(), 1, None, None, 0.0, False, texts),
    )
    assert peek_visitor(line)[0] == visitor_key("203.0.113.7", ua_hash(UA))
    assert decode_line(line)[VISITOR_KEY] is None


def test_anonymize_stored_truncates_earlier_clicks_and_keeps_their_visitors(
    make_tracker, campaign_alias, db, settings, clock, lanner
):
    tracker = make_tracker()  # Before the option was turned on.
    visits = [Visit(ip="203.0.113.7", user_agent=UA), Visit(ip="2001:db8:85a3:8d3::1:2", user_agent=UA)]
    for visit in visits:
        tracker.track(tracker.campaign(campaign_alias), visit)
    flush(db, settings)
    keys = [row["visitor_key"] for row in stored_clicks(db)]
    assert "2 clicks" in lanner("privacy", "anonymize-stored", "--yes").stdout
    rows = stored_clicks(db)
    assert [row["ip"] for row in rows] == ["203.0.113.0", "2001:db8:85a3::"]
    assert [row["visitor_key"] for row in rows] == keys
    assert "0 clicks" in lanner("privacy", "anonymize-stored", "--yes").stdout  # Nothing left to do.
    clock.advance(60)
    now_on = make_tracker(anonymize_ip=True)
    assert not now_on.track(now_on.campaign(campaign_alias), visits[0]).is_unique_global


def test_anonymize_stored_waits_for_the_visitor_keys(campaign_alias, db, settings, lanner):
    db.execute_sql("UPDATE meta SET value = 'ip_ua' WHERE key = 'visitor_probe'")
    result = lanner("privacy", "anonymize-stored", "--yes", check=False)
    assert result.returncode == 1 and "lanner db run-deferred" in result.stderr
