"""`lanner backup` while clicks flow, and `lanner restore` of what it wrote: SQLite's files with the
columnar click history beside them (PostgreSQL's pg_dump and pg_restore: tests/test_pg_backup.py).
Clicks only the history holds (pruned by LANNER_RAW_RETENTION) survive a backup and restore; a restore
without the history's copy makes the box's consistent (cut back, or trusted less) and says so."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time

import pytest
from conftest import click, subid_of, wait_until

from models.migrations.deferred import run_deferred
from models.ops.backup import history_copy_path
from models.reporting.history import HistoryFiles, append_history, verify_history
from models.reporting.rawretention import prune_held_clicks
from models.store.duckdb.connection import open_copy, open_history
from models.store.history import HistoryStore
from workers.bench.generate import generate_clicks

pytestmark = pytest.mark.sqlite_only

DAY_MS = 86_400_000


@pytest.fixture
def files(settings) -> HistoryFiles:
    return HistoryFiles(settings.history_path, settings.history_memory_limit)


def pruned_old_clicks(db, files: HistoryFiles, count: int, seed: int) -> set[str]:
    """`count` clicks 31–60 days old, copied into the history and deleted from the row store by
    retention (30 days): their subids, which only the history holds now."""
    now = int(time.time() * 1000)
    before = subids(db)
    generate_clicks(db, count, 29, campaigns=3, seed=seed, end_ms=now - 31 * DAY_MS)
    old = subids(db) - before
    run_deferred(db)
    append_history(db, files)
    prune_held_clicks(db, files, 30 * DAY_MS, global_uniqueness_hours=24, pause=0)
    gone = old - subids(db)
    assert len(gone) > count // 2  # Converted ones stay in the row store.
    return gone


def subids(db) -> set[str]:
    return {row[0] for row in db.connection().execute("SELECT subid FROM click").fetchall()}


def history_subids(path, memory_limit: str) -> set[str]:
    with open_copy(path, memory_limit=memory_limit) as conn:
        return {row[0] for row in conn.execute("SELECT subid FROM click").fetchall()}


def history_position(files: HistoryFiles) -> int:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return conn.execute("SELECT value FROM history_meta WHERE key = 'position'").fetchone()[0]


def count(path) -> int:
    connection = sqlite3.connect(path)  # Closed, not just committed: restore refuses an open database.
    try:
        return connection.execute("SELECT count(*) FROM click").fetchone()[0]
    finally:
        connection.close()


def test_backup_while_serving_is_consistent_and_restores(
    db, lanner, start_server, start_consumer, settings, files, tmp_path
):
    lanner("campaign", "create", "B", "--alias", "b", "--offer-url", "https://offer.example/?click={subid}")
    lanner("generate", "clicks", "--count", "30000", "--days", "3", "--campaigns", "3", "--seed", "1")
    history_only = pruned_old_clicks(db, files, 600, seed=2)  # Only the history holds them now.
    base = count(settings.database_path)
    server = start_server()
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    stop = threading.Event()
    served: list[str] = []

    def traffic() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            served.append(
                subid_of(
                    click(server.port, "b", ip=f"100.80.{n // 250}.{n % 250 + 1}", ua=f"B {n}")[1]["location"]
                )
            )

    thread = threading.Thread(target=traffic)
    thread.start()
    try:
        # Some served clicks must have landed before the backup (the flusher's first flush builds its
        # bot and User-Agent matchers, which takes a moment).
        deadline = time.monotonic() + 20
        while count(settings.database_path) <= base and time.monotonic() < deadline:
            time.sleep(0.1)
        target = tmp_path / "copy.db"
        out = lanner("backup", str(target)).stdout
        assert f"Backed up to {target}" in out
        assert f"The click history is beside it: {history_copy_path(target)}" in out
        backed_up = len(served)  # Some clicks served after the copy was taken: not in it.
        wait_until(lambda: len(served) > backed_up + 10, 60, "clicks after the backup", lambda: server.log)
    finally:
        stop.set()
        thread.join()
    with sqlite3.connect(target) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        in_copy = {row[0] for row in copy.execute("SELECT subid FROM click WHERE campaign_id = 1")}
    assert base < count(target) < base + len(served) + 1
    assert in_copy < set(served)  # A snapshot: some of the clicks served, not all of them.
    with sqlite3.connect(target) as copy:
        (trusted,) = copy.execute("SELECT position FROM history_state").fetchone()
        (last_id,) = copy.execute("SELECT max(id) FROM click").fetchone()
    with open_copy(history_copy_path(target), memory_limit=files.memory_limit) as conn:
        (copied_up_to,) = conn.execute("SELECT value FROM history_meta WHERE key = 'position'").fetchone()
        (past_the_copy,) = conn.execute("SELECT count(*) FROM click WHERE id > ?", (last_id,)).fetchone()
    # The pair is consistent: the history holds what the database trusts it with, and no click the
    # database has not (the restored database hands those ids out again).
    assert trusted <= copied_up_to <= last_id and past_the_copy == 0
    assert history_only <= history_subids(history_copy_path(target), files.memory_limit)

    # Restore refuses while the tracker has the database open...
    refused = lanner("restore", "--yes", str(target), check=False)
    assert refused.returncode != 0 and "stop lanner serve and lanner worker first" in refused.stderr
    # ...and replaces it once they are stopped.
    assert server.stop() == 0
    assert consumer.stop(signal.SIGINT, timeout=30) == 0
    db.close()  # This test process had it open too.
    settings.history_path.unlink()  # The box lost its history: the backup's comes back.
    restored = lanner("restore", "--yes", str(target))
    assert "Restored" in restored.stdout and "was moved to" in restored.stdout
    copied = len(history_subids(history_copy_path(target), files.memory_limit))
    said = f"Restored the click history taken with the backup: {copied:,} clicks, up to click {copied_up_to}."
    assert said in restored.stdout
    assert count(settings.database_path) == count(target)
    assert history_only <= history_subids(settings.history_path, files.memory_limit)
    assert verify_history(db, files).is_consistent
    shown = lanner("click", "show", min(history_only)).stdout  # From the restored history.
    assert min(history_only) in shown
    # The restored tracker serves and lands clicks again, from a fresh spool.
    server = start_server()
    subid = subid_of(click(server.port, "b", ua="after restore")[1]["location"])
    lanner("spool", "flush")
    with sqlite3.connect(settings.database_path) as connection:
        assert connection.execute("SELECT count(*) FROM click WHERE subid = ?", (subid,)).fetchone() == (1,)


def test_restore_refuses_a_file_that_is_not_a_lanner_database(lanner, tmp_path):
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"not a database at all" * 100)
    result = lanner("restore", "--yes", str(bogus), check=False)
    assert result.returncode != 0 and "is not a Lanner database" in result.stderr


def test_backup_refuses_to_overwrite(lanner, tmp_path):
    target = tmp_path / "exists.db"
    target.write_text("x")
    result = lanner("backup", str(target), check=False)
    assert result.returncode != 0 and "already exists" in result.stderr


def test_a_restore_without_the_history_copy_makes_the_box_history_consistent_and_says_so(
    db, lanner, settings, files, tmp_path
):
    generate_clicks(db, 300, 2, campaigns=3, seed=3)
    history_only = pruned_old_clicks(db, files, 400, seed=4)
    older = tmp_path / "older.duckdb"  # The box's history as it was at the backup, for the second case.
    older.write_bytes(files.path.read_bytes())
    target = tmp_path / "copy.db"
    lanner("backup", str(target))
    history_copy_path(target).rename(tmp_path / "elsewhere.duckdb")  # A backup without its history.
    with sqlite3.connect(target) as copy:
        (trusted,) = copy.execute("SELECT position FROM history_state").fetchone()
    # The box goes on: more clicks, copied; its history is now ahead of the backup.
    generate_clicks(db, 200, 1, campaigns=3, seed=5)
    append_history(db, files)
    ahead = history_position(files)
    assert ahead > trusted
    db.close()
    restored = lanner("restore", "--yes", str(target)).stdout
    assert "The backup has no click history beside it (copy.db.history.duckdb)." in restored
    assert (
        f"The click history here was ahead of the backup (up to click {ahead}; the restored database "
        f"trusts it up to click {trusted}): the {ahead - trusted:,} clicks after that were taken out of it"
        in restored
    )
    assert history_position(files) == trusted
    assert history_only <= history_subids(files.path, files.memory_limit)  # Kept: only it has them.
    append_history(db, files)
    assert verify_history(db, files).is_consistent

    # A box whose history is older than the backup (replaced by an old copy): trusted only up to its
    # position; the clicks after it that retention had deleted are named as lost.
    generate_clicks(db, 100, 1, campaigns=3, seed=6)
    later_old = pruned_old_clicks(db, files, 300, seed=7)
    newer = tmp_path / "newer.db"
    lanner("backup", str(newer))
    history_copy_path(newer).unlink()
    files.path.write_bytes(older.read_bytes())
    db.close()
    restored = lanner("restore", "--yes", str(newer)).stdout
    assert "The click history here is older than the backup (up to click" in restored
    lost = [line for line in restored.splitlines() if line.startswith("Up to ")]
    assert (
        lost and f"Up to {len(later_old):,} clicks created before " in lost[0] and "they are lost" in lost[0]
    )
    assert HistoryStore(db.connection()).state()[0] == history_position(files)
    append_history(db, files)  # The gap copied again from the restored database.
    assert verify_history(db, files).is_consistent
    assert not later_old & history_subids(files.path, files.memory_limit)


def test_a_history_that_cannot_be_read_or_is_not_the_backups_own_is_named(
    db, lanner, settings, files, tmp_path
):
    generate_clicks(db, 200, 2, campaigns=2, seed=8)
    append_history(db, files)
    target = tmp_path / "copy.db"
    lanner("backup", str(target))
    generate_clicks(db, 20, 1, campaigns=2, seed=9)
    append_history(db, files)
    # Another history put beside the backup (the box's, newer): refused before anything is replaced.
    history_copy_path(target).write_bytes(files.path.read_bytes())
    db.close()
    refused = lanner("restore", "--yes", str(target), check=False)
    assert refused.returncode == 1
    assert f"{history_copy_path(target)} is not the click history taken with this backup" in refused.stderr
    assert count(settings.database_path) == 220  # The database was not replaced.
    # A damaged history: the database is backed up all the same, and the output says why it alone.
    files.path.write_bytes(b"\0" * 50_000)
    damaged = tmp_path / "damaged.db"
    out = lanner("backup", str(damaged)).stdout
    assert "The click history was not backed up: The click history" in out and "cannot be read" in out
    assert damaged.exists() and not history_copy_path(damaged).exists()
