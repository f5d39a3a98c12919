"""Four nodes' flushers landing one campaign at once into one real PostgreSQL (issue 33, point 2).

Each flusher adds onto its own node's partial of the cap counter and rollup rows (migration 0036), so
none waits on another's rows; within its partial it takes the row locks in one global order
(click_counter, then the rollup tables in TABLES' order, each table's rows by key: models/store/rows.py
in_lock_order), at the end of its transaction, so no writer of one partial can deadlock another. The
totals must come out exact. The server logs every lock wait past a 1 ms deadlock_timeout
(log_lock_waits): the test reads that log, and a control shows that two writers of one partial
do show there. PostgreSQL only: SQLite has one writer at a time and no row locks.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta

import pytest
from conftest import wait_until

from models.clicks.node import partial_number
from models.reporting.reports import ReportQuery, run_report

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
WAITED = re.compile(r"process (?P<pid>\d+) still waiting for \w+ on (?P<kind>transaction|tuple|\w+)")
# The statement the waiting process ran, logged after its wait (log_line_prefix's `[pid]`, PostgreSQL's
# default): the table it was writing.
WRITING = r"\[{pid}\] STATEMENT:\s+(?:INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)"
SHARED_TABLES = ("click_counter", "rollup_")


def lock_waits(log: str) -> list[tuple[str, str]]:
    """(what was waited on, the table the waiting statement writes, or "?") of each wait in `log`."""
    waits = []
    for wait in WAITED.finditer(log):
        statement = re.search(WRITING.format(pid=wait["pid"]), log[wait.end() :])
        waits.append((wait["kind"], statement[1] if statement else "?"))
    return waits


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


def test_four_flushers_of_one_campaign_never_wait_on_each_other_s_rows_and_land_exact_totals(
    postgres_server, spools, clock
):
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
    # Each node's own partial of the rows every flusher adds onto.
    nodes = {
        table: {row[0] for row in db.execute_sql(f"SELECT DISTINCT node FROM {table}").fetchall()}
        for table in ("click_counter", "rollup_hour", "rollup_campaign_day")
    }
    assert nodes == dict.fromkeys(nodes, {partial_number(f"node-{n}") for n in range(NODES)})
    # What they waited on, for the record (docs/SCALING.md): at most a table file's extension (a page
    # added); never a row of the cap counters or the rollups (before 0036: 80-108 waits past 1 ms in
    # these 48 transactions).
    waits = lock_waits(log)
    print(f"{len(waits)} lock waits past 1 ms in {NODES * CLICKS // BATCH} flush transactions: {set(waits)}")
    # A row lock is a transaction's or a tuple's; an extension is the table file's (a page added by
    # one inserter while another waits to add its own), no row of anyone's.
    assert not [wait for wait in waits if wait[0] != "extension" and wait[1].startswith(SHARED_TABLES)], waits
    assert {kind for kind, _ in waits} <= {"extension"}, waits

    # A report over the rollups (the nodes' partials summed) says what the raw clicks say.
    day = datetime.fromtimestamp(clock() - clock() % 86_400, UTC).date()
    shape = dict(group_by=("stream", "offer", "browser"), since=str(day), until=str(day + timedelta(days=1)))
    fast, raw = run_report(db, ReportQuery(**shape)), run_report(db, ReportQuery(source="raw", **shape))
    assert fast.sources == ["rollup_day"] and fast.rows == raw.rows and fast.total["clicks"] == total


def test_two_writers_of_one_partial_wait_and_the_log_names_the_rows(postgres_server, postgres_migrated_url):
    """The control for the test above: a wait on a shared row does show in the log, named by its table."""
    from models.store.counters import CounterStore
    from models.store.database import db, open_database, write_tx

    open_database(postgres_migrated_url)
    log_before = len(postgres_server.log())
    holding, release = threading.Event(), threading.Event()
    increment = [("offer", 7, 20270115, 1)]

    def hold() -> None:
        try:
            with write_tx(db):
                CounterStore(db.connection()).add(increment, node=3)
                holding.set()
                release.wait(timeout=120)
        finally:
            db.close()

    def add() -> None:
        try:
            db.execute_sql("SET deadlock_timeout = '1ms'").close()
            db.execute_sql("SET log_lock_waits = on").close()
            with write_tx(db):
                CounterStore(db.connection()).add(increment, node=3)
        finally:
            db.close()

    threads = [threading.Thread(target=hold), threading.Thread(target=add)]
    threads[0].start()
    assert holding.wait(timeout=60)
    threads[1].start()
    try:
        wait_until(
            lambda: "still waiting" in postgres_server.log()[log_before:], 60, "the second writer's wait"
        )
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=120)
    assert lock_waits(postgres_server.log()[log_before:]) == [("transaction", "click_counter")]
    assert db.execute_sql("SELECT clicks FROM click_counter WHERE ref_id = 7").fetchone() == (2,)
    db.close()


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
