"""Cluster mode's node-local visitor history (models/store/nodevisitors.py): a node's flusher keeps the
visitors it landed in the node's own SQLite file, and its web workers answer a visitor's landed history
from it instead of asking the database per click. Real files, a real Redis, both database backends."""

from __future__ import annotations

import logging
import time

import pytest

from models.admin.services import create_campaign, update_campaign
from models.clicks.visit import Visit

VISITOR = Visit(ip="198.51.100.77", user_agent="Mozilla/5.0 (X11) Firefox/120")
DAY_MS = 24 * 3_600_000


class Node:
    """One cluster node: its spool and visitor file, its flusher (`land`), and web workers (`worker`)."""

    def __init__(self, db, settings, make_tracker, redis_url, tmp_path) -> None:
        from models.clicks.landing import SpoolLanding
        from models.clicks.node import ensure_spool_node

        self.db, self.make_tracker, self.redis_url = db, make_tracker, redis_url
        self.spool = tmp_path / "node" / "spool"
        self.spool.mkdir(parents=True)
        ensure_spool_node(self.spool, "node-a")
        self.landing = SpoolLanding(
            db,
            self.spool,
            settings.spool_segment_bytes,
            bot_ips=(),
            park_ms=settings.postback_park_ms,
            visitor_window_ms=DAY_MS,
        )

    def worker(self):
        from models.cluster.shared_state import SharedState
        from models.store.nodevisitors import LandedVisitors, landed_visitors_path

        return self.make_tracker(
            spool_dir=self.spool,
            shared=SharedState(self.redis_url, prefix="t:", timeout=2.0),
            landed=LandedVisitors(landed_visitors_path(self.spool)),
        )

    def land(self) -> int:
        return self.landing.flush().inserted

    def close(self) -> None:
        self.landing.close()


@pytest.fixture
def node(db, settings, make_tracker, redis_url, tmp_path):
    made = Node(db, settings, make_tracker, redis_url, tmp_path)
    yield made
    made.close()


def forget_elsewhere(db, redis_url) -> None:
    """Nothing but the node's file knows the visitor now: the database's rows and Redis's keys are gone."""
    import redis

    with db.atomic():
        db.execute_sql("DELETE FROM click")
    admin = redis.Redis.from_url(redis_url)
    try:
        admin.flushall()
    finally:
        admin.close()


def test_a_landed_visitor_is_answered_from_the_nodes_own_file_not_the_database(db, node, clock, redis_url):
    """A fresh worker of the node (nothing of the visitor in memory) finds the visitor seen, and a click
    within debounce a repeat of the landed one, with neither the database nor Redis knowing of it."""
    campaign = create_campaign(db, "Own", "own", offer_url="https://offer.example/?c={subid}")
    worker = node.worker()
    first = worker.track(worker.campaign("own"), VISITOR)
    assert first.is_unique_global and first.is_unique_campaign
    assert node.land() == 1
    forget_elsewhere(db, redis_url)

    clock.advance(0.5)  # Within debounce: the landed click's subid, from the file alone.
    fresh = node.worker()
    repeat = fresh.track(fresh.campaign("own"), VISITOR)
    assert repeat.is_repeat and repeat.subid == first.subid

    clock.advance(5)  # Past debounce, within the windows: a new click, seen before.
    later = node.worker()
    again = later.track(later.campaign("own"), VISITOR)
    assert not again.is_repeat and again.subid != first.subid
    assert (again.is_unique_global, again.is_unique_campaign) == (False, False)
    assert node.land() == 1
    rows = db.execute_sql("SELECT subid, is_unique_global, is_unique_campaign FROM click").fetchall()
    assert [tuple(row) for row in rows] == [(again.subid, 0, 0)]
    assert campaign.id  # The campaign the node's file keys its rows by.


def test_the_nodes_file_keeps_the_longest_uniqueness_window_and_prunes_past_it(db, node):
    """Pruned once a minute past the longest window: the global one or a campaign's longer one."""
    from models.store.nodevisitors import LandedVisitorsWriter, landed_visitors_path

    campaign = create_campaign(db, "Long", "long", offer_url="https://offer.example/?c={subid}")
    update_campaign(db, campaign.id, uniqueness_hours=48)
    now_ms = int(time.time() * 1000)  # The flusher prunes by the wall clock.
    writer = LandedVisitorsWriter(landed_visitors_path(node.spool))
    try:
        hours = (1, 30, 47, 49)
        writer.add((1, now_ms - h * 3_600_000, f"s{h}", campaign.id, None, None, None) for h in hours)
        assert writer.count() == 4
    finally:
        writer.close()
    node.landing.visitors.next_prune = 0  # A minute has passed.
    worker = node.worker()
    new = worker.track(worker.campaign("long"), VISITOR).subid
    node.land()  # The batch is added, then the file pruned past 48 h.
    writer = LandedVisitorsWriter(landed_visitors_path(node.spool))
    try:
        kept = sorted(row[0] for row in writer.conn.execute("SELECT subid FROM landed").fetchall())
    finally:
        writer.close()
    assert kept == sorted(["s1", "s30", "s47", new])  # s49 pruned; the new click kept.


def test_a_visitor_file_that_cannot_be_written_never_stops_the_landing(db, node, caplog):
    from models.store.nodevisitors import landed_visitors_path

    create_campaign(db, "Full", "full", offer_url="https://offer.example/?c={subid}")
    landed_visitors_path(node.spool).mkdir()  # A directory where the file should be: unwritable.
    tracker = node.make_tracker(spool_dir=node.spool)  # A worker without the file (it cannot open it).
    tracker.track(tracker.campaign("full"), VISITOR)
    with caplog.at_level(logging.WARNING, logger="models.clicks.landing"):
        assert node.land() == 1  # Landed all the same.
    assert any("visitor file" in record.getMessage() for record in caplog.records)
