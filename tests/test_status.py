"""`lanner status` against a running tracker and a stopped one, and the geo file it reports."""

from __future__ import annotations

import json
import time

from conftest import click, request, run_lanner
from test_geo import write_city_database


def test_status_shows_workers_spool_queue_and_database(lanner, start_server, start_consumer):
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", "https://offer.example/?click={subid}")
    stopped = json.loads(lanner("status", "--json").stdout)
    assert stopped["web"] == {"running": False}
    assert stopped["geo"]["missing"] == "run `lanner geo build`"
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
    # The admin worker starts on demand (LANNER_ADMIN_IDLE_SECONDS): none until a request asks for it.
    assert sorted(worker["role"] for worker in web["workers"]) == ["web", "web"]
    assert request(server.extra["admin_port"], "/healthz")[0] == 200
    web = json.loads(lanner("status", "--json").stdout)["web"]
    assert sorted(worker["role"] for worker in web["workers"]) == ["admin", "web", "web"]
    assert all(worker["rss_mb"] > 0 for worker in web["workers"])
    assert status["spool"]["last_flush_s_ago"] < 15
    assert status["database"]["size_bytes"] > 0
    assert status["deferred"] == {"rollup_backfill": "done 100.0%"}  # The consumer ran it.
    assert status["postbacks"] == {"parked": 0, "outbound_pending": 0}
    text = lanner("status").stdout
    assert f"web: master {server.process.pid}" in text and "spool: pending_clicks 0" in text
    server.stop()
    assert json.loads(lanner("status", "--json").stdout)["web"]["running"] is False


def test_status_counts_the_tasks_waiting_in_the_queue(lanner, settings):
    from workers.runtime.tasks import create_huey

    huey = create_huey(settings)
    try:
        huey.send_postback(1)
        huey.send_postback(2)
        huey.send_postback.schedule(args=(3,), delay=3600)  # Queued; the consumer would schedule it.
    finally:
        huey.storage.close()
    assert json.loads(lanner("status", "--json").stdout)["queue"] == {
        "pending_tasks": 3,
        "scheduled_tasks": 0,
    }


def test_status_names_the_geo_file_and_its_build(lanner, tmp_path, env):
    path = write_city_database(tmp_path / "city.mmdb")
    status = json.loads(lanner("status", "--json").stdout)  # The default file: not built here.
    assert status["geo"]["path"].endswith("geo/country.mmdb") and "missing" in status["geo"]
    shown = json.loads(run_lanner({**env, "LANNER_GEO_DATABASE": str(path)}, "status", "--json").stdout)
    assert set(shown["geo"]) == {"path", "about", "data_date", "age_days", "source"}
    assert shown["geo"]["path"] == str(path) and shown["geo"]["age_days"] == 0
    assert shown["geo"]["about"].startswith("GeoLite2-City (GeoLite2 City test database), built ")
    (tmp_path / "broken.mmdb").write_bytes(b"nope")
    broken = json.loads(
        run_lanner({**env, "LANNER_GEO_DATABASE": str(tmp_path / "broken.mmdb")}, "status", "--json").stdout
    )
    assert "broken.mmdb" in broken["geo"]["error"]


def test_a_task_queued_by_the_release_before_the_store_seam_still_loads(settings):
    # Those releases registered the tasks in workers/tasks.py; Huey keys a message by module and name.
    from huey.registry import Message

    from workers.runtime.tasks import create_huey

    huey = create_huey(settings)
    try:
        old = Message("legacy-1", "workers.tasks.send_postback", None, 0, 0, None, (7,), {}, None, None)
        huey.storage.enqueue(huey.serializer.serialize(old))
        task = huey.dequeue()
        assert type(task) is type(huey.send_postback.s(7))
        assert task.args == (7,)
    finally:
        huey.storage.close()
