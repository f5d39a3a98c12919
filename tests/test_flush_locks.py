"""Four nodes' flushers landing one campaign at once into one real PostgreSQL (issue 33, point 2).

Each flusher adds onto the same cap counter and rollup rows. It takes their row locks in one global
order (click_counter, then the rollup tables in TABLES' order, each table's rows by key:
models/store/rows.py in_lock_order), at the end of its transaction, so none can deadlock; the totals
must come out exact. The server logs every lock wait past a 1 ms deadlock_timeout (log_lock_waits):
the test reads that log. PostgreSQL only: SQLite
has one writer at a time and no row locks.
"""

from __future__ import annotations

import re
import threading

import pytest

NODES = 4
CLICKS = 240  # A node's; in batches of BATCH, so each flusher commits 12 times.
BATCH = 20
# Streams and offers rotated at random and visitors whose clicks land on different rollup keys (browser,
# OS, device type), in an order of its own on each node: batches that added onto several shared rows (a
# cap counter, a rollup row) in batch order locked them crosswise and deadlocked (before in_lock_order).
STREAMS = OFFERS = 3
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 "
    "Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.0 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile "
    "Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 "
    "Safari/605.1.15",
)
WAITED = re.compile(r"process \d+ still waiting for \w+ on (transaction|tuple|\w+)")


@pytest.fixture
def spools(postgres_server, postgres_migrated_url, tmp_path, clock):
    """NODES spools of CLICKS lines each, written by in-process trackers, all for one campaign in one hour."""
    from models.admin.services import add_stream, create_campaign, create_offer, update_stream
    from models.clicks.node import ensure_spool_node
    from models.clicks.tracker import ClickTracker
    from models.clicks.visit import Visit
    from models.store.database import db, open_database

    open_database(postgres_migrated_url)
    offers = [create_offer(db, f"Offer {n}", f"https://{n}.example/?c={{subid}}").id for n in range(OFFERS)]
    campaign = create_campaign(db, "Locks", "locks", offer_id=offers[0], rotation="weight")
    update_stream(db, campaign.streams.get().id, offers=[(offer, 100) for offer in offers])
    for _ in range(STREAMS - 1):
        add_stream(db, campaign.id, offers=[(offer, 100) for offer in offers])
    dirs = []
    for n in range(NODES):
        spool = tmp_path / f"node-{n}" / "spool"
        spool.mkdir(parents=True)
        ensure_spool_node(spool, f"node-{n}")
        tracker = ClickTracker(
            db, spool_dir=spool, segment_bytes=64 << 20, uniqueness_hours=24, debounce_seconds=2, clock=clock
        )
        try:
            config = tracker.campaign("locks")
            for i in range(CLICKS):
                agent = AGENTS[(i * (n + 1) + n) % len(AGENTS)]
                tracker.track(config, Visit(ip=f"10.{n}.{i // 250}.{i % 250 + 1}", user_agent=agent))
        finally:
            tracker.close()
        dirs.append(spool)
    db.close()  # Each flusher thread opens its own connection.
    return campaign.id, dirs


def test_four_flushers_of_one_campaign_never_deadlock_and_land_exact_totals(postgres_server, spools):
    from models.clicks.spool import flush_spool
    from models.store.database import db

    campaign_id, dirs = spools
    log_before = len(postgres_server.log())
    start = threading.Barrier(NODES)
    errors: list[BaseException] = []

    def flush(spool) -> None:
        try:
            # Every wait for a lock past 1 ms is logged: the waits are counted from the server's log.
            db.execute_sql("SET deadlock_timeout = '1ms'").close()
            db.execute_sql("SET log_lock_waits = on").close()
            start.wait(timeout=60)
            flush_spool(db, spool, 64 << 20, batch_size=BATCH)
        except BaseException as error:
            errors.append(error)
        finally:
            db.close()

    threads = [threading.Thread(target=flush, args=(spool,)) for spool in dirs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    log = postgres_server.log()[log_before:]
    assert "deadlock detected" not in log

    total = NODES * CLICKS
    clicks, rollup, by_campaign, counted = db.execute_sql(
        "SELECT (SELECT COUNT(*) FROM click WHERE campaign_id = %s),"
        " (SELECT SUM(clicks) FROM rollup_hour WHERE campaign_id = %s),"
        " (SELECT SUM(clicks) FROM rollup_campaign_day WHERE campaign_id = %s),"
        " (SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer')",
        (campaign_id, campaign_id, campaign_id),
    ).fetchone()
    assert (clicks, rollup, by_campaign, counted) == (total, total, total, total)
    # What they waited on, for the record (docs/SCALING.md): row locks on the shared rows (a
    # transaction's, or a tuple's while another waiter is ahead), taken in one order, and the table
    # file's extension (a page added), and nothing else.
    waits = WAITED.findall(log)
    print(f"{len(waits)} lock waits past 1 ms in {NODES * CLICKS // BATCH} flush transactions: {set(waits)}")
    assert set(waits) <= {"transaction", "tuple", "extension"}, waits


def test_rows_in_lock_order_are_sorted_by_their_key_with_null_first_and_values_kept():
    from models.store.rows import in_lock_order

    rows = [
        (3600, 2, "US", 5),
        (3600, 1, None, 7),
        (0, 2, "", 1),
        (3600, 1, "DE", 2),
        (3600, 1, None, 3),  # The same key as the second row: kept after it.
    ]
    assert in_lock_order(rows, 3) == [
        (0, 2, "", 1),
        (3600, 1, None, 7),
        (3600, 1, None, 3),
        (3600, 1, "DE", 2),
        (3600, 2, "US", 5),
    ]
