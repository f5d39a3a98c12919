"""Is anything landing? The flusher's heartbeat, `lanner status`'s consumer line, `/healthz` degraded.

`/healthz` is asked of an in-process app (`start_app`: create_app() called here, no socket); the consumer it
judges is a real `lanner worker` process, started and stopped.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from conftest import click, request, wait_until

from models.admin.services import create_campaign
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from workers.runtime.heartbeat import STALE_AFTER, Heartbeat, consumer_status, heartbeat_path, read_heartbeat
from workers.runtime.procfs import process_start_time


def status_json(lanner) -> dict:
    return json.loads(lanner("status", "--json").stdout)


def health(app, query: str = "") -> tuple[int, dict]:
    status, _, body = request(app, "/healthz" + query)
    return status, json.loads(body)


def test_a_stopped_consumer_is_dead_in_status_and_strict_health_answers_503(
    lanner, start_app, start_consumer
):
    lanner("campaign", "create", "H", "--alias", "h", "--offer-url", "https://offer.example/?c={subid}")
    app = start_app()
    status, body = health(app)  # Never a consumer here: degraded, but still a 200.
    assert status == 200 and body["status"] == "degraded" and body["consumer"]["state"] == "missing"
    assert health(app, "?strict=1")[0] == 503
    assert status_json(lanner)["consumer"]["state"] == "missing"

    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    assert click(app, "h")[0] == 302

    def running():
        shown = status_json(lanner)["consumer"]
        return shown if shown["state"] == "ok" and shown["last_landed_s_ago"] is not None else None

    shown = wait_until(running, 30, "the consumer's heartbeat with a landed flush")
    assert shown["pid"] == consumer.process.pid and shown["alive"] and shown["problems"] == []
    assert shown["heartbeat_s_ago"] < STALE_AFTER and shown["lag_s"] == 0.0
    status, body = health(app, "?strict=1")
    assert status == 200 and body["status"] == "ok", body
    assert f"consumer: ok, pid {consumer.process.pid} alive" in lanner("status").stdout

    consumer.stop(sig=2, timeout=30)
    shown = status_json(lanner)["consumer"]
    assert (shown["state"], shown["alive"], shown["pid"]) == ("dead", False, consumer.process.pid)
    status, body = health(app, "?strict=1")
    assert status == 503 and body["status"] == "degraded"
    gone = f"the consumer (pid {consumer.process.pid}) is not running: nothing lands in the database"
    assert body["consumer"]["problems"] == [gone]
    text = lanner("status").stdout
    assert f"consumer: dead, pid {consumer.process.pid} not running" in text and "  ! the consumer" in text
    assert request(app, "/healthz?strict=perhaps")[0] == 400


def test_heartbeat_states_from_the_file(db, settings, tmp_path):
    path = heartbeat_path(settings.data_dir)
    clock = [1_700_000_000.0]  # 2023: long ago.
    beat = Heartbeat(path, clock=lambda: clock[0])
    beat.attempt()
    written = read_heartbeat(path)
    assert written["pid"] == os.getpid() and written["attempt_at"] == clock[0]
    assert written["landed_at"] is None and path.stat().st_size == 256

    class Result:
        inserted, duplicates, rejected = 3, 0, 0

    clock[0] += 0.5
    beat.on_batch(Result)  # Within the second: not written yet.
    assert read_heartbeat(path)["landed_at"] is None
    clock[0] += 0.6
    beat.attempt()
    assert read_heartbeat(path)["landed_at"] == 1_700_000_000.5

    def judged():
        return consumer_status(settings.data_dir, db, settings.spool_dir, backlog_alert_seconds=60)

    # This process, beating long ago: alive but stuck.
    assert judged()["state"] == "stale" and judged()["alive"]
    fresh = Heartbeat(path)
    fresh.attempt()
    assert judged()["state"] == "ok" and judged()["problems"] == []
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    record = read_heartbeat(path)
    record.update(pid=int(gone.stdout), start=process_start_time(os.getpid()))
    path.write_text(json.dumps(record))
    assert judged()["state"] == "dead" and not judged()["alive"]
    path.write_bytes(b"\0" * 256)  # Unreadable: as if none.
    assert judged()["state"] == "missing"


def test_an_old_unflushed_click_degrades_health_and_the_workers_warn(
    db, settings, make_tracker, clock, caplog
):
    create_campaign(db, "T", "t", offer_url="https://offer.example/?c={subid}")
    tracker = make_tracker(backlog_alert_seconds=60)
    tracker.track(tracker.campaign("t"), Visit(ip="198.51.100.1", user_agent="UA"))
    with caplog.at_level(logging.WARNING, logger="models.clicks.tracker"):
        clock.advance(30)
        tracker.refresh()
        assert "oldest click" not in caplog.text
        clock.advance(31)
        tracker.refresh()
    assert "the oldest click not in the database yet is 61 s old (1 held by this worker)" in caplog.text
    Heartbeat(heartbeat_path(settings.data_dir), clock=clock).attempt()  # Runs, but lands nothing.
    shown = consumer_status(settings.data_dir, db, settings.spool_dir, backlog_alert_seconds=60, now=clock())
    assert shown["lag_s"] == 61.0 and shown["state"] == "ok"
    assert shown["problems"] == ["the oldest click not in the database yet is 61 s old"]
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    shown = consumer_status(settings.data_dir, db, settings.spool_dir, backlog_alert_seconds=60, now=clock())
    assert shown["lag_s"] == 0.0 and shown["problems"] == []
