"""Segments deleted by hand before they landed are restored from a descriptor still open on them.

Real files, a real migrated database; real `lanner serve` and `lanner worker` processes where the
web workers and the flusher are the subject.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import threading
import time
from collections import Counter

from conftest import click, subid_of
from test_spool_faults import OFFER, stored_subids

from models.admin import create_campaign, create_offer, update_stream
from models.spool import (
    MISSING_FILE,
    flush_spool,
    list_segments,
    read_missing_segments,
    read_position,
    remove_flushed_segments,
    segment_path,
    spool_status,
)
from models.tracking import Visit


def track(tracker, alias: str, ip: str, ua: str = "Mozilla/5.0 recovery"):
    tracker.refresh()
    return tracker.track(tracker.campaign(alias), Visit(ip=ip, user_agent=ua))


def test_a_cap_stays_exact_and_uniqueness_unchanged_across_a_deleted_active_segment(
    make_tracker, db, settings, clock
):
    """Both workers read the restored lines before the deletion: each must count them once, not again."""
    capped = create_offer(db, "Capped", "https://capped.example/?c={subid}", total_cap=12).id
    spare = create_offer(db, "Spare", "https://spare.example/?c={subid}").id
    create_campaign(db, "Cap", "cap", offer_id=capped)
    first, second = make_tracker(rng=random.Random(1)), make_tracker(rng=random.Random(2))
    update_stream(db, first.campaign("cap").regular[0].id, fallback_offer_id=spare)
    workers = (first, second)
    got = Counter()
    for n in range(10):
        got[track(workers[n % 2], "cap", f"192.0.2.{n}").offer_id] += 1
        if n == 5:
            flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)  # 4 left in the file only.
    segment_path(settings.spool_dir, 1).unlink()
    clock.advance(5)  # Past the debounce window: a visitor back is a new, not unique, click.
    later = [track(workers[n % 2], "cap", f"192.0.2.{n}", ua="later") for n in range(10, 24)]
    got.update(decision.offer_id for decision in later)
    assert got == {capped: 12, spare: 12}
    assert list_segments(settings.spool_dir) == [1]  # Restored by the first worker to append.
    # Visitors whose clicks were in the file only, back through another worker than their first.
    back = [track(make_tracker(), "cap", "192.0.2.8"), track(first, "cap", "192.0.2.9"), track(second, "cap", "192.0.2.6")]
    assert [(d.is_repeat, d.is_unique_global, d.is_unique_campaign, d.is_unique_stream) for d in back] == [
        (False, False, False, False)
    ] * 3
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    stored = db.execute_sql("SELECT COUNT(*) FROM click WHERE offer_id = ?", (capped,)).fetchone()[0]
    counted = db.execute_sql(
        "SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = ?", (capped,)
    ).fetchone()[0]
    assert stored == counted == 12
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 27
    assert spool_status(db, settings.spool_dir).missing_segments == []


def test_a_worker_that_reaches_a_restored_segment_from_its_start_skips_the_landed_part(
    make_tracker, db, settings, clock
):
    """Only the unlanded part is restored, at its own offsets: before it is a hole of zeros."""
    create_campaign(db, "Hole", "hole", offer_url=OFFER)
    busy = make_tracker(segment_bytes=4000)
    idle = make_tracker(segment_bytes=4000)  # Stays in segment 1 while the others move on.
    subids = [track(busy, "hole", f"192.0.2.{n}").subid for n in range(30)]
    assert list_segments(settings.spool_dir)[-1] >= 2 and idle.journal.segment == 1
    flush_spool(db, settings.spool_dir, 4000)
    active = list_segments(settings.spool_dir)[-1]
    subids += [track(busy, "hole", f"192.0.3.{n}").subid for n in range(2)]
    remove_flushed_segments(db, settings.spool_dir)
    path = segment_path(settings.spool_dir, active)
    landed = read_position(db)[1]
    assert read_position(db)[0] == active and 0 < landed < path.stat().st_size
    path.unlink()
    subids.append(track(busy, "hole", "192.0.3.9").subid)  # Restores it.
    assert path.read_bytes()[:landed] == b"\0" * landed
    clock.advance(5)
    again = track(idle, "hole", "192.0.3.0")  # Reads segments 1 to the restored one from 0.
    assert idle.journal.segment == active and (again.is_repeat, again.is_unique_campaign) == (False, False)
    assert track(idle, "hole", "192.0.2.29").is_unique_campaign is False  # In the database.
    subids.append(again.subid)
    result = flush_spool(db, settings.spool_dir, 4000)
    assert (result.rejected, result.duplicates) == (0, 0)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} >= set(subids)


def test_the_flusher_restores_a_sealed_segment_deleted_before_it_landed(make_tracker, db, settings, caplog):
    from models.spool import HeldSegments

    create_campaign(db, "Sealed", "sealed", offer_url=OFFER)
    tracker = make_tracker(segment_bytes=2000)
    subids = [track(tracker, "sealed", f"192.0.2.{n}").subid for n in range(3)]
    held = HeldSegments()
    try:
        flush_spool(db, settings.spool_dir, 2000, held=held)  # Lands them and holds segment 1 open.
        subids += [track(tracker, "sealed", f"192.0.2.{n}").subid for n in range(3, 40)]
        assert len(list_segments(settings.spool_dir)) >= 4
        segment_path(settings.spool_dir, 1).unlink()  # Sealed, part of it not landed.
        result = flush_spool(db, settings.spool_dir, 2000, held=held)
        assert result.inserted == 37 and result.rejected == 0
        assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)
        assert "spool segment 1 was deleted before it landed: restored its" in caplog.text
        assert spool_status(db, settings.spool_dir).missing_segments == []
        (noted,) = read_missing_segments(settings.spool_dir)
        assert (noted.segment, noted.lost) == (1, 0)
        # Landed segments' descriptors are closed: only the one the flusher is in stays held.
        remove_flushed_segments(db, settings.spool_dir)
        flush_spool(db, settings.spool_dir, 2000, held=held)
        assert list(held._held) == [read_position(db)[0]]
    finally:
        held.close()
    assert (settings.spool_dir / MISSING_FILE).exists()
