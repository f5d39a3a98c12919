"""Routing in-process: stream order, rotation, caps, binding, actions; real SQLite file, real journal."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from models.admin.services import (
    AdminError,
    add_stream,
    create_campaign,
    create_offer,
    update_campaign,
    update_stream,
)
from models.clicks.spool import flush_spool
from models.clicks.tracker import ClickTracker
from models.clicks.visit import Visit

CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36"
)
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
)


def visit(ip: str = "198.51.100.1", ua: str = CHROME, **fields) -> Visit:
    return Visit(ip=ip, user_agent=ua, **fields)


def offers(db, count: int, **options) -> list[int]:
    return [
        create_offer(db, f"Offer {n}", f"https://o{n}.example/?c={{subid}}", **options).id
        for n in range(count)
    ]


def track(tracker: ClickTracker, alias: str, v: Visit):
    tracker.refresh()  # Pick up config changes made by the test at once.
    return tracker.track(tracker.campaign(alias), v)


def test_intercepting_before_regular_before_fallback(db, make_tracker):
    first, second, third = offers(db, 3)
    create_campaign(db, "Order", "order", offer_id=first)  # Regular stream, position 1.
    fallback = add_stream(db, "order", type="fallback", offers=[(third, 100)])
    intercepting = add_stream(
        db, "order", type="intercepting", offers=[(second, 100)], filters=["param.utm_source=push"]
    )
    tracker = make_tracker()
    assert track(tracker, "order", visit(params={"utm_source": "push"})).stream_id == intercepting.id
    assert track(tracker, "order", visit(ip="198.51.100.2")).offer_id == first
    regular = tracker.campaign("order").regular[0]
    update_stream(db, regular.id, filters=["keyword=shoes"])
    decision = track(tracker, "order", visit(ip="198.51.100.3"))
    assert decision.stream_id == fallback.id and decision.offer_id == third
    # Each stream's first (here only) filter failed; the fallback matched; a 302 answered.
    assert decision.route == f"{intercepting.id}-0 {regular.id}-0 {fallback.id}+ o{third} =h"


def test_no_stream_matches_uses_the_default_action_and_still_records(db, make_tracker, settings):
    (offer,) = offers(db, 1)
    campaign = create_campaign(db, "Default", "dflt", offer_id=offer)
    stream = track(make_tracker(), "dflt", visit()).stream_id
    update_stream(db, stream, filters=["country=DE"])  # No geo database here: country unknown.
    tracker = make_tracker()
    decision = track(tracker, "dflt", visit(ip="198.51.100.9"))
    assert decision.answer == "not_found" and decision.stream_id is None
    update_campaign(db, campaign.id, default_action="blank")
    assert track(tracker, "dflt", visit(ip="198.51.100.10")).answer == "blank"
    update_campaign(
        db, campaign.id, default_action="redirect", default_payload="https://safe.example/?s={subid}"
    )
    decision = track(tracker, "dflt", visit(ip="198.51.100.11"))
    assert decision.answer == "http" and decision.location == f"https://safe.example/?s={decision.subid}"
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    rows = db.connection().execute(
        "SELECT stream_id, route FROM click WHERE campaign_id = ? ORDER BY id", (campaign.id,)
    )
    # The path says where each went: a 404, a blank page, a 302 to the default's origin.
    assert [row for row in rows.fetchall()][1:] == [
        (None, f"{stream}-0 =n"),
        (None, f"{stream}-0 =b"),
        (None, f"{stream}-0 =h @https://safe.example"),
    ]


def test_weight_rotation_only_among_matching_streams(db, make_tracker):
    a, b, c = offers(db, 3)
    create_campaign(db, "Weights", "weights", offer_id=a, rotation="weight")
    mobile = add_stream(db, "weights", offers=[(b, 100)], weight=100, filters=["device=mobile"])
    heavy = add_stream(db, "weights", offers=[(c, 100)], weight=300)
    tracker = make_tracker()
    desktop = Counter(
        track(tracker, "weights", visit(ip=f"10.1.{n // 250}.{n % 250}")).offer_id for n in range(800)
    )
    assert desktop[b] == 0  # The mobile stream never gets a desktop visitor...
    assert 0.65 < desktop[c] / 800 < 0.85  # ...and the others share by weight (300 vs 100).
    phones = Counter(
        track(tracker, "weights", visit(ip=f"10.2.{n // 250}.{n % 250}", ua=IPHONE)).stream_id
        for n in range(500)
    )
    assert phones[mobile.id] > 50 and phones[heavy.id] > 200


def test_unvisited_rotation_sends_a_returning_visitor_to_offers_not_seen_yet(
    db, make_tracker, clock, settings
):
    ids = offers(db, 3)
    create_campaign(db, "Rotate", "rotate", offer_id=ids[0])
    stream = track(make_tracker(), "rotate", visit(ip="192.0.2.200")).stream_id
    update_stream(db, stream, offers=[(i, 100) for i in ids], offer_rotation="unvisited")
    tracker = make_tracker()
    got = []
    for n in range(3):
        clock.advance(5)  # Past the debounce window: a new click each time.
        got.append(track(tracker, "rotate", visit()).offer_id)
        if n == 1:
            flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)  # From the database too.
    assert sorted(got) == sorted(ids)
    clock.advance(5)
    assert track(tracker, "rotate", visit()).offer_id in ids  # All visited: back to weights.


def test_bind_visitor_keeps_stream_and_offer(db, make_tracker, clock):
    ids = offers(db, 4)
    campaign = create_campaign(db, "Bind", "bind", offer_id=ids[0], rotation="weight")
    stream = track(make_tracker(), "bind", visit(ip="192.0.2.201")).stream_id
    update_stream(db, stream, offers=[(i, 100) for i in ids])
    add_stream(db, "bind", offers=[(ids[1], 100)], weight=100)
    update_campaign(db, campaign.id, bind_visitor=True)
    tracker = make_tracker()
    visitors = [visit(ip=f"192.0.2.{n}") for n in range(1, 41)]
    first = [(d.stream_id, d.offer_id) for d in (track(tracker, "bind", v) for v in visitors)]
    clock.advance(60)
    again = [(d.stream_id, d.offer_id) for d in (track(tracker, "bind", v) for v in visitors)]
    assert again == first
    assert len(set(first)) > 2  # Not one fixed answer: binding, not luck.


def test_send_to_campaign_routes_in_the_target(db, make_tracker):
    a, b = offers(db, 2)
    target = create_campaign(db, "Target", "target", offer_id=b)
    create_campaign(db, "Source", "source", offer_id=a)
    hop = add_stream(
        db, "source", type="intercepting", action="campaign", payload="target", filters=["bot=no"]
    )
    decision = track(make_tracker(), "source", visit())
    assert decision.campaign_id == target.id and decision.offer_id == b
    assert decision.route.startswith(f"{hop.id}+ >target ")


def test_a_double_click_sent_on_to_another_campaign_is_debounced(db, make_tracker, clock, settings):
    """Found writing tests/test_routing_model.py's reference model (issue 32): the click is stored in the
    target campaign, and debounce looked for it only in the campaign clicked: a double click made two."""
    a, b = offers(db, 2)
    create_campaign(db, "Target", "target", offer_id=b)
    create_campaign(db, "Source", "source", offer_id=a)
    add_stream(db, "source", type="intercepting", action="campaign", payload="target")
    tracker = make_tracker()
    first = track(tracker, "source", visit())
    clock.advance(0.5)
    again = track(tracker, "source", visit())
    assert again.is_repeat and (again.subid, again.location) == (first.subid, first.location)
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    clock.advance(0.5)  # A worker started now holds nothing of it: the database answers.
    assert track(make_tracker(), "source", visit()).subid == first.subid
    clock.advance(2)
    assert not track(tracker, "source", visit()).is_repeat  # Past debounce: a new click.
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 2


def test_stream_to_a_missing_campaign_is_refused(db):
    create_campaign(db, "Source", "source", offer_url="https://o.example/")
    with pytest.raises(AdminError, match="no campaign 'elsewhere'"):
        add_stream(db, "source", action="campaign", payload="elsewhere")


@pytest.mark.parametrize("two_workers", [False, True])
def test_offer_total_cap_is_exact_and_the_stream_moves_on(db, make_tracker, clock, settings, two_workers):
    capped, spare = offers(db, 1, total_cap=5)[0], offers(db, 1)[0]
    create_campaign(db, "Cap", "cap", offer_id=capped)
    stream = track(make_tracker(), "cap", visit(ip="192.0.2.250")).stream_id  # 1 of 5.
    update_stream(db, stream, fallback_offer_id=spare)
    trackers = (
        [make_tracker(rng=random.Random(1)), make_tracker(rng=random.Random(2))]
        if two_workers
        else [make_tracker()]
    )
    got = Counter()
    for n in range(20):
        got[track(trackers[n % len(trackers)], "cap", visit(ip=f"192.0.2.{n}")).offer_id] += 1
        if n == 7:
            flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert got == {capped: 4, spare: 16}
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    stored = db.connection().execute("SELECT COUNT(*) FROM click WHERE offer_id = ?", (capped,)).fetchone()[0]
    counted = (
        db.connection()
        .execute("SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = ?", (capped,))
        .fetchone()[0]
    )
    assert stored == counted == 5
    # A worker started now (counters from the database + the journal) agrees.
    assert track(make_tracker(rng=random.Random(3)), "cap", visit(ip="192.0.2.99")).offer_id == spare


def test_stream_daily_cap_rolls_over_at_local_midnight(db, make_tracker, clock):
    a, b = offers(db, 2)
    campaign = create_campaign(db, "Daily", "daily", offer_id=a, timezone="Asia/Tokyo")
    first = track(make_tracker(), "daily", visit(ip="192.0.2.240")).stream_id
    backup = add_stream(db, "daily", offers=[(b, 100)])
    tokyo = ZoneInfo("Asia/Tokyo")
    clock.now = datetime(2027, 3, 1, 23, 50, tzinfo=tokyo).timestamp()
    update_stream(db, first, daily_cap=3)
    tracker = make_tracker()
    # The click at the start of this test was on another (local) day: today starts at zero.
    before_midnight = [track(tracker, "daily", visit(ip=f"192.0.2.{n}")).stream_id for n in range(5)]
    assert before_midnight == [first] * 3 + [backup.id] * 2
    clock.now = datetime(2027, 3, 2, 0, 0, 1, tzinfo=tokyo).timestamp()
    assert track(tracker, "daily", visit(ip="192.0.2.50")).stream_id == first
    assert campaign.id


def test_offers_all_capped_without_fallback_skips_the_stream(db, make_tracker):
    capped = offers(db, 1, total_cap=0)[0]
    other = offers(db, 1)[0]
    create_campaign(db, "Skip", "skip", offer_id=other)
    skipped = add_stream(db, "skip", type="intercepting", offers=[(capped, 100)])
    decision = track(make_tracker(), "skip", visit())
    assert decision.offer_id == other and decision.route.startswith(f"{skipped.id}o ")


def test_bot_flag_and_bot_filter(db, make_tracker, settings):
    a, b = offers(db, 2)
    create_campaign(db, "Bots", "bots", offer_id=a)
    add_stream(
        db, "bots", type="intercepting", action="html", payload="<p>hello crawler</p>", filters=["bot=yes"]
    )
    tracker = make_tracker()
    crawler = track(
        tracker, "bots", visit(ua="Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
    )
    human = track(tracker, "bots", visit(ip="198.51.100.77"))
    assert (crawler.answer, crawler.is_bot) == ("html", True)
    assert (human.answer, human.is_bot, human.offer_id) == ("http", False, a)
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    rows = db.execute_sql("SELECT subid, is_bot, device_type, os, browser FROM click ORDER BY id").fetchall()
    assert rows[0][:3] == (crawler.subid, 1, "bot")
    assert rows[1] == (human.subid, 0, "desktop", "Windows", "Chrome")


def test_simulate_traces_every_stream_and_stores_nothing(db, make_tracker, settings):
    a, b = offers(db, 2)
    create_campaign(db, "Sim", "sim", offer_id=a)
    add_stream(
        db,
        "sim",
        type="intercepting",
        offers=[(b, 100)],
        filters=["language=de", "device=mobile"],
        filter_mode="and",
    )
    tracker = make_tracker()
    tracker.refresh()
    simulation = tracker.simulate(tracker.campaign("sim"), visit(accept_language="de-DE,de;q=0.9,en;q=0.5"))
    first, second = simulation.trace
    assert first.verdict == "no match" and [(f[1], f[2]) for f in first.filters] == [
        (True, "de,en"),
        (False, "desktop"),
    ]
    assert second.verdict == "matched" and simulation.decision.offer_id == a
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 0


def test_without_filters_needing_them_the_flusher_flags_bots_and_parses_devices(db, make_tracker, settings):
    (offer,) = offers(db, 1)
    create_campaign(db, "Plain", "plain", offer_id=offer)
    tracker = make_tracker()
    crawler = track(
        tracker, "plain", visit(ua="Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)")
    )
    phone = track(tracker, "plain", visit(ip="198.51.100.78", ua=IPHONE))
    journal = b"".join(path.read_bytes() for path in settings.spool_dir.glob("clicks.*.log"))
    assert journal.count(b"\t-1\t") == 2  # Left to the flusher: neither was checked on the click path.
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    rows = db.execute_sql("SELECT subid, is_bot, device_type, os FROM click ORDER BY id").fetchall()
    assert rows[0][:3] == (crawler.subid, 1, "bot")
    assert rows[1] == (phone.subid, 0, "mobile", "iOS")
