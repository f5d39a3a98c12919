"""`lanner status` against a running tracker and a stopped one."""

from __future__ import annotations

import json
import time

from conftest import click


def test_status_shows_workers_spool_queue_and_database(lanner, start_server, start_consumer):
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", "https://offer.example/?click={subid}")
    stopped = json.loads(lanner("status", "--json").stdout)
    assert stopped["web"] == {"running": False}
    server = start_server(workers=2)
    start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    for n in range(5):
        click(server.port, "s", ua=f"status {n}")
    deadline = time.monotonic() + 15
    while True:
        status = json.loads(lanner("status", "--json").stdout)
        if status["spool"]["pending_clicks"] == 0 and status["spool"]["last_flush_s_ago"] is not None:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    web = status["web"]
    assert web["running"] and web["master_pid"] == server.process.pid
    assert len(web["workers"]) == 2 and all(worker["rss_mb"] > 0 for worker in web["workers"])
    assert status["spool"]["last_flush_s_ago"] < 15
    assert status["database"]["size_bytes"] > 0
    assert status["queue"]["pending_tasks"] >= 0
    text = lanner("status").stdout
    assert f"web: master {server.process.pid}" in text and "spool: pending_clicks 0" in text
    server.stop()
    assert json.loads(lanner("status", "--json").stdout)["web"]["running"] is False
