"""Huey on Redis (LANNER_REDIS_URL): one queue for every node, cluster-wide sweeps once per tick, Redis's
health in `lanner status` (docs/SCALING.md, "Background work")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROOT, click, free_port, run_lanner, wait_until


class CountingServer:
    """A local HTTP server on port 0 that counts its requests and answers `body` (an outbound postback's
    target, a rate feed)."""

    def __init__(self, body: bytes = b"ok") -> None:
        self.body = body
        self.paths: list[str] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner.lock:
                    owner.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def hits(self) -> int:
        with self.lock:
            return len(self.paths)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def counting_server():
    servers: list[CountingServer] = []

    def start(body: bytes = b"ok") -> CountingServer:
        servers.append(CountingServer(body))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def cluster_env(env, redis_url, settings):
    """The test's environment with Redis: node `a` in the test's data directory."""
    return {**env, "LANNER_REDIS_URL": redis_url, "LANNER_REDIS_PREFIX": "t:", "LANNER_NODE_ID": "a"}


def second_node(env: dict[str, str], settings, tmp_path) -> dict[str, str]:
    """Node `b`: its own data directory (spool, geo files), the same database and Redis as node `a`."""
    data_dir = tmp_path / "node-b"
    data_dir.mkdir()
    node = {**env, "LANNER_DATA_DIR": str(data_dir), "LANNER_NODE_ID": "b"}
    if not settings.uses_postgres:
        node["LANNER_DATABASE_URL"] = f"sqlite:///{settings.database_path}"
    return node


def redis_client(url: str):
    import redis

    return redis.Redis.from_url(url)


def sweep_record(url: str, name: str) -> dict[str, str]:
    client = redis_client(url)
    try:
        return {k.decode(): v.decode() for k, v in client.hgetall(f"t:sweep:{name}").items()}
    finally:
        client.close()


def test_without_redis_the_queue_is_the_data_directorys_sqlite_file(settings):
    from huey import SqliteHuey

    from workers.runtime.tasks import create_huey

    huey = create_huey(settings)
    try:
        assert type(huey) is SqliteHuey and huey.storage.filename == str(settings.queue_path)
        assert hasattr(huey, "update_geo_data")  # The node's file sweeps are Huey's on one box.
    finally:
        huey.storage.close()


def test_a_scheduled_task_is_due_at_the_same_moment_for_nodes_in_any_timezone(
    redis_url, settings, monkeypatch
):
    import datetime
    import time

    from workers.runtime.redisqueue import create_redis_huey

    huey = create_redis_huey(settings.replace(redis_url=redis_url))
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # Huey's RedisStorage would score local time: 9 h early.
    time.tzset()
    try:
        # Huey's naive UTC time, scored as the Unix time it is.
        assert huey.storage.convert_ts(datetime.datetime(1970, 1, 2, 0, 0, 1, 500000)) == 86401.5
    finally:
        monkeypatch.undo()
        time.tzset()
        huey.storage.close()


def test_an_outbound_postback_queued_by_one_process_is_sent_by_a_nodes_consumer(
    db, cluster_env, start_consumer, counting_server
):
    from huey import RedisHuey

    from models.admin.services import create_campaign
    from models.clicks.record import new_subid
    from models.conversions.admin import add_target
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
    from models.tables.click import Click
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    target = counting_server()
    create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}")
    add_target(db, "demo", target.url + "/cb?s={subid}&st={status}", ["sale"])
    campaign_id = db.execute_sql("SELECT id FROM campaign").fetchone()[0]
    subid = new_subid()
    Click.create(
        subid=subid,
        created_at=1_800_000_000_000,
        campaign_id=campaign_id,
        stream_id=None,
        offer_id=None,
        ip="203.0.113.7",
        user_agent="UA",
        ua_hash=zlib.crc32(b"UA"),
    )
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    outcome = recorder.record(
        parse_postback({"subid": subid, "status": "sale"}), Received("GET", "127.0.0.1", "t")
    )
    (delivery_id,) = outcome.deliveries

    # Queued here (as a web worker of any node queues it), before any consumer runs.
    huey = create_huey(load_settings(cluster_env))
    try:
        assert isinstance(huey, RedisHuey)
        huey.send_postback(delivery_id)
        assert huey.pending_count() == 1
    finally:
        huey.storage.close()
    assert not (load_settings(cluster_env).queue_path).exists()  # No SQLite queue in cluster mode.

    worker = start_consumer(**cluster_env)
    wait_until(lambda: target.hits >= 1, 20, "the delivery to be sent", lambda: worker.log)
    assert target.paths == [f"/cb?s={subid}&st=sale"]
    client = redis_client(cluster_env["LANNER_REDIS_URL"])
    try:
        assert client.keys("huey*") == []  # Huey's keys are under the prefix, like every other of Lanner's.
        assert {key.split(b":")[0] for key in client.keys()} == {b"t"}
    finally:
        client.close()


def test_two_nodes_run_a_cluster_wide_sweep_once_per_tick(
    db, cluster_env, settings, tmp_path, start_consumer, counting_server
):
    feed = counting_server(json.dumps({"base": "USD", "rates": {"USD": 1, "EUR": 0.8}}).encode())
    node_b = second_node(cluster_env, settings, tmp_path)
    # Both nodes queue the rate refresh as they start: two copies of one tick, in one queue, two consumers.
    workers = [
        start_consumer(**{**cluster_env, "LANNER_EXCHANGE_RATE_URL": feed.url}),
        start_consumer(**{**node_b, "LANNER_EXCHANGE_RATE_URL": feed.url}),
    ]
    url = cluster_env["LANNER_REDIS_URL"]

    def both_copies_done() -> bool:
        record = sweep_record(url, "refresh_exchange_rates")
        return int(record.get("runs", 0)) + int(record.get("skipped", 0)) >= 2

    wait_until(
        both_copies_done,
        20,
        "both nodes' copies of the rate refresh",
        lambda: workers[0].log + workers[1].log,
    )
    record = sweep_record(url, "refresh_exchange_rates")
    logs = workers[0].log + workers[1].log  # Why a copy failed, should one have.
    assert record.get("runs") == "1" and record.get("node") in ("a", "b"), (record, logs)
    assert feed.hits == 1  # The feed was read once for the cluster, not once per node.
    from models.reporting.currency import list_rates

    assert [(row["currency"], row["rate"]) for row in list_rates(db)] == [("EUR", 1.25)]
    # Each node flushes its own spool: its own flusher lock in its own data directory.
    assert (settings.data_dir / "flusher.lock").exists()
    assert (tmp_path / "node-b" / "flusher.lock").exists() or wait_until(
        lambda: (tmp_path / "node-b" / "flusher.lock").exists(), 10, "node b's flusher"
    )


def test_a_sweep_runs_once_per_tick_and_gives_its_tick_back_when_it_fails(redis_url):
    from models.cluster.sweeps import ClusterSweeps

    client = redis_client(redis_url)
    a, b = ClusterSweeps(client, "t:", "a"), ClusterSweeps(client, "t:", "b")
    runs: list[str] = []
    assert a.run("demo", 30, lambda: runs.append("a"))
    assert not b.run("demo", 30, lambda: runs.append("b"))  # The same tick, another node's copy.
    assert runs == ["a"]

    def fails() -> None:
        raise RuntimeError("the database is away")

    with pytest.raises(RuntimeError):
        a.run("other", 30, fails)
    assert b.run("other", 30, lambda: runs.append("b"))  # The failed tick was given back.
    assert runs == ["a", "b"]
    assert not client.exists("t:sweep:demo:lock") and not client.exists("t:sweep:other:lock")
    assert a.last_runs(["demo"])["demo"]["last_node"] == "a"
    client.close()


def test_a_sweep_lock_is_its_holders_and_a_killed_holders_lock_expires(redis_url):
    from models.cluster.sweeps import ClusterSweeps, SweepLock

    client = redis_client(redis_url)
    first, second = SweepLock(client, "t:sweep:x:lock", 60_000), SweepLock(client, "t:sweep:x:lock", 60_000)
    assert first.acquire() and not second.acquire()
    assert first.renew() and client.pttl("t:sweep:x:lock") > 50_000
    client.pexpire("t:sweep:x:lock", 1)  # As if the first holder stalled past its TTL.
    wait_until(second.acquire, 5, "the lapsed lock")
    assert not first.renew() and not first.release()  # The lapsed holder cannot take back or drop another's.
    assert second.release()

    # A holder killed mid-sweep (kill -9: no release, no more renewals) leaves a lock that expires.
    script = (
        "import sys, time, redis\n"
        "from models.cluster.sweeps import SweepLock\n"
        "lock = SweepLock(redis.Redis.from_url(sys.argv[1]), 't:sweep:send_due_postbacks:lock', 1500)\n"
        "assert lock.acquire()\n"
        "with lock.kept():\n"
        "    print('held', flush=True)\n"
        "    time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, redis_url], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        sweeps = ClusterSweeps(client, "t:", "b")
        assert not sweeps.run("send_due_postbacks", 30, lambda: pytest.fail("ran under another's lock"))
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        ran: list[bool] = []
        wait_until(
            lambda: sweeps.run("send_due_postbacks", 30, lambda: ran.append(True)), 10, "the lock to expire"
        )
        assert ran == [True]
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
        client.close()


def test_status_shows_redis_and_its_queue(lanner, cluster_env, settings):
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    huey = create_huey(load_settings(cluster_env))
    try:
        huey.send_postback(1)
        huey.send_postback.schedule(args=(2,), delay=3600)
    finally:
        huey.storage.close()
    status = json.loads(run_lanner(cluster_env, "status", "--json").stdout)
    redis = status["redis"]
    assert redis["state"] == "ok" and redis["round_trip_ms"] >= 0 and redis["used_memory"] > 0
    assert set(redis["sweeps"]) >= {"send_due_postbacks", "refresh_exchange_rates"}
    # Queued, not yet scheduled by a consumer: both wait in the queue.
    assert status["queue"] == {"pending_tasks": 2, "scheduled_tasks": 0}
    assert ("postgresql" in status) == settings.uses_postgres
    if settings.uses_postgres:
        assert status["postgresql"]["state"] == "ok" and status["postgresql"]["server_version"]
    text = run_lanner(cluster_env, "status").stdout
    assert "redis: ok, url unix://" in text and "sweep send_due_postbacks: last never" in text


def test_status_shows_redis_with_a_password_ok_or_unreachable_and_never_the_password(
    lanner, cluster_env, redis_url
):
    client = redis_client(redis_url)
    client.acl_setuser("lanner-test", enabled=True, passwords=["+pw-ok-123"], keys=["*"], commands=["+@all"])
    try:
        with_user = redis_url.replace("unix://", "unix://lanner-test:pw-ok-123@", 1)
        env = {**cluster_env, "LANNER_REDIS_URL": with_user}
        shown = run_lanner(env, "status", "--json").stdout
        assert json.loads(shown)["redis"]["state"] == "ok"
        assert "pw-ok-123" not in shown and "lanner-test:***@" in shown
        wrong = {
            **cluster_env,
            "LANNER_REDIS_URL": redis_url.replace("unix://", "unix://lanner-test:nope-456@", 1),
        }
        for args in (("status", "--json"), ("status",)):
            out = run_lanner(wrong, *args).stdout
            assert "nope-456" not in out
        assert json.loads(run_lanner(wrong, "status", "--json").stdout)["redis"]["state"] == "unreachable"
    finally:
        client.acl_deluser("lanner-test")
        client.close()

    dead = {**cluster_env, "LANNER_REDIS_URL": f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"}
    result = run_lanner(dead, "status", "--json")
    redis = json.loads(result.stdout)["redis"]
    assert redis["state"] == "unreachable" and "\n" not in redis["error"] and redis["error"]
    assert redis["url"].startswith("redis://:***@127.0.0.1:")
    assert "error" in json.loads(result.stdout)["queue"]  # The queue is on that Redis too.
    text = run_lanner(dead, "status").stdout
    assert "s3cret-pw" not in result.stdout + text
    assert "redis: unreachable" in text and "capped streams and offers get no clicks" in text


# The subject is each web worker's file in the data directory, not the database: SQLite's run only.
@pytest.mark.sqlite_only
def test_status_shows_each_web_worker_alone_while_its_redis_is_away_then_ok(
    lanner, cluster_env, start_server, settings, tmp_path
):
    """A real `lanner serve` node on a Redis of its own, which stops answering (SIGSTOP: its socket
    accepts, nothing replies) while clicks come. A click asks Redis nothing (its caps are leased, debounce
    and uniqueness are the node's), so the worker finds out by its ping (at most a second apart, paced
    by its clicks): from then on `lanner status` shows it degraded, with the clicks it answered alone,
    and so does `lanner status` on another node once the first node's summary is published; once Redis
    answers again, ok, and the last outage's clicks are exactly those it answered while it knew."""
    from servers import RedisServer

    from workers.runtime.redisview import read_views

    lanner("campaign", "create", "Demo", "--alias", "demo", "--offer-url", "https://o.example/?s={subid}")
    own = RedisServer().start()
    try:
        env = {**cluster_env, "LANNER_REDIS_URL": own.url()}
        server = start_server(workers=1, **{k: v for k, v in env.items() if k.startswith("LANNER_")})
        # The web worker writes its view as it starts: ok.
        wait_until(lambda: len(read_views(settings.data_dir)) == 1, 10, "the web worker's view")
        assert {view["state"] for view in read_views(settings.data_dir)} == {"ok"}
        os.kill(own.process.pid, signal.SIGSTOP)
        sent = 0

        def degraded() -> bool:
            nonlocal sent
            sent += 1
            assert click(server.port, "demo", ip=f"198.51.100.{sent}")[0] == 302
            return {view["state"] for view in read_views(settings.data_dir)} == {"degraded"}

        try:
            wait_until(degraded, 20, "the web worker to find Redis away", lambda: server.log)
            alone = 1  # The click whose refresh found it out, answered alone.
            for n in range(5):
                assert click(server.port, "demo", ip=f"198.51.101.{n + 1}")[0] == 302
                alone += 1
        finally:
            os.kill(own.process.pid, signal.SIGCONT)
        # Redis answers `lanner status` again (it would wait out the queue's timeouts), but each worker
        # shows what it saw: no click has asked Redis since.
        status = json.loads(run_lanner(env, "status", "--json").stdout)
        web = sorted(worker["pid"] for worker in status["web"]["workers"] if worker["role"] == "web")
        assert [view["pid"] for view in status["redis"]["workers"]] == web
        degraded = [view for view in status["redis"]["workers"] if view["state"] == "degraded"]
        assert degraded and all(view["last_error"] for view in degraded)
        assert sum(view["alone_clicks"] for view in degraded) <= alone  # As of its last failed ping.
        text = run_lanner(env, "status").stdout
        assert f"web worker {degraded[0]['pid']} on node a: degraded for " in text
        assert "clicks answered alone, error " in text
        from settings import load_settings
        from workers.runtime.redisview import publish_node_view

        publish_node_view(load_settings(env))  # What node a's `lanner worker` does every minute.
        seen = json.loads(run_lanner(second_node(env, settings, tmp_path), "status", "--json").stdout)
        seen = {view["pid"]: view for view in seen["redis"]["other_nodes"]["a"]["workers"]}
        assert seen[degraded[0]["pid"]]["state"] == "degraded" and sorted(seen) == web

        time.sleep(1.2)  # Past a worker's 1 s before it asks again (the status calls took longer anyway).
        n = 0

        def all_ok() -> bool:
            nonlocal n
            n += 1
            assert click(server.port, "demo", ip=f"203.0.113.{n}")[0] == 302
            return {view["state"] for view in read_views(settings.data_dir)} == {"ok"}

        wait_until(all_ok, 20, "every web worker's Redis to be ok again", lambda: server.log)
        views = read_views(settings.data_dir)  # What `lanner status` reads, as the text below shows.
        assert sum(view.get("last_outage", {}).get("alone_clicks", 0) for view in views) == alone
        text = run_lanner(env, "status").stdout
        assert "degraded" not in text and "ok; its last outage ended " in text
    finally:
        own.stop()


def test_status_with_postgresql_unreachable_says_so_with_redis_and_exits_1(env, redis_url):
    environ = {
        **env,
        "LANNER_DATABASE_URL": f"postgresql://lanner:pg-secret-789@127.0.0.1:{free_port()}/lanner",
        "LANNER_REDIS_URL": redis_url,
    }
    result = run_lanner(environ, "status", "--json", check=False)
    assert result.returncode == 1
    status = json.loads(result.stdout)
    assert status["postgresql"]["state"] == "unreachable" and status["redis"]["state"] == "ok"
    text = run_lanner(environ, "status", check=False)
    assert text.stdout.startswith("postgresql: unreachable, error Cannot connect to PostgreSQL")
    assert "pg-secret-789" not in result.stdout + result.stderr + text.stdout + text.stderr
