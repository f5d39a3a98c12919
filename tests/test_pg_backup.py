"""`lanner backup` and `lanner restore` on PostgreSQL (models/ops/pgbackup.py): a pg_dump taken while clicks
land and the history appends, paired with the history's copy; restored, every click is in the row store
or the history exactly once, and reports over the history equal raw. A restore keeps each node's spool
position where the replaced database had it: no journal line lands twice or is skipped."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import run_lanner

from models.admin.services import create_campaign
from models.clicks.record import encode_line, line_tail, new_subid, ua_hash
from models.clicks.spool import flush_spool, read_position, segment_path
from models.migrations.deferred import run_deferred
from models.ops.backup import history_copy_path
from models.ops.pgbackup import restore_postgres
from models.reporting.history import HistoryFiles, append_history, verify_history
from models.reporting.rawretention import prune_held_clicks
from models.reporting.reports import ReportQuery, run_report
from models.store.clicks import ClickStore
from models.store.database import open_database, write_tx
from models.store.duckdb.connection import HistoryBusy, open_history
from models.store.history import ROW_COLUMNS, HistoryStore
from workers.bench.generate import generate_clicks

DAY_MS = 86_400_000
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


# pg_dump and pg_restore are PostgreSQL's (tests/test_backup.py backs up SQLite).
# A restore refuses while another client is on the database, the test run's reset session among them.
pytestmark = [pytest.mark.postgresql_only, pytest.mark.alone_on_database]


def row_subids(db) -> dict[str, int]:
    """subid -> created_at of every click in the row store."""
    at, subid = ROW_COLUMNS.index("created_at"), ROW_COLUMNS.index("subid")
    return {row[subid]: row[at] for row in HistoryStore(db.connection()).rows_after(0, 10**15, 10**7)}


def history_subids(files: HistoryFiles) -> list[str]:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return [row[0] for row in conn.execute("SELECT subid FROM click").fetchall()]


def test_a_backup_under_traffic_restores_every_click_once_with_its_history(db, env, settings, tmp_path):
    files = HistoryFiles.of(settings)
    now = int(time.time() * 1000)
    # Clicks 31-60 days old copied into the history, then deleted from the row store by retention.
    generate_clicks(db, 200, 29, campaigns=2, seed=1, end_ms=now - 31 * DAY_MS)
    generate_clicks(db, 200, 5, campaigns=2, seed=2, end_ms=now)
    run_deferred(db)
    append_history(db, files)
    prune_held_clicks(db, files, 30 * DAY_MS, global_uniqueness_hours=24, pause=0)
    only_history = set(history_subids(files)) - set(row_subids(db))
    assert len(only_history) > 100
    before_backup = set(row_subids(db))

    stop, rounds = threading.Event(), [0]

    def traffic() -> None:  # Clicks land and the worker appends, as the backup runs.
        try:
            while not stop.is_set():
                generate_clicks(db, 10, 1, campaigns=2, seed=100 + rounds[0], end_ms=int(time.time() * 1000))
                try:
                    append_history(db, files)
                except HistoryBusy:
                    pass  # The backup holds the writers' lock: the next round appends.
                rounds[0] += 1
        finally:
            db.close()

    runner = threading.Thread(target=traffic)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while rounds[0] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        target = tmp_path / "lanner.pgdump"
        said = run_lanner(env, "backup", str(target)).stdout
        at_backup = rounds[0]
        deadline = time.monotonic() + 60
        while rounds[0] < at_backup + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        runner.join(120)
    assert rounds[0] >= at_backup + 2, "no traffic after the backup"
    assert "pg_dump" in said and f"The click history is beside it: {history_copy_path(target)}" in said
    db.connect(reuse_if_open=True)
    grown = set(row_subids(db))
    assert len(grown) > len(before_backup)

    # Any client on the database stops the restore before it changes anything.
    refused = run_lanner(env, "restore", "--yes", str(target), check=False)
    assert refused.returncode == 1 and "other client(s) are connected to the database" in refused.stderr
    assert set(row_subids(db)) == grown
    db.close()
    restored = run_lanner(env, "restore", "--yes", str(target)).stdout
    assert "Restored the click history taken with the backup" in restored
    assert "was moved to" in restored  # The history that went on appending after the backup.

    open_database(settings.database_location)
    rows = row_subids(db)
    assert before_backup <= set(rows) <= grown  # Nothing from before the backup lost; the rest is the dump's.
    kept = history_subids(files)
    assert len(kept) == len(set(kept)) and only_history <= set(kept)
    append_history(db, files)  # What the dump holds past the history's copy.
    assert verify_history(db, files).is_consistent
    copied = history_subids(files)
    assert len(copied) == len(set(copied)) and set(copied) == set(rows) | only_history

    total = run_report(
        db, ReportQuery(group_by=("campaign",), preset="all_time", source="history"), history=files
    )
    assert total.total["clicks"] == len(rows) + len(only_history)  # Each click once: row store or history.
    since = time.strftime("%Y-%m-%dT%H:%M", time.gmtime((now - 20 * DAY_MS) / 1000))
    for group in ("sub_id_1", "country", "day"):
        shape = dict(group_by=(group,), since=since)
        raw = run_report(db, ReportQuery(source="raw", **shape))
        answered = run_report(db, ReportQuery(source="history", **shape), history=files)
        assert answered.rows == raw.rows and answered.total == pytest.approx(raw.total), group


def _lines(campaign_id: int, count: int, at_ms: int) -> bytes:
    texts = [UA, "", "", "", *[""] * 30, *[""] * 9, "https://offer.example/"]
    return b"".join(
        encode_line(
            f"198.51.100.{n % 250}",
            ua_hash(UA),
            at_ms + n,
            (1, 1, 1),
            line_tail(new_subid(at_ms + n), campaign_id, None, None, 0.0, False, texts),
        )
        for n in range(count)
    )


def test_a_restore_keeps_each_node_where_it_stopped_landing_its_spool(
    db, env, settings, tmp_path, postgres_url
):
    bogus = tmp_path / "bogus.pgdump"
    bogus.write_bytes(b"not an archive" * 100)
    refused = run_lanner(env, "restore", "--yes", str(bogus), check=False)
    assert refused.returncode == 1 and "is not a pg_dump archive" in refused.stderr
    create_campaign(db, "Spooled", "spooled", offer_url="https://offer.example/?s={subid}")
    spool, segment_bytes = settings.spool_dir, settings.spool_segment_bytes

    def journal(count: int) -> None:  # As the node's web workers append, at its flusher's position.
        spool.mkdir(parents=True, exist_ok=True)
        with open(segment_path(spool, read_position(db, spool)[0]), "ab") as segment:
            segment.write(_lines(1, count, int(time.time() * 1000)))

    def land() -> int:
        return flush_spool(db, spool, segment_bytes).inserted

    with write_tx(db):  # Another node's row: it went on too.
        ClickStore(db.connection()).claim("node-b", "b" * 32)
        ClickStore(db.connection()).set_position("node-b", 3, 500, 1)
    journal(5)
    assert land() == 5
    dumped_at = read_position(db, spool)
    target = tmp_path / "spool.pgdump"
    run_lanner(env, "backup", str(target))
    journal(4)
    assert land() == 4  # Landed after the backup: not in the restored database, never landed again.
    with write_tx(db):
        ClickStore(db.connection()).set_position("node-b", 4, 80, 2)
    stopped_at = read_position(db, spool)
    journal(3)  # Journaled, not landed when the nodes stopped.
    landed = set(row_subids(db))
    db.close()

    said = run_lanner(env, "restore", "--yes", str(target)).stdout
    assert "Node node-b: goes on landing its spool from segment 4 byte 80" in said
    open_database(settings.database_location)
    assert read_position(db, spool) == stopped_at != dumped_at
    assert ClickStore(db.connection()).position("node-b") == (4, 80)
    assert len(row_subids(db)) == 5
    assert land() == 3  # The three not landed, and nothing else.
    rows = row_subids(db)
    assert len(rows) == 8 and len(set(rows) & landed) == 5
    db.close()

    # Restored into an empty database (the old one lost): each node lands from the dump's position,
    # the lines after it its spool still holds among them (the restored database lacks them).
    fresh = restore_postgres(postgres_url, target, None)
    assert {(node.name, node.segment, node.byte_offset, node.kept) for node in fresh.nodes} == {
        ("main", *dumped_at, False),
        ("node-b", 3, 500, False),
    }
