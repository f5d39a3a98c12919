"""`lanner cluster up` and `lanner cluster down` (workers/bench/localcluster.py), end to end: two real
nodes on a throwaway PostgreSQL and Redis behind nginx, clicked through nginx, each click stored once,
and nothing of it left running after `down`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from cluster_nodes import nginx_required
from conftest import LANNER, ROOT, _server_missing, request, run_lanner, wait_until

from workers.runtime.procfs import process_start_time, process_tree, stat_fields

pytestmark = [pytest.mark.long, nginx_required]

CLICKS = 20
UP_SECONDS = 180  # Starting PostgreSQL, Redis, two nodes and nginx on a box the rest of the run keeps busy.
DOWN_SECONDS = 120


@pytest.fixture
def servers_installed():
    from workers.bench.servers import POSTGRES_MISSING, REDIS_MISSING, ServerMissing, postgres_bindir

    if postgres_bindir() is None:
        _server_missing(ServerMissing(f"`lanner cluster up` needs {POSTGRES_MISSING}."))
    if not any(Path(d, "redis-server").exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        _server_missing(ServerMissing(f"`lanner cluster up` needs {REDIS_MISSING}."))


def test_cluster_up_serves_clicks_through_nginx_stores_each_once_and_down_leaves_nothing(
    servers_installed, tmp_path
):
    import psycopg

    directory = tmp_path / "cluster"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(
        PYTHONPATH=str(ROOT),
        LANNER_EXCHANGE_RATE_URL="",  # No machine here reaches the ECB.
        LANNER_WORKER_NICE="0",
        LANNER_ADMIN_IDLE_PRIORITY="off",
    )
    log_path = tmp_path / "up.log"
    with open(log_path, "wb") as log:
        up = subprocess.Popen(
            [*LANNER, "cluster", "up", "--nodes", "2", "--dir", str(directory), "--port", "0"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output() -> str:
        return log_path.read_text(errors="replace")

    started: dict[int, int | None] = {}
    try:
        text = wait_until(
            lambda: up.poll() is not None or ("stops everything" in output() and output()),
            UP_SECONDS,
            "`lanner cluster up` to be up",
            output,
        )
        assert up.poll() is None, output()
        for line in (
            "PostgreSQL: initdb",
            "Redis: start",
            "node-1: ready",
            "node-2: ready",
            "First login: admin",
        ):
            assert line in text  # Its progress, then where everything is.
        port, path = re.search(r"Campaign URL: http://127\.0\.0\.1:(\d+)(/\S+)", text).groups()
        database_url = re.search(r"LANNER_DATABASE_URL='([^']+)'", text).group(1)
        state = json.loads((directory / "cluster.json").read_text())
        postmaster = int((Path(state["postgres_data"]) / "postmaster.pid").read_text().split()[0])
        for pid in process_tree(up.pid) + process_tree(postmaster):
            started[pid] = process_start_time(pid)
        programs = {_command(pid).split(" ")[0].rsplit("/", 1)[-1].rstrip(":") for pid in started}
        assert {"nginx", "redis-server", "postgres"} <= programs, programs

        subids = []
        for n in range(CLICKS):
            status, headers, _ = request(int(port), path, {"User-Agent": f"Cluster up {n}"})
            assert status == 302, (status, headers)
            subids.append(parse_qs(urlsplit(headers["location"]).query)["subid"][0])  # The demo offer's.
        assert len(set(subids)) == CLICKS

        with psycopg.connect(database_url, autocommit=True) as connection:

            def stored() -> list[str]:
                rows = connection.execute("SELECT subid FROM click WHERE subid = ANY(%s)", (subids,))
                return [row[0] for row in rows.fetchall()]

            wait_until(lambda: len(stored()) >= CLICKS, 60, "the clicks to land", output)
            assert sorted(stored()) == sorted(subids)  # Each once.
            landed_by = connection.execute(
                "SELECT name FROM spool_node WHERE segment > 1 OR byte_offset > 0"
            ).fetchall()
        assert {row[0] for row in landed_by} == {"node-1", "node-2"}  # nginx spread them over both.
        # node-1 keeps the columnar history and answers the panel and reports; node-2's admin worker
        # stands by.
        history = directory / "node-1" / "history" / "clicks.duckdb"
        wait_until(history.exists, 60, "node-1's worker to make the history", output)
        assert not (directory / "node-2" / "history" / "clicks.duckdb").exists()
        site = (directory / "nginx" / "site.conf").read_text()
        admin = site[site.index("upstream lanner_admin") :].split("}")[0]
        assert re.search(r"server 127\.0\.0\.1:\d+ max_fails=1 fail_timeout=10s;", admin), admin
        assert admin.count(" backup;") == 1, admin
    finally:
        if up.poll() is None:
            run_lanner(env, "cluster", "down", "--dir", str(directory), check=False)
        try:
            up.wait(timeout=DOWN_SECONDS)
        except subprocess.TimeoutExpired:
            up.kill()
            raise
    assert up.returncode == 0, output()
    assert "nothing of the cluster runs any more" in output()

    # Every process it started (nodes, nginx, Redis, PostgreSQL and its backends) is gone.
    def left() -> list[str]:
        return [_command(pid) for pid, start in started.items() if _runs(pid, start)]

    wait_until(lambda: not left(), 30, "every process of the cluster to be gone", lambda: str(left()))
    assert not (directory / "cluster.json").exists()


def _runs(pid: int, started: int | None) -> bool:
    """The very process that started then runs still (a zombie has exited, its parent not told yet)."""
    fields = stat_fields(pid)
    return started is not None and fields is not None and fields[0] != "Z" and int(fields[19]) == started


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
