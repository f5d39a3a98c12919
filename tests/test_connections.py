"""Client connections against a real `lanner serve`: keep-alive clients through reloads (straight to the
workers and behind nginx), idle connections closed, a hoard of connections past the fd limit."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import time

import pytest
import test_nginx
from cluster_nodes import nginx_required
from conftest import ClientThreads, click, subid_of, wait_until

from workers.runtime.procfs import children, process_name

# Connections, reloads and descriptors are the web tier's: the same over either store.
pytestmark = pytest.mark.store_agnostic
CLIENT_ERRORS = (OSError, http.client.HTTPException)
nginx_front = test_nginx.start_nginx  # a fixture: a real nginx in front of a unix socket


@pytest.fixture
def campaign(lanner):
    lanner("campaign", "create", "Keep", "--alias", "keep", "--offer-url", "https://o.example/?click={subid}")
    return "keep"


def web_workers(master_pid: int) -> set[int]:
    return {pid for pid in children(master_pid) if process_name(pid) == "lanner-web"}


class KeepAliveClients(ClientThreads):
    """Threads each sending clicks back to back on one keep-alive connection, as a bench or a proxy does.

    A connection is replaced only when the server closes it (after `Connection: close`, or by going
    away); every request's outcome is recorded: the subid of a 302, or the error. Each client sends one
    request every `PACE_SECONDS` at most: back to back, four clients sent ~11,700 clicks through ten
    reloads (each written, flushed and compared); paced, ~1,800, as many connections moved on by the
    draining workers (40), and the two reload tests cost ~15 -> ~10 CPU-s.
    """

    join_seconds = 20.0
    PACE_SECONDS = 0.02

    def __init__(self, port: int, alias: str, threads: int = 4):
        super().__init__(threads)
        self.port, self.alias = port, alias
        self.answered: list[str] = []
        self.failures: list[str] = []
        self.closing_answers = 0  # answers saying `Connection: close`; http.client then reconnects

    def _run(self, n: int) -> None:
        connection = None
        i = 0
        while not self.is_stopped.is_set():
            i += 1
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
            headers = {"User-Agent": f"Keep-alive {n} {i}", "X-Real-IP": f"198.51.100.{n + 1}"}
            try:
                connection.request("GET", f"/{self.alias}", headers=headers)
                response = connection.getresponse()
                response.read()
                if response.status != 302:
                    raise AssertionError(f"status {response.status}")
                self.answered.append(subid_of(response.getheader("Location")))
                self.closing_answers += response.will_close
                self.is_stopped.wait(self.PACE_SECONDS)
            except (*CLIENT_ERRORS, AssertionError) as exc:
                self.failures.append(f"request {i} of client {n}: {exc!r}")
                connection.close()
                connection = None


def stored_subids() -> list[str]:
    """The subids in the database, read on this test's own connection (either backend)."""
    from models.store.database import db

    return [subid for (subid,) in db.connection().execute("SELECT subid FROM click").fetchall()]


@pytest.mark.long
def test_ten_reloads_under_keep_alive_clients_fail_no_request_and_record_only_answered_clicks(
    campaign, start_server, lanner, settings
):
    server = start_server(workers=2, LANNER_GRACEFUL_TIMEOUT="30")
    with KeepAliveClients(server.port, campaign) as clients:
        wait_until(lambda: len(clients.answered) > 50, 20, "the clients to get going")
        reload_ten_times(server)  # the old workers leave once their clients moved
        answered_before_stop = len(clients.answered)
        # Paced clients on a quick box may have sent fewer than 500 through the reloads: more after them.
        enough = max(answered_before_stop + 50, 500)
        wait_until(lambda: len(clients.answered) > enough, 30, "traffic after the reloads")
    assert server.stop() == 0, server.log
    lanner("spool", "flush")
    assert clients.failures == []
    assert len(clients.answered) > 500, "the clients must really have kept the workers busy"
    assert clients.closing_answers >= 10, "the draining workers must have moved their clients on"
    stored = stored_subids()
    assert sorted(stored) == sorted(clients.answered)  # every 302 landed, and no click without an answer
    assert "killing it" not in server.log and "graceful_timeout" not in server.log


@pytest.mark.long
@nginx_required
def test_ten_reloads_behind_nginx_fail_no_request_of_keep_alive_clients(
    campaign, env, tmp_path, nginx_front, lanner, settings
):
    from conftest import LANNER, start_process

    socket_path = tmp_path / "web.sock"
    args = [*LANNER, "serve", "--workers", "2", "--bind", f"unix:{socket_path}"]
    server = start_process(args, {**env, "LANNER_GRACEFUL_TIMEOUT": "30"}, tmp_path / "serve.log")
    try:
        wait_until(socket_path.exists, 20, "the socket", lambda: server.log)
        port = nginx_front(socket_path)
        with KeepAliveClients(port, campaign) as clients:
            wait_until(lambda: len(clients.answered) > 50, 20, "the clients to get going")
            reload_ten_times(server)
            answered_before_stop = len(clients.answered)
            wait_until(lambda: len(clients.answered) > answered_before_stop + 50, 20, "traffic after reloads")
    finally:
        assert server.stop() == 0, server.log
    lanner("spool", "flush")
    assert clients.failures == []
    assert sorted(stored_subids()) == sorted(clients.answered)
    assert "killing it" not in server.log and "graceful_timeout" not in server.log


def reload_ten_times(server) -> None:
    for generation in range(2, 12):
        before = web_workers(server.process.pid)
        os.kill(server.process.pid, signal.SIGHUP)
        reloaded = f"reloaded: generation {generation} serving"
        wait_until(lambda line=reloaded: line in server.log, 30, "a reload", lambda: server.log)

        def is_gone(old: set[int] = before) -> bool:  # long before graceful_timeout
            return not old & web_workers(server.process.pid)

        wait_until(is_gone, 20, "old workers to exit", lambda: server.log)


def test_an_idle_connection_is_closed_after_keepalive_timeout_and_a_busy_one_is_not(campaign, start_server):
    server = start_server(LANNER_KEEPALIVE_TIMEOUT="3")
    idle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    idle.request("GET", "/healthz")
    assert idle.getresponse().read()
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=30)  # never sends a byte
    busy = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    busy.request("GET", "/healthz")
    busy.getresponse().read()
    busy_socket = busy.sock
    answers = 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # a request every 0.1 s: never idle for 3 s
        busy.request("GET", "/healthz")
        assert busy.getresponse().read()
        answers += 1
        time.sleep(0.1)
    assert busy.sock is busy_socket, "the busy connection must not have been closed"
    assert idle.sock.recv(1) == b""  # closed by the worker (blocks until then; times out after 30 s)
    assert silent.recv(1) == b""
    idle.close()
    silent.close()
    busy.close()


def start_serve_with_descriptor_limit(env, tmp_path, limit: int, **extra_env: str):
    from conftest import LANNER, ROOT, LiveProcess, bound_port, wait_healthy

    log_path = tmp_path / "serve-limited.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            # The hard limit too, so the master cannot raise it back.
            ["sh", "-c", f'ulimit -n {limit} && exec "$@"', "sh"]
            + [*LANNER, "serve", "--workers", "2", "--bind", "127.0.0.1:0", "--admin-bind", "off"],
            env={**env, **extra_env},
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    live = LiveProcess(process, log_path)
    live.port = bound_port(live)
    wait_healthy(live)
    return live


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_client_holding_more_connections_than_the_fd_limit_does_not_lock_others_out(
    campaign, env, db, tmp_path, settings
):
    limit = 160  # the test's own 3 * 160 sockets stay well below a CI runner's 1,024
    server = start_serve_with_descriptor_limit(env, tmp_path, limit, LANNER_KEEPALIVE_TIMEOUT="600")
    hoarded: list[socket.socket] = []
    try:
        for _ in range(3 * limit):  # the kernel completes them; each worker accepts until EMFILE
            hoarded.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        answered = []
        for n in range(20):  # each on a new connection, queued behind the hoard
            status, headers, _ = click(server.port, campaign, ua=f"Locked out? {n}")
            assert status == 302, server.log
            answered.append(subid_of(headers["location"]))
        assert "file descriptors open; closed" in server.log
        closed = 0
        for sock in hoarded:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass  # still open: the workers are below their limit again
        assert closed >= limit, "the workers must have shed the longest idle connections"
        # Below the limit again, with the rest of the hoard still open: no worker spins on accept().
        workers = web_workers(server.process.pid)
        before = {pid: cpu_seconds(pid) for pid in workers}
        time.sleep(1.0)
        assert all(cpu_seconds(pid) - before[pid] < 0.5 for pid in workers), server.log
    finally:
        for sock in hoarded:
            sock.close()
        assert server.stop() == 0, server.log
