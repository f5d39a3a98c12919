"""A web worker's memory while the flusher is away: recent clicks in memory, older ones on disk."""

from __future__ import annotations

import logging
import random
import tracemalloc

import pytest

from models.admin.services import create_campaign, create_offer, update_stream
from models.clicks.record import encode_line, line_tail, new_subid, ua_hash
from models.clicks.spool import flush_spool, read_position, segment_path
from models.clicks.visit import Visit

HOUR_MS = 3_600_000
UA = "Mozilla/5.0 (Linux; Android 13; SM-A{n}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124 Mobile"


def visit(ip: str = "198.51.100.1", ua: str = "Mozilla/5.0 (X11) Firefox/120") -> Visit:
    return Visit(ip=ip, user_agent=ua)


def append_clicks(db, spool_dir, clicks) -> None:
    """Journal lines as another worker writes them, at the flusher's position: the consumer is stopped."""
    segment, _ = read_position(db, spool_dir)
    spool_dir.mkdir(parents=True, exist_ok=True)
    with open(segment_path(spool_dir, segment), "ab") as journal:
        for ip, ua, created_at, campaign_id, stream_id, offer_id in clicks:
            subid = new_subid(created_at)
            texts = [ua, "", "push", "", *[""] * 30, "US", "", "", "", "", "", "en", "", "", "https://o/"]
            tail = line_tail(subid, campaign_id, stream_id, offer_id, 0.0, -1, texts)
            journal.write(encode_line(ip, ua_hash(ua), created_at, (1, 1, 1), tail))


def flags(decision) -> tuple[bool, bool, bool]:
    return decision.is_unique_global, decision.is_unique_campaign, decision.is_unique_stream


@pytest.mark.long
def test_an_hour_of_unflushed_clicks_costs_a_starting_worker_no_memory_per_click(
    db, settings, make_tracker, clock
):
    campaign = create_campaign(db, "T", "t", offer_url="https://offer.example/?c={subid}")
    stream_id = (
        db.connection().execute("SELECT id FROM stream WHERE campaign_id = ?", (campaign.id,)).fetchone()[0]
    )
    now_ms = int(clock() * 1000)
    rng = random.Random(5)
    count = 40_000
    spacing_ms = 3_000_000 // count  # 50 minutes of them, in the uniqueness windows.
    visitors = [
        (f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}", UA.format(n=rng.randint(100, 999)))
        for n in range(count)
    ]
    lines = [
        (ip, ua, now_ms - HOUR_MS + n * spacing_ms, campaign.id, stream_id, None)
        for n, (ip, ua) in enumerate(visitors)
    ]
    make_tracker()  # What the first tracker of a process allocates once, out of the starts measured below.
    # A worker starting over a quarter of the clicks, then one over all of them: what a click costs
    # a starting worker is the difference between the two over the clicks between them (holding
    # every line took ~1 KB a click; the index's own cost is a few bytes).
    held_bytes = []
    for start, end in ((0, count // 4), (count // 4, count)):
        append_clicks(db, settings.spool_dir, lines[start:end])
        tracemalloc.start()
        try:
            tracker = make_tracker()
            held_bytes.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    per_click = (held_bytes[1] - held_bytes[0]) / (count - count // 4)
    assert len(tracker.index) == count and tracker.index.in_memory == 0
    assert per_click < 35 and held_bytes[1] < 8 * 1024 * 1024, (per_click, held_bytes)
    first_ip, first_ua = visitors[0]  # An hour ago: in the uniqueness windows, on disk only.
    again = tracker.track(tracker.campaign("t"), visit(first_ip, first_ua))
    assert not again.is_repeat and flags(again) == (False, False, False)
    assert flags(tracker.track(tracker.campaign("t"), visit("192.0.2.1"))) == (True, True, True)
    assert flush_spool(db, settings.spool_dir, settings.spool_segment_bytes).inserted == count + 2
    clock.advance(5)
    tracker.refresh()  # All of it landed: the file goes in one close.
    assert len(tracker.index) == 0 and tracker.index.spilled == 0


def test_memory_holds_only_the_last_seconds_while_the_flusher_is_away(db, make_tracker, clock):
    create_campaign(db, "T", "t", offer_url="https://offer.example/?c={subid}")
    tracker = make_tracker()
    for n in range(3000):  # 30 s at 100 clicks/s, nothing flushed.
        tracker.track(tracker.campaign("t"), visit(f"10.0.{n >> 8}.{n & 255}"))
        clock.advance(0.01)
    assert len(tracker.index) == 3000
    # Unflushed clicks stay SPILL_AFTER (5 s), up to 0.25 s between refreshes: ~5.25 s of clicks.
    assert tracker.index.in_memory <= 530, tracker.index.in_memory
    assert tracker.index.spilled >= 2470


def test_uniqueness_rotation_and_caps_stay_exact_for_clicks_held_on_disk(db, settings, make_tracker, clock):
    ids = [create_offer(db, f"O{n}", f"https://o{n}.example/?c={{subid}}").id for n in range(3)]
    capped = create_offer(db, "Capped", "https://capped.example/?c={subid}", total_cap=3).id
    create_campaign(db, "Rotate", "rotate", offer_id=ids[0])
    create_campaign(db, "Cap", "cap", offer_id=capped)
    tracker = make_tracker()
    rotate_stream = tracker.campaign("rotate").regular[0].id
    update_stream(db, rotate_stream, offers=[(i, 100) for i in ids], offer_rotation="unvisited")
    spare = create_offer(db, "Spare", "https://spare.example/?c={subid}").id
    update_stream(db, tracker.campaign("cap").regular[0].id, fallback_offer_id=spare)
    clock.advance(2)
    tracker.refresh()

    got = []
    for _ in range(3):
        decision = tracker.track(tracker.campaign("rotate"), visit())
        got.append(decision.offer_id)
        clock.advance(10)  # Past debounce: the click leaves memory, unflushed.
        tracker.refresh()
        assert tracker.index.in_memory == 0 and tracker.index.spilled == len(got)
        assert not decision.is_repeat
    assert sorted(got) == sorted(ids)  # Each return went to an offer the visitor had not seen.
    assert flags(tracker.track(tracker.campaign("cap"), visit())) == (False, True, True)

    for n in range(2):  # Fill the cap (3), then move those clicks to disk.
        assert tracker.track(tracker.campaign("cap"), visit(f"192.0.2.{n}")).offer_id == capped
    clock.advance(10)
    tracker.refresh()
    assert tracker.index.in_memory == 0
    assert tracker.track(tracker.campaign("cap"), visit("192.0.2.9")).offer_id == spare
    # A worker started now replays the journal straight to disk and agrees on all of it.
    clock.advance(10)
    late = make_tracker()
    assert late.index.in_memory == 0 and len(late.index) == len(tracker.index)
    assert flags(late.track(late.campaign("rotate"), visit())) == (False, False, False)
    assert late.track(late.campaign("cap"), visit("192.0.2.10")).offer_id == spare
    landed = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes).inserted
    assert landed == 3 + 1 + 2 + 1 + 2


def test_when_the_disk_refuses_the_clicks_stay_in_memory_and_answers_stay_exact(
    db, settings, make_tracker, clock, caplog
):
    import os

    create_campaign(db, "T", "t", offer_url="https://offer.example/?c={subid}")
    tracker = make_tracker()
    blocker = settings.spool_dir / f"held.{os.getpid()}.db"
    blocker.mkdir(parents=True)  # The spill file's name is taken: it cannot be created.
    first = tracker.track(tracker.campaign("t"), visit())
    clock.advance(10)
    with caplog.at_level(logging.ERROR, logger="models.clicks.visitors"):
        tracker.refresh()
    assert "kept in memory" in caplog.text
    assert tracker.index.in_memory == 0 and tracker.index.spilled == 1  # Pending, compact, in memory.
    again = tracker.track(tracker.campaign("t"), visit())
    assert again.subid != first.subid and flags(again) == (False, False, False)
    blocker.rmdir()
    clock.advance(10)
    tracker.refresh()  # The disk works again: the pending clicks go there.
    assert tracker.index._spill is not None and tracker.index._pending_count == 0
    assert flags(tracker.track(tracker.campaign("t"), visit())) == (False, False, False)
