"""`lanner bench clicks` starts its first step only once the worker's first history append holds the
clicks already in the database (issue 28: on a data directory reused from run to run, that append of an
earlier run's clicks fell into the next run's first step and read as twice the worker's CPU a click)."""

from __future__ import annotations

import threading

import pytest

from models.reporting.history import HistoryFiles, append_history
from models.store.history import HistoryStore
from workers.bench.errors import BenchError
from workers.bench.generate import generate_clicks
from workers.bench.harness import landed_click_id, wait_history_caught_up


def test_the_bench_waits_until_the_history_holds_the_clicks_landed_before_it_started(db, settings):
    generate_clicks(db, 300, 1, campaigns=2, seed=28)
    location = settings.database_location
    landed = landed_click_id(location)
    assert landed == HistoryStore(db.connection()).max_id()
    with pytest.raises(BenchError, match=f"not up to {landed}"):  # Nothing appends: it says so.
        wait_history_caught_up(location, landed, deadline_seconds=0.2)

    files = HistoryFiles(settings.history_path, settings.history_memory_limit)
    failures: list[BaseException] = []

    def worker_append() -> None:  # As `lanner worker` does when it starts, in its own connection.
        try:
            db.connect(reuse_if_open=True)
            append_history(db, files, chunk=100)
        except BaseException as error:  # Seen by the test, not lost in the thread.
            failures.append(error)
        finally:
            db.close()

    appender = threading.Thread(target=worker_append)
    appender.start()
    try:
        wait_history_caught_up(location, landed, deadline_seconds=120)
    finally:
        appender.join(120)
    assert not failures
    assert HistoryStore(db.connection()).state()[0] >= landed
