"""Is anything landing? The flusher's heartbeat, `lanner status`'s consumer line, `/healthz` degraded.

`/healthz` is asked of an in-process app (`start_app`: create_worker_app() here, no socket); the consumer it
judges is a real `lanner worker` process, started and stopped. Near the open-file limit it is asked of a
real `lanner serve` whose web worker has its limit lowered (prlimit) and its descriptors held by idle
connections.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
from types import SimpleNamespace

import falcon
import pytest
from conftest import REQUEST_SECONDS, START_SECONDS, click, request, wait_until
from falcon.testing import TestClient
from test_click_http import web_workers

from models.admin.services import create_campaign
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from routes.health import DatabaseHealthResource, HealthResource
from workers.runtime.heartbeat import (
    STALE_AFTER,
    ConsumerWatch,
    Heartbeat,
    consumer_status,
    heartbeat_path,
    read_heartbeat,
)
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


def open_descriptors(pid: str) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def accept_queue(port: int) -> int:
    """Connections waiting for an accept() on 127.0.0.1:`port` (a listening socket's rx_queue in
    /proc/net/tcp): 0 once the worker has taken every connection made."""
    with open("/proc/net/tcp") as table:
        lines = table.read().splitlines()[1:]
    for line in lines:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if state == "0A" and int(local.split(":")[1], 16) == port:  # 0A: LISTEN.
            return int(queues.split(":")[1], 16)
    raise AssertionError(f"nothing listens on port {port}")


def test_healthz_never_answers_500_at_a_workers_open_file_limit_while_clicks_are_fine(
    lanner, start_server, start_consumer
):
    """Issue 32: idle connections hold every descriptor of the web worker but one, which the request for
    /healthz takes, so opening any file fails with EMFILE. It opened the heartbeat, /proc and a spool
    segment on each request, and the segment's EMFILE was a 500. It answers from open descriptors now."""
    lanner("campaign", "create", "Fd", "--alias", "fd", "--offer-url", "https://offer.example/?c={subid}")
    server = start_server(workers=1, LANNER_KEEPALIVE_TIMEOUT="600")
    start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    assert click(server.port, "fd")[0] == 302

    def consumer_ok() -> bool:
        status, _, body = request(server.port, "/healthz?strict=1")
        return status == 200 and json.loads(body)["status"] == "ok"

    wait_until(consumer_ok, START_SECONDS, "/healthz to see the consumer landing", lambda: server.log)
    [worker] = web_workers(server.process.pid)
    limit = open_descriptors(worker) + 16
    subprocess.run(["prlimit", "--pid", worker, f"--nofile={limit}:{limit}"], check=True)
    held: list[socket.socket] = []

    def hold_all_but_one() -> None:
        """Connections until the worker has one descriptor left (one at a time: one past the limit would
        wait in the backlog ahead of the request). Out of them, it shuts idle ones: counted again.

        Each is waited for until accepted, by the listening socket's queue: the worker's count of
        descriptors may not move (it accepted one and shut an idle one between two looks)."""
        while open_descriptors(worker) < limit - 1:
            held.append(socket.create_connection(("127.0.0.1", server.port), timeout=REQUEST_SECONDS))
            wait_until(lambda: accept_queue(server.port) == 0, REQUEST_SECONDS, "the worker to accept")

    answers = []
    try:
        for n in range(8):
            for path in ("/healthz", "/healthz?strict=1"):
                hold_all_but_one()
                status, headers, body = request(server.port, path)
                assert status == 200 and headers["cache-control"] == "no-store", (path, body, server.log)
                answers.append(json.loads(body))
            hold_all_but_one()
            status, headers, _ = click(server.port, "fd", ua=f"Near the limit {n}")
            assert status == 302 and "c=" in headers["location"], server.log
    finally:
        for sock in held:
            sock.close()
    for shown in answers:
        assert shown["status"] == "ok" and shown["consumer"]["state"] == "ok", shown
        assert "checked_s_ago" not in shown["consumer"], shown  # Looked at now, with no new descriptor.
    assert "Traceback" not in server.log


def test_an_emfile_once_answers_from_the_last_look_and_a_lasting_one_says_the_consumer_cannot_be_checked(
    make_tracker, settings, clock
):
    Heartbeat(heartbeat_path(settings.data_dir), clock=clock).attempt()  # This process, beating now.
    is_out = [False]

    def lag(now: float) -> float:
        if is_out[0]:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return 0.0

    watch = ConsumerWatch(settings.data_dir, lag, backlog_alert_seconds=60, clock=clock)
    app = falcon.App()
    app.add_route("/healthz", HealthResource(make_tracker(), watch))
    client = TestClient(app)
    first = client.simulate_get("/healthz", params={"strict": "1"})
    assert first.status_code == 200 and first.json["consumer"]["state"] == "ok"
    is_out[0] = True
    clock.advance(5)
    again = client.simulate_get("/healthz", params={"strict": "1"})  # A load balancer's next poll.
    assert again.status_code == 200
    assert again.json["consumer"] == {**first.json["consumer"], "checked_s_ago": 5.0}
    clock.advance(STALE_AFTER)
    lasting = client.simulate_get("/healthz", params={"strict": "1"})
    assert lasting.status_code == 503 and lasting.json["consumer"]["state"] == "unknown"
    assert lasting.json["consumer"]["problems"] == [
        "the consumer cannot be checked from this worker: Too many open files"
    ]
    assert client.simulate_get("/healthz").status_code == 200  # Still taking clicks: in rotation.
    is_out[0] = False
    Heartbeat(heartbeat_path(settings.data_dir), clock=clock).attempt()
    assert client.simulate_get("/healthz", params={"strict": "1"}).json["consumer"]["state"] == "ok"


def test_a_database_that_does_not_answer_degrades_a_web_worker_and_is_the_admin_worker_s_503():
    class Unreachable:  # A connection that cannot be (re)opened: EMFILE under SQLite's open().
        def execute(self, *args):
            raise sqlite3.OperationalError("unable to open database file")

        def connection(self):
            return self

    tracker = SimpleNamespace(conn=Unreachable(), campaigns={}, index=[], shared=None)
    app = falcon.App()
    app.add_route("/healthz", HealthResource(tracker, lambda: {"problems": []}))  # type: ignore[arg-type]
    app.add_route("/admin/healthz", DatabaseHealthResource(Unreachable()))
    client = TestClient(app)
    # The web worker still takes every click into its spool: in rotation, and it says why it is degraded.
    web = client.simulate_get("/healthz")
    assert web.status_code == 200 and web.json["status"] == "degraded"
    assert web.json["database"] == "does not answer: unable to open database file"
    strict = client.simulate_get("/healthz", params={"strict": "1"})
    assert strict.status_code == 503 and strict.json["database"] == web.json["database"]
    admin = client.simulate_get("/admin/healthz")
    assert admin.status_code == 503 and admin.headers["retry-after"] == "5"
    assert admin.json == {
        "title": "Unhealthy",
        "description": "This worker's database does not answer: unable to open database file.",
    }


def test_while_the_database_does_not_answer_the_consumer_is_judged_by_its_heartbeat(settings, clock):
    Heartbeat(heartbeat_path(settings.data_dir), clock=clock).attempt()  # This process, beating now.

    def lag(now: float) -> float:
        raise sqlite3.OperationalError("unable to open database file")

    watch = ConsumerWatch(
        settings.data_dir, lag, backlog_alert_seconds=60, clock=clock, outage_lag=lambda now: 75.0
    )
    shown = watch()
    assert (shown["state"], shown["lag_s"]) == ("ok", 75.0)
    assert shown["problems"] == ["the oldest click not in the database yet is 75 s old"]
    without = ConsumerWatch(settings.data_dir, lag, backlog_alert_seconds=60, clock=clock)
    with pytest.raises(sqlite3.OperationalError):  # The caller's then (HealthResource: unknown).
        without()
