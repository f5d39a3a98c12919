"""How big a batch the flusher lands (issue 33, point 3): a round stops once it has caught up with
what the journal held (it used to chase the clicks arriving meanwhile, in batches of a dozen); a round
under load waits for about FLUSH_BATCH_TARGET clicks, never past the spool's next fsync; a batch reads
about what it needs of the journal, and a line longer than that guess is still read whole."""

from __future__ import annotations

import os
import threading

import pytest

from models.admin.services import create_campaign, create_offer
from models.clicks.spool import LINE_GUESS, READ_CHUNK, _complete_lines, flush_spool
from models.clicks.visit import Visit
from workers.runtime.tasks import FLUSH_BATCH_TARGET, FLUSH_STRETCH, flush_pause


def test_a_round_under_load_waits_for_a_batch_of_the_target_within_the_stretch_and_the_next_fsync():
    interval = 0.25
    # 400 clicks/s: 100 a quarter second; waiting 1.25 s would make 500, the stretch allows 1 s.
    assert flush_pause(100, 0.25, interval, until_sync=5) == pytest.approx(interval * FLUSH_STRETCH)
    # 4,000 clicks/s: FLUSH_BATCH_TARGET (2,000) arrive in half a second.
    assert flush_pause(1000, 0.25, interval, until_sync=5) == pytest.approx(FLUSH_BATCH_TARGET / 4000)
    # 10,000 clicks/s: the target arrives within the interval, which stays the shortest pause.
    assert flush_pause(2500, 0.25, interval, until_sync=5) == interval
    # The spool's fsync is due in 0.4 s: the pause ends by then (the loop syncs at its next round).
    assert flush_pause(100, 0.25, interval, until_sync=0.4) == pytest.approx(0.4)
    assert flush_pause(100, 0.25, interval, until_sync=-1) == interval
    # The rate is over the time since the round before, however long the pause was.
    assert flush_pause(400, 1.0, interval, until_sync=5) == pytest.approx(1.0)


def test_a_batch_reads_about_its_lines_and_a_longer_line_whole(tmp_path):
    path = tmp_path / "segment"
    short, long_line = b"s" * 199 + b"\n", b"l" * (3 * LINE_GUESS) + b"\n"
    path.write_bytes(short * 10 + long_line + short * 5 + b"torn")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert list(_complete_lines(fd, 0, 4)) == [short] * 4
        assert list(_complete_lines(fd, 0, 100)) == [short] * 10 + [long_line] + [short] * 5
        # One line wanted, longer than its guess: read from the whole chunk, not refused.
        assert list(_complete_lines(fd, 10 * len(short), 1)) == [long_line]
        assert list(_complete_lines(fd, path.stat().st_size - 4, 1)) == []  # A torn tail: nothing yet.
    finally:
        os.close(fd)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"g" * (READ_CHUNK + 10))
    fd = os.open(garbage, os.O_RDONLY)
    try:
        assert list(_complete_lines(fd, 0, 1)) == [b"g" * READ_CHUNK]  # Longer than any line: refused.
    finally:
        os.close(fd)


def test_a_flush_lands_what_the_journal_held_and_leaves_the_clicks_written_meanwhile_to_the_next(
    db, settings, make_tracker
):
    offer = create_offer(db, "Offer", "https://o.example/?s={subid}")
    create_campaign(db, "Batches", "batches", offer_id=offer.id)
    tracker = make_tracker()
    config = tracker.campaign("batches")
    for i in range(5):
        tracker.track(config, Visit(ip=f"198.51.100.{i + 1}", user_agent="Mozilla/5.0 (X11) Batch"))
    batches: list[int] = []

    def more_arrive(result) -> None:
        # Clicks journalled while the first batch landed, as under load.
        if not batches:
            for i in range(3):
                tracker.track(config, Visit(ip=f"203.0.113.{i + 1}", user_agent="Mozilla/5.0 (X11) Batch"))
        batches.append(result.inserted)

    first = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes, on_batch=more_arrive)
    assert first.inserted == 5 and batches[0] == 5
    second = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert second.inserted == 3
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 8


@pytest.mark.sqlite_only
def test_the_flushers_connection_keeps_its_larger_page_cache_and_no_other_does(db, settings):
    """The spool flusher's connection caches FLUSHER_CACHE_MB of the database (its batches touch about a
    leaf of the visitor-key index a click); every other connection keeps PRAGMAS' 2 MB."""
    from models.store.sqlite.database import PRAGMAS
    from workers.runtime.tasks import FLUSHER_CACHE_MB, SpoolFlusher

    def cache_size() -> int:
        return db.execute_sql("PRAGMA cache_size").fetchone()[0]

    others: list[int] = []

    def another_connection() -> None:  # A thread of its own gets a connection of its own.
        db.connect(reuse_if_open=True)
        try:
            others.append(cache_size())
        finally:
            db.close()

    assert cache_size() == PRAGMAS["cache_size"]
    flusher = SpoolFlusher(settings)
    try:
        assert cache_size() == -FLUSHER_CACHE_MB * 1024
        thread = threading.Thread(target=another_connection)
        thread.start()
        thread.join()
        assert others == [PRAGMAS["cache_size"]]
    finally:
        flusher.close()
