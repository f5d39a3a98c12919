"""`lanner backup` while clicks flow, and `lanner restore` of what it wrote: SQLite's files (on PostgreSQL
both refuse, pointing at pg_dump and pg_restore)."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time

import pytest
from conftest import click, run_lanner, subid_of, wait_until

pytestmark = pytest.mark.sqlite_only


def count(path) -> int:
    connection = sqlite3.connect(path)  # Closed, not just committed: restore refuses an open database.
    try:
        return connection.execute("SELECT count(*) FROM click").fetchone()[0]
    finally:
        connection.close()


def test_backup_while_serving_is_consistent_and_restores(
    db, lanner, start_server, start_consumer, settings, tmp_path
):
    lanner("campaign", "create", "B", "--alias", "b", "--offer-url", "https://offer.example/?click={subid}")
    lanner("generate", "clicks", "--count", "30000", "--days", "3", "--campaigns", "3", "--seed", "1")
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
        while count(settings.database_path) <= 30000 and time.monotonic() < deadline:
            time.sleep(0.1)
        target = tmp_path / "copy.db"
        out = lanner("backup", str(target)).stdout
        assert f"Backed up to {target}" in out
        backed_up = len(served)  # Some clicks served after the copy was taken: not in it.
        wait_until(lambda: len(served) > backed_up + 10, 60, "clicks after the backup", lambda: server.log)
    finally:
        stop.set()
        thread.join()
    with sqlite3.connect(target) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        in_copy = {row[0] for row in copy.execute("SELECT subid FROM click WHERE campaign_id = 1")}
    assert 30000 < count(target) < 30000 + len(served) + 1
    assert in_copy < set(served)  # A snapshot: some of the clicks served, not all of them.

    # Restore refuses while the tracker has the database open...
    refused = lanner("restore", "--yes", str(target), check=False)
    assert refused.returncode != 0 and "stop lanner serve and lanner worker first" in refused.stderr
    # ...and replaces it once they are stopped.
    assert server.stop() == 0
    assert consumer.stop(signal.SIGINT, timeout=30) == 0
    db.close()  # This test process had it open too.
    restored = lanner("restore", "--yes", str(target))
    assert "Restored" in restored.stdout and "was moved to" in restored.stdout
    assert count(settings.database_path) == count(target)
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


def test_backup_and_restore_refuse_on_postgresql_in_one_sentence(env, postgres_url, tmp_path):
    on_postgres = {**env, "LANNER_DATABASE_URL": postgres_url}
    backup = run_lanner(on_postgres, "backup", str(tmp_path / "copy.db"), check=False)
    assert backup.returncode == 1 and not (tmp_path / "copy.db").exists()
    assert backup.stderr.strip() == (
        "Error: This install's database is PostgreSQL: this command backs up a SQLite file; "
        "back up PostgreSQL with pg_dump."
    )
    copy = tmp_path / "old.db"
    copy.write_bytes(b"")
    restore = run_lanner(on_postgres, "restore", "--yes", str(copy), check=False)
    assert restore.returncode == 1
    assert restore.stderr.strip() == (
        "Error: This install's database is PostgreSQL: this command restores a SQLite file; "
        "restore PostgreSQL with pg_restore."
    )
