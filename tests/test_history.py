"""The columnar click history (models/reporting/history.py, docs/analytics.md): every landed click copied
once into DuckDB, whatever kills the append; mutations copied again; status, verify and rebuild; a lost
or damaged file made again from the row store. Both backends, real files."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading

import pytest
from conftest import ROOT, run_lanner, wait_until

from models.reporting.history import (
    HistoryFiles,
    append_history,
    columnar,
    rebuild_history,
    verify_history,
)
from models.store.clicks import ClickStore
from models.store.conversions import ConversionStore
from models.store.costs import CostStore
from models.store.database import connect, write_tx
from models.store.duckdb.connection import open_history
from models.store.duckdb.history import HISTORY_COLUMNS
from models.store.generated import GeneratedStore
from models.store.history import HistoryStore
from models.store.meta import MetaStore
from models.tables.click import CLICK_COLUMNS, SUBID
from workers.bench.generate import generate_clicks

END_MS = 1_800_000_000_000


@pytest.fixture
def files(settings) -> HistoryFiles:
    return HistoryFiles(settings.history_path, settings.history_memory_limit)


def history_rows(files: HistoryFiles) -> list[tuple]:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return conn.execute(f"SELECT {', '.join(HISTORY_COLUMNS)} FROM click ORDER BY id").fetchall()


def row_store_rows(db) -> list[tuple]:
    store = HistoryStore(db.connection())
    return columnar(store.rows_after(0, store.max_id(), 10**9))


def test_append_copies_every_click_exactly_once(db, files):
    generate_clicks(db, 2_000, 2, campaigns=3, seed=1, end_ms=END_MS)
    result = append_history(db, files, chunk=300)
    assert result.copied == 2_000
    assert history_rows(files) == row_store_rows(db)  # Every column, NULLs and empty texts as they are.
    assert HistoryStore(db.connection()).state()[0] == HistoryStore(db.connection()).max_id()
    generate_clicks(db, 500, 1, campaigns=3, seed=2, end_ms=END_MS + 3_600_000)
    assert append_history(db, files, chunk=300).copied == 500
    assert append_history(db, files, chunk=300).copied == 0
    assert history_rows(files) == row_store_rows(db)


def test_a_kill_between_a_chunks_duckdb_commit_and_the_row_store_neither_loses_nor_duplicates(db, files):
    generate_clicks(db, 1_000, 1, campaigns=2, seed=3, end_ms=END_MS)

    def killed(copied: int, reached: int, watermark: int) -> None:
        if copied >= 400:
            raise KeyboardInterrupt  # After DuckDB committed the chunk, before the row store moved.

    with pytest.raises(KeyboardInterrupt):
        append_history(db, files, chunk=200, on_chunk=killed)
    trusted = HistoryStore(db.connection()).state()[0]
    assert 0 < trusted < len(history_rows(files))  # DuckDB ahead of what readers trust, never behind.
    result = append_history(db, files, chunk=200)
    assert result.copied == 600
    assert history_rows(files) == row_store_rows(db)
    assert HistoryStore(db.connection()).state()[0] == HistoryStore(db.connection()).max_id()


def first_click_ids(db, count: int) -> list[int]:
    return [row[0] for row in HistoryStore(db.connection()).rows_after(0, 10**12, count)]


def test_mutations_after_a_copy_are_copied_again_by_the_next_append(db, files):
    generate_clicks(db, 300, 1, campaigns=2, seed=4, end_ms=END_MS)
    lp_id, cost_id, sub_id = first_click_ids(db, 3)
    conn = db.connection()
    with write_tx(db):  # A click sent to a lander (before the copy: the click is landed so).
        conn.execute("UPDATE click SET lander_id = 1 WHERE id = ?", (lp_id,)).close()
    subid = conn.execute("SELECT subid FROM click WHERE id = ?", (lp_id,)).fetchone()[0]
    append_history(db, files)
    with write_tx(db):
        assert len(ClickStore(conn).land_lp_clicks([(subid, END_MS + 5, 77)], END_MS + 5)) == 1
        CostStore(conn).set_costs([(1.25, cost_id)])
        ConversionStore(conn).set_sub_id(sub_id, 7, "zone-42")
    assert HistoryStore(conn).pending() == 3
    result = append_history(db, files)
    assert (result.copied, result.recopied) == (0, 3)
    assert HistoryStore(conn).pending() == 0
    assert history_rows(files) == row_store_rows(db)
    by_id = {row[0]: row for row in history_rows(files)}
    assert by_id[lp_id][HISTORY_COLUMNS.index("offer_id")] == 77
    assert by_id[lp_id][HISTORY_COLUMNS.index("lp_clicked_at")] == END_MS + 5
    assert by_id[cost_id][HISTORY_COLUMNS.index("cost")] == 1.25
    assert by_id[sub_id][HISTORY_COLUMNS.index("sub_id_7")] == "zone-42"


def test_a_click_not_copied_yet_is_not_queued_it_is_copied_fresh(db, files):
    generate_clicks(db, 50, 1, campaigns=1, seed=5, end_ms=END_MS)
    (click_id,) = first_click_ids(db, 1)
    with write_tx(db):
        ConversionStore(db.connection()).set_sub_id(click_id, 2, "late")
    assert HistoryStore(db.connection()).pending() == 0
    append_history(db, files)
    assert history_rows(files) == row_store_rows(db)


def test_a_mutation_while_the_appender_copies_a_click_again_stays_queued(db, files):
    generate_clicks(db, 50, 1, campaigns=1, seed=6, end_ms=END_MS)
    (click_id,) = first_click_ids(db, 1)
    append_history(db, files)
    store = HistoryStore(db.connection())
    with write_tx(db):
        ConversionStore(db.connection()).set_sub_id(click_id, 3, "first")
    seen = store.changes(0, 10**12, 100)  # What the appender read and copied...
    with write_tx(db):  # ...then a newer mutation, before it forgets what it copied.
        ConversionStore(db.connection()).set_sub_id(click_id, 3, "second")
    with write_tx(db):
        store.forget(seen)
    assert store.pending() == 1
    append_history(db, files)
    assert store.pending() == 0
    assert {row[0]: row for row in history_rows(files)}[click_id][
        HISTORY_COLUMNS.index("sub_id_3")
    ] == "second"


def test_a_mutation_during_an_append_is_copied_again(db, files):
    generate_clicks(db, 600, 1, campaigns=1, seed=7, end_ms=END_MS)
    (click_id,) = first_click_ids(db, 1)

    def mutate(copied: int, reached: int, watermark: int) -> None:
        if copied == 200:  # The click is in DuckDB, the row store's position not moved yet.
            with write_tx(db):
                CostStore(db.connection()).set_costs([(9.5, click_id)])

    append_history(db, files, chunk=200, on_chunk=mutate)
    assert history_rows(files) == row_store_rows(db)
    assert HistoryStore(db.connection()).pending() == 0


# PostgreSQL's ids are not in commit order; SQLite has one writer.
@pytest.mark.postgresql_only
def test_postgres_an_inserter_open_past_the_watermark_read_is_not_skipped(db, files, settings, backend):
    generate_clicks(db, 20, 1, campaigns=1, seed=8, end_ms=END_MS)
    template = list(
        db.connection().execute(f"SELECT {', '.join(CLICK_COLUMNS)} FROM click LIMIT 1").fetchone()
    )
    slow = connect(settings.database_url)
    try:
        slow_tx = slow.atomic()
        slow_tx.__enter__()  # A flusher's transaction: its click takes an id, then it waits.
        held = [*template[:SUBID], "held-open", *template[SUBID + 1 :]]
        GeneratedStore(slow.connection()).insert_clicks([tuple(held)], True)
        with write_tx(db):  # Another node's click: a higher id, committed first.
            later = [*template[:SUBID], "committed-later", *template[SUBID + 1 :]]
            GeneratedStore(db.connection()).insert_clicks([tuple(later)], True)
        results: list = []
        appender = threading.Thread(target=lambda: results.append(append_history(db, files)))
        appender.start()
        waiting = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        wait_until(
            lambda: not appender.is_alive() or db.connection().execute(waiting).fetchone()[0] == 1,
            60,
            "the appender to wait for the open transaction (or to finish without it)",
        )
        slow_tx.__exit__(None, None, None)  # Commit.
        appender.join(60)
    finally:
        slow.close()
    append_history(db, files)  # Without the lock the held click's id is below the position by now: lost.
    assert results and results[0].copied == 22
    assert history_rows(files) == row_store_rows(db)


def test_a_deleted_history_is_made_again_from_the_row_store(db, files, caplog):
    generate_clicks(db, 400, 1, campaigns=2, seed=9, end_ms=END_MS)
    append_history(db, files)
    files.path.unlink()
    with caplog.at_level(logging.WARNING):
        result = append_history(db, files)
    assert (result.restarted_from, result.copied) == (0, 400)
    assert "every click is still in the row store" in caplog.text
    assert history_rows(files) == row_store_rows(db)


def test_a_damaged_history_is_moved_aside_and_made_again_saying_what_is_lost(db, files, caplog):
    generate_clicks(db, 400, 1, campaigns=2, seed=10, end_ms=END_MS)
    append_history(db, files)
    files.path.write_bytes(b"not a duckdb file" * 1000)
    with write_tx(db):
        MetaStore(db.connection()).move_pruned_before(END_MS - 86_400_000)
    with caplog.at_level(logging.WARNING):
        result = append_history(db, files)
    assert result.copied == 400 and result.lost == 0
    # The cutoff moved, but every click is still in the row store: nothing is lost, and it says so.
    assert "were pruned from the row store, but none after the file's position" in caplog.text
    assert list(files.path.parent.glob("clicks.duckdb.damaged-*"))
    assert history_rows(files) == row_store_rows(db)


def test_verify_catches_a_lost_row_and_repair_copies_its_hour_again(db, files):
    generate_clicks(db, 500, 1, campaigns=2, seed=11, end_ms=END_MS)
    append_history(db, files)
    assert verify_history(db, files).mismatches == []
    with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
        conn.execute("DELETE FROM click WHERE id = (SELECT MIN(id) FROM click)")
    result = verify_history(db, files)
    assert len(result.mismatches) == 1
    assert result.mismatches[0].history_clicks == result.mismatches[0].row_clicks - 1
    assert verify_history(db, files, repair=True).repaired == 1
    assert verify_history(db, files).mismatches == []
    assert history_rows(files) == row_store_rows(db)


def test_analytics_commands_status_verify_and_rebuild(db, lanner, files):
    generate_clicks(db, 300, 1, campaigns=2, seed=12, end_ms=END_MS)
    missing = json.loads(lanner("analytics", "status", "--json").stdout)
    assert (missing["state"], missing["lag_clicks"]) == ("missing", 300)
    append_history(db, files)
    status = json.loads(lanner("analytics", "status", "--json").stdout)
    assert status["state"] == "ok"
    assert (status["lag_clicks"], status["history_clicks"], status["pending_changes"]) == (0, 300, 0)
    assert status["bytes_per_click"] > 0
    assert "lag_clicks" in lanner("analytics", "status", "--csv").stdout
    assert "matches the row store" in lanner("analytics", "verify").stdout

    with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
        conn.execute("DELETE FROM click WHERE id = (SELECT MAX(id) FROM click)")
    failed = lanner("analytics", "verify", check=False)
    assert failed.returncode == 1
    assert "differs from the row store in 1 of" in failed.stderr

    files.path.write_bytes(b"\0" * 100_000)  # A damaged file.
    broken = lanner("analytics", "verify", check=False)
    assert broken.returncode == 1
    assert "cannot be read" in broken.stderr and "lanner analytics rebuild" in broken.stderr

    rebuilt = lanner("analytics", "rebuild").stdout
    assert "Rebuilt the history: 300 clicks from" in rebuilt
    assert "matches the row store" in lanner("analytics", "verify").stdout
    assert history_rows(files) == row_store_rows(db)


def test_rebuild_keeps_serving_the_old_file_until_the_new_one_is_whole(db, files):
    generate_clicks(db, 300, 1, campaigns=2, seed=13, end_ms=END_MS)
    append_history(db, files)
    seen = []

    def look(copied: int, reached: int, watermark: int) -> None:
        seen.append(len(history_rows(files)))  # A reader during the rebuild reads the old file, whole.

    result = rebuild_history(db, files, chunk=100, on_chunk=look)
    assert result.clicks == 300 and seen == [300, 300, 300]
    assert history_rows(files) == row_store_rows(db)


def test_the_click_path_never_imports_duckdb():
    probe = "import sys, routes.click, workers.runtime.tasks; assert 'duckdb' not in sys.modules, 'duckdb'"
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True, env={"PYTHONPATH": str(ROOT)})


def rounded(rows: list[dict]) -> list[dict]:
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()} for row in rows]


def test_a_history_report_sums_duckdb_and_the_row_stores_tail_as_raw_does(db, files):
    from models.reporting.reports import ReportQuery, run_report

    generate_clicks(db, 800, 2, campaigns=3, seed=14, end_ms=END_MS)
    append_history(db, files)
    generate_clicks(db, 300, 1, campaigns=3, seed=15, end_ms=END_MS + 3_600_000)  # Past the position.
    first = first_click_ids(db, 5)
    with write_tx(db):  # Copied clicks mutated since: queued, read from the row store.
        CostStore(db.connection()).set_costs([(2.5, click_id) for click_id in first])
        ConversionStore(db.connection()).set_sub_id(first[0], 4, "moved")

    def same() -> None:
        for group_by in (
            ("campaign",),
            ("hour", "country"),
            ("sub_id_4",),
            ("referrer_domain",),
            ("lander",),
        ):
            shape = dict(group_by=group_by, preset="all_time")
            columnar = run_report(db, ReportQuery(source="history", **shape), history=files)
            raw = run_report(db, ReportQuery(source="raw", **shape))
            assert rounded(columnar.rows) == rounded(raw.rows), group_by
            assert rounded([columnar.total]) == rounded([raw.total])

    same()
    append_history(db, files)
    assert HistoryStore(db.connection()).pending() == 0
    same()


def test_the_worker_task_appends_and_makes_a_damaged_file_again_on_one_node_only(db, settings, files, caplog):
    from workers.runtime.tasks import create_huey

    generate_clicks(db, 200, 1, campaigns=1, seed=16, end_ms=END_MS)
    huey = create_huey(settings, immediate=True)
    huey.append_history()
    assert history_rows(files) == row_store_rows(db)
    files.path.write_bytes(b"damaged" * 5000)
    with caplog.at_level(logging.WARNING):
        huey.append_history()
    assert "cannot be read" in caplog.text and "every click is still in the row store" in caplog.text
    assert history_rows(files) == row_store_rows(db)
    # Cluster mode: only LANNER_HISTORY_NODE's worker appends, in its own sweeps' thread: a task on the
    # cluster's shared queue could be taken by another node's consumer, which has no such file.
    from workers.runtime.tasks import node_jobs

    cluster = settings.replace(redis_url="redis://127.0.0.1:1/0", node_id="b", history_node="a")
    assert not cluster.keeps_history and cluster.replace(node_id="a").keeps_history
    assert not cluster.replace(history_node="").keeps_history
    assert "append_history" not in {name for name, _, _ in node_jobs(cluster)}
    jobs = {name: job for name, _, job in node_jobs(cluster.replace(node_id="a"))}
    generate_clicks(db, 50, 1, campaigns=1, seed=19, end_ms=END_MS + 60_000)
    jobs["append_history"]()
    assert history_rows(files) == row_store_rows(db)


def test_readers_in_other_processes_never_meet_the_appender_inside_duckdb(db, files, env):
    """`lanner analytics verify` runs in its own processes while the appender writes chunk after chunk:
    the flock protocol keeps DuckDB's own file lock from refusing either, and every verify, reading both
    stores under the shared lock, finds them consistent."""
    generate_clicks(db, 300, 1, campaigns=2, seed=17, end_ms=END_MS)
    append_history(db, files)
    # Eleven chunks of 100, a verify finished between each two (3,000 in chunks of 100, one verify each
    # three chunks, only made each verify read more).
    generate_clicks(db, 1_100, 1, campaigns=2, seed=18, end_ms=END_MS + 3_600_000)
    outcomes: list[subprocess.CompletedProcess] = []
    appending = threading.Event()

    def read_meanwhile() -> None:
        appending.wait(60)
        while appending.is_set():
            outcomes.append(run_lanner(env, "analytics", "verify", check=False))

    reader = threading.Thread(target=read_meanwhile)
    reader.start()

    def slowly(copied: int, reached: int, watermark: int) -> None:
        appending.set()
        if copied < 1_100:
            wait_until(lambda: len(outcomes) >= copied // 100, 60, "a verify between chunks")

    try:
        append_history(db, files, chunk=100, on_chunk=slowly)
    finally:
        appending.clear()
        reader.join(120)
    assert len(outcomes) >= 10
    assert [(o.returncode, o.stderr) for o in outcomes if o.returncode != 0] == []
    assert history_rows(files) == row_store_rows(db)


def test_a_real_worker_keeps_the_history(db, env, start_consumer, files):
    generate_clicks(db, 500, 1, campaigns=2, seed=19, end_ms=END_MS)
    worker = start_consumer()

    def caught_up() -> bool:
        status = json.loads(run_lanner(env, "analytics", "status", "--json").stdout)
        return status["state"] == "ok" and status["lag_clicks"] == 0

    wait_until(caught_up, 120, "the worker's first append", lambda: worker.log)
    assert history_rows(files) == row_store_rows(db)
