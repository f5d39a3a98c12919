"""The rendered nginx front, with a real nginx in front of a real `lanner serve` on a unix socket."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time

import pytest
from conftest import LANNER, ROOT, LiveProcess, bound_port, free_port, request, run_lanner, start_process

from workers.runtime.procfs import process_tree

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = pytest.mark.skipif(
    not os.path.exists(NGINX), reason="nginx is not installed (`make deps` installs it)"
)


@pytest.fixture
def lanner_on_socket(env, db, lanner, tmp_path):
    lanner(
        "campaign", "create", "Front", "--alias", "front", "--offer-url", "https://offer.example/?c={subid}"
    )
    socket_path = tmp_path / "web.sock"
    live = start_process(
        [*LANNER, "serve", "--workers", "2", "--bind", f"unix:{socket_path}"], env, tmp_path / "serve.log"
    )
    deadline = time.monotonic() + 20
    while not socket_path.exists():
        assert live.process.poll() is None and time.monotonic() < deadline, live.log
        time.sleep(0.05)
    yield socket_path
    live.stop()


@pytest.fixture
def start_nginx(env, tmp_path):
    started: list[LiveProcess] = []

    def start(socket_path, *site_args: str) -> int:
        """nginx in front of Lanner's socket (`socket_path`), or of the upstreams `site_args` names (None)."""
        # nginx needs its port written into the config: a free one, and another if it was taken first.
        for _ in range(5):
            port = start_on(free_port(), socket_path, *site_args)
            if port:
                return port
        raise AssertionError("nginx found no free port in 5 tries")

    def start_on(port: int, socket_path, *site_args: str) -> int | None:
        prefix = tmp_path / f"nginx-{port}"
        (prefix / "temp").mkdir(parents=True)
        site, main = prefix / "site.conf", prefix / "nginx.conf"
        common = {"env": env, "cwd": ROOT, "check": True, "capture_output": True}
        subprocess.run(
            [*LANNER, "nginx", "site", "--listen", f"127.0.0.1:{port}", *site_args]
            + (["--upstream", f"unix:{socket_path}"] if socket_path else [])
            + ["-o", str(site)],
            **common,
        )
        subprocess.run(
            [*LANNER, "nginx", "main", "--sites", str(site), "--pid", str(prefix / "nginx.pid")]
            + ["--error-log", str(prefix / "error.log"), "--temp-dir", str(prefix / "temp"), "-o", str(main)],
            **common,
        )
        checked = subprocess.run(
            [NGINX, "-t", "-c", str(main), "-p", str(prefix)], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr
        # As root, nginx's workers would run as nobody, who cannot reach pytest's private tmp dir.
        directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
        live = start_process(
            [NGINX, "-c", str(main), "-p", str(prefix), "-g", directives], env, prefix / "run.log"
        )
        started.append(live)
        deadline = time.monotonic() + 10
        while True:
            try:
                if request(port, "/healthz")[0] == 200:
                    return port
            except OSError:
                pass
            if live.process.poll() is not None and "Address already in use" in live.log:
                return None  # another process took the port since free_port() saw it free
            assert time.monotonic() < deadline, (prefix / "error.log").read_text()
            time.sleep(0.05)

    yield start
    for live in started:
        live.stop()


def stored_ips(settings, lanner) -> list[str]:
    from models.store.database import db  # The test's own connection, on either backend.

    lanner("spool", "flush")
    return [row[0] for row in db.connection().execute("SELECT ip FROM click ORDER BY id").fetchall()]


def test_forged_forwarding_headers_from_an_untrusted_peer_are_ignored(
    lanner_on_socket, start_nginx, lanner, settings
):
    port = start_nginx(lanner_on_socket, "--trusted-proxy", "10.0.0.0/8")
    status, headers, _ = request(
        port, "/front?sub1=x", {"X-Forwarded-For": "6.6.6.6", "X-Real-IP": "7.7.7.7", "User-Agent": "UA"}
    )
    assert status == 302 and headers["location"].startswith("https://offer.example/?c=")
    assert stored_ips(settings, lanner) == ["127.0.0.1"]  # The peer nginx saw.


def test_a_trusted_proxy_header_gives_the_visitor_address(lanner_on_socket, start_nginx, lanner, settings):
    port = start_nginx(
        lanner_on_socket, "--trusted-proxy", "127.0.0.1/32", "--real-ip-header", "X-Forwarded-For"
    )
    request(port, "/front", {"X-Forwarded-For": "203.0.113.50", "User-Agent": "UA one"})
    # With recursion the address is the last one not added by a trusted proxy.
    request(port, "/front", {"X-Forwarded-For": "6.6.6.6, 198.51.100.9", "User-Agent": "UA two"})
    assert stored_ips(settings, lanner) == ["203.0.113.50", "198.51.100.9"]


def test_admin_routes_answer_only_allowed_addresses(lanner_on_socket, start_nginx):
    closed = start_nginx(lanner_on_socket, "--admin-allow", "10.9.9.9")
    status, _, body = request(closed, "/api/report")
    assert status == 403 and b"Wrong API key" not in body  # nginx refused it.
    assert request(closed, "/healthz")[0] == 200
    opened = start_nginx(lanner_on_socket)  # Loopback is allowed by default: Lanner answers.
    status, _, body = request(opened, "/api/report")
    assert status == 403 and b"Wrong API key" in body  # Lanner refused it: no API key.


def test_the_panel_is_the_admin_worker_s_behind_the_allow_list(lanner_on_socket, start_nginx):
    opened = start_nginx(lanner_on_socket)
    for path in ("/panel", "/panel/", "/panel/campaigns"):
        status, headers, _ = request(opened, path)
        assert status == 303 and headers["location"].startswith("/panel/login?next="), path
    status, _, body = request(opened, "/panel/login")
    assert status == 200 and b'id="login"' in body
    # A 1.5 MB conversion CSV passes nginx (64 KB elsewhere): the panel refuses it for want of a session.
    upload = b"subid,status\n" + b"x" * 1_500_000
    status, _, body = request(
        opened, "/panel/conversions/import", {"Content-Type": "text/csv"}, "POST", upload
    )
    assert status == 403 and b"Log in again" in body
    closed = start_nginx(lanner_on_socket, "--admin-allow", "10.9.9.9")
    for path in ("/panel", "/panel/login"):
        status, _, body = request(closed, path)
        assert status == 403 and b"login" not in body, path  # nginx refused it.
    assert request(closed, "/front")[0] == 302


@pytest.mark.parametrize(
    "args, message",
    [
        (["--trusted-proxy", "not-a-cidr"], "is not an IP address or CIDR range"),
        (["--server-name", "evil; include /etc/passwd"], "characters nginx would misread"),
        (["--listen", "80; x"], "must be PORT or ADDRESS:PORT"),
        (["--upstream", "nowhere"], "is not of the form HOST:PORT"),
    ],
)
def test_unsafe_values_are_refused(env, args, message):
    result = subprocess.run(
        [*LANNER, "nginx", "site", *args], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode != 0 and message in result.stderr


# -- cluster mode: one upstream over several nodes ------------------------------------------------


def start_node(env, settings, tmp_path, name: str) -> tuple[LiveProcess, dict[str, str]]:
    """A `lanner serve` of its own (data dir, spool, node name) on the test's one database, on ports
    the kernel picks."""
    data_dir = tmp_path / name
    data_dir.mkdir()
    database = settings.database_location if settings.uses_postgres else f"sqlite:///{settings.database_path}"
    environ = {
        **env,
        "LANNER_DATA_DIR": str(data_dir),
        "LANNER_NODE_ID": name,
        "LANNER_DATABASE_URL": database,
    }
    args = [*LANNER, "serve", "--workers", "1", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0"]
    live = start_process(args, {**environ, "LANNER_LOG_LEVEL": "INFO"}, tmp_path / f"{name}.log")
    live.port = bound_port(live)
    live.extra["admin_port"] = bound_port(live, "admin")
    return live, environ


class Clicks:
    """Client threads clicking through nginx, each click a new visitor (its own user agent)."""

    def __init__(self, port: int, threads: int = 4) -> None:
        self.port, self.answers, self.lock = port, [], threading.Lock()
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(threads)]

    def run(self, thread: int) -> None:
        n = 0
        while not self.stopped.is_set():
            n += 1
            try:
                status, headers, _ = request(
                    self.port, f"/front?sub1={thread}", {"User-Agent": f"Node {thread} {n}"}
                )
                answer = (status, headers.get("location", ""))
            except OSError as error:
                answer = (0, str(error))
            with self.lock:
                self.answers.append(answer)

    def count(self) -> int:
        with self.lock:
            return len(self.answers)

    def wait_for(self, clicks: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.count() < clicks:
            assert time.monotonic() < deadline, f"{self.count()} clicks in {timeout} s"
            time.sleep(0.01)


def landed(lanner_env) -> int:
    flushed = run_lanner(lanner_env, "spool", "flush").stdout
    return int(flushed.split("Inserted ")[1].split(",")[0])


def test_one_upstream_spreads_clicks_over_two_nodes_and_a_killed_node_loses_none(
    env, db, lanner, settings, tmp_path, start_nginx
):
    lanner(
        "campaign", "create", "Front", "--alias", "front", "--offer-url", "https://offer.example/?c={subid}"
    )
    nodes = [start_node(env, settings, tmp_path, name) for name in ("node-a", "node-b")]
    try:
        site = []
        for live, _ in nodes:
            site += [
                "--upstream",
                f"127.0.0.1:{live.port}",
                "--admin-upstream",
                f"127.0.0.1:{live.extra['admin_port']}",
            ]
        port = start_nginx(None, *site)
        clicks = Clicks(port)
        for thread in clicks.threads:
            thread.start()
        try:
            clicks.wait_for(150)
            # The whole node at once: its master and every worker (each in a process group of its own).
            for pid in process_tree(nodes[0][0].process.pid):
                os.kill(pid, signal.SIGKILL)
            nodes[0][0].process.wait()
            killed_at = clicks.count()
            clicks.wait_for(killed_at + 150)
        finally:
            clicks.stopped.set()
            for thread in clicks.threads:
                thread.join(timeout=20)
    finally:
        for live, _ in nodes:
            if live.process.poll() is None:
                live.stop()

    refused = [answer for answer in clicks.answers if answer[0] != 302]
    assert not refused, refused[:5]  # The click a dead node held, and every one after, went to the other.
    subids = [location.split("c=")[1] for _, location in clicks.answers]
    assert len(set(subids)) == len(subids)
    # Both nodes took clicks (no stickiness), each lands its own spool under its own name, and the
    # killed node took none after its death.
    per_node = [landed(environ) for _, environ in nodes]
    assert 0 < per_node[0] <= killed_at and per_node[1] >= len(subids) - killed_at, (per_node, killed_at)
    stored = {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()}
    assert set(subids) <= stored  # Every 302's subid landed: no click lost.
    # A click the killed node journaled but never answered was retried on the other node (no Redis
    # here to give it the same subid): at most one such click per client connection in flight.
    assert len(stored - set(subids)) <= len(clicks.threads)
    nodes_landed = {row[0] for row in db.execute_sql("SELECT name FROM spool_node").fetchall()}
    assert {"node-a", "node-b"} <= nodes_landed
