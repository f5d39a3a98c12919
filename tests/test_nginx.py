"""The rendered nginx front, with a real nginx in front of a real `lanner serve` on a unix socket."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time

import pytest
from cluster_nodes import Clicks, landed, nginx_required, start_node, upstream_args
from cluster_nodes import start_nginx as start_nginx_in
from conftest import LANNER, ROOT, LiveProcess, click, request, start_process

from workers.runtime.procfs import process_tree

# What nginx passes, refuses and spreads: the same whatever store is behind it.
pytestmark = [nginx_required, pytest.mark.store_agnostic]


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
        upstream = ["--upstream", f"unix:{socket_path}"] if socket_path else []
        started.append(start_nginx_in(tmp_path, env, *site_args, *upstream))
        return started[-1].port

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


def test_the_click_api_and_the_tracking_script_pass_through_the_site_as_they_are(
    lanner_on_socket, start_nginx, lanner, settings
):
    """KClient's own `//api.php?...` (one slash too many), /lanner.js and /lp/visit with CORS reach the
    web workers through the site's `location /` unchanged (routes/clickapi.py)."""
    import json

    token = json.loads(lanner("campaign", "show", "front", "--json").stdout)["token"]
    port = start_nginx(lanner_on_socket)
    status, _, body = request(port, f"//api.php?token={token}&ip=203.0.113.61&ua=UA&info=1&version=3")
    assert status == 200 and json.loads(body)["info"]["campaign_id"] == 1
    status, headers, body = request(port, "/lanner.js")
    assert status == 200 and headers["cache-control"] == "public, max-age=3600" and b"/lp/visit" in body
    status, headers, body = request(
        port, "/lp/visit?campaign=front&sub1=x", {"Origin": "https://lander.example", "User-Agent": "UA two"}
    )
    assert status == 200 and headers["access-control-allow-origin"] == "https://lander.example"
    assert stored_ips(settings, lanner) == ["203.0.113.61", "127.0.0.1"]


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


def test_several_nodes_hash_the_visitor_consistently_and_one_box_has_no_hash(env):
    """Issue 33: one visitor (the address nginx believes and the User-Agent, as the tracker keys it) to
    one node, ketama so a node added or removed moves ~1/N of them; the admin upstream needs none."""

    def site(*upstreams: str) -> str:
        args = [a for upstream in upstreams for a in ("--upstream", upstream)]
        return subprocess.run(
            [*LANNER, "nginx", "site", *args], env=env, cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout

    def block(text: str, name: str) -> str:
        return text.split(f"\nupstream {name} {{")[1].split("}")[0]

    two = site("10.0.0.1:8080", "10.0.0.2:8080")
    assert block(two, "lanner_web").splitlines()[1] == "    hash $remote_addr$http_user_agent consistent;"
    assert "hash" not in block(two, "lanner_admin")
    assert "hash" not in block(site("10.0.0.1:8080"), "lanner_web")


def test_one_upstream_spreads_clicks_over_two_nodes_and_a_killed_node_loses_none(
    env, db, lanner, settings, tmp_path, start_nginx
):
    lanner(
        "campaign", "create", "Front", "--alias", "front", "--offer-url", "https://offer.example/?c={subid}"
    )
    nodes = [start_node(env, settings, tmp_path, name) for name in ("node-a", "node-b")]
    try:
        port = start_nginx(None, *upstream_args([live for live, _ in nodes]))
        with Clicks(port) as clicks:
            clicks.wait_for(150)
            # The whole node at once: its master and every worker (each in a process group of its own).
            for pid in process_tree(nodes[0][0].process.pid):
                os.kill(pid, signal.SIGKILL)
            nodes[0][0].process.wait()
            killed_at = clicks.count()
            clicks.wait_for(killed_at + 150)
    finally:
        for live, _ in nodes:
            if live.process.poll() is None:
                live.stop()

    refused = [answer for answer in clicks.answers if answer[0] != 302]
    assert not refused, refused[:5]  # The click a dead node held, and every one after, went to the other.
    subids = [location.split("c=")[1] for _, location in clicks.answers]
    assert len(set(subids)) == len(subids)
    # Both nodes took clicks (the visitors hash over both), each lands its own spool under its name, and the
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


class Gate:
    """A TCP forwarder nginx sees as a node, in front of a real one: shut, it closes every connection
    it has and every new one at once (a node failing every request, as an overloaded one does)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.is_open = True
        self.open_sockets: list[socket.socket] = []
        self.forwarded = 0  # Connections passed on to the node.
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # Closed.
            with self.lock:
                if not self.is_open:
                    client.close()
                    continue
                node = socket.create_connection(("127.0.0.1", self.target))
                self.open_sockets += [client, node]
                self.forwarded += 1
            for source, sink in ((client, node), (node, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def shut(self) -> None:
        with self.lock:
            self.is_open = False
            for sock in self.open_sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.open_sockets = []

    def open(self) -> None:
        with self.lock:
            self.is_open = True

    def close(self) -> None:
        self.shut()
        self.listener.close()


def test_nodes_that_all_failed_take_clicks_again_at_once_never_no_live_upstreams(
    env, db, lanner, settings, tmp_path, start_nginx
):
    """Issue 33: nginx's passive check took every overloaded node out (max_fails) and answered 502 "no
    live upstreams" for fail_timeout, nodes or not. Now no node is ever taken out: the first click after
    the failures is served."""
    lanner("campaign", "create", "Up", "--alias", "up", "--offer-url", "https://offer.example/?c={subid}")
    live, _ = start_node(env, settings, tmp_path, "node-a")
    gates = [Gate(live.port), Gate(live.port)]
    try:
        args = ["--admin-upstream", f"127.0.0.1:{live.extra['admin_port']}"]
        for gate in gates:
            args += ["--upstream", f"127.0.0.1:{gate.port}"]
        port = start_nginx(None, *args)
        assert click(port, "up", ua="Before")[0] == 302
        for gate in gates:
            gate.shut()
        failed = [click(port, "up", ua=f"Failing {n}")[0] for n in range(6)]  # Each tried on both.
        for gate in gates:
            gate.open()
        status, headers, _ = click(port, "up", ua="After")
    finally:
        for gate in gates:
            gate.close()
        live.stop()
    assert failed == [502] * 6
    assert status == 302 and headers["location"].startswith("https://offer.example/?c="), status
    errors = (tmp_path / f"nginx-{port}" / "error.log").read_text()
    assert "no live upstreams" not in errors, errors


def test_the_panel_and_reports_go_to_the_report_node_and_to_the_others_only_while_it_refuses(
    env, db, lanner, settings, tmp_path, start_nginx
):
    """Issue 28: the node keeping the columnar history answers reports, so PostgreSQL runs no report's
    scan; the other nodes' admin workers stand by (`backup`) so the panel stays up without it."""
    live, _ = start_node(env, settings, tmp_path, "node-a")
    report, standby = Gate(live.extra["admin_port"]), Gate(live.extra["admin_port"])
    try:
        port = start_nginx(
            None,
            "--upstream",
            f"127.0.0.1:{live.port}",
            *(
                "--admin-upstream",
                f"127.0.0.1:{standby.port}",
                "--admin-upstream",
                f"127.0.0.1:{report.port}",
            ),
            *("--report-upstream", f"127.0.0.1:{report.port}"),
        )
        served = [request(port, "/panel/login", {"Connection": "close"})[0] for _ in range(6)]
        assert served == [200] * 6 and report.forwarded >= 1, served
        assert standby.forwarded == 0  # Round robin would have sent it half of them.
        report.shut()
        while_down = [request(port, "/panel/login", {"Connection": "close"})[0] for _ in range(3)]
        assert while_down == [200] * 3 and standby.forwarded >= 1, while_down
    finally:
        for gate in (report, standby):
            gate.close()
        live.stop()


def test_nginx_serves_local_landers_sandboxed_from_the_data_dir_and_404s_traversal(
    lanner_on_socket, start_nginx, lanner, settings, tmp_path
):
    import io
    import json
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("summer/index.html", "<h1>Summer</h1>")
        archive.writestr("summer/app.js", "document.title = 'x';")
    (tmp_path / "summer.zip").write_bytes(buffer.getvalue())
    lanner("lander", "create", "Summer", "--zip", str(tmp_path / "summer.zip"))
    path = json.loads(lanner("lander", "show", "Summer", "--json").stdout)["path"]
    (settings.data_dir / "secret.txt").write_text("not a lander's")
    port = start_nginx(lanner_on_socket)
    served = (
        (path, "text/html", b"<h1>Summer</h1>"),
        (path + "app.js", "application/javascript", b"document.title = 'x';"),
    )
    for url, kind, body in served:
        status, headers, got = request(port, url)
        assert (status, got) == (200, body), url
        assert headers["content-type"].startswith(kind)
        assert headers["content-security-policy"].startswith("sandbox allow-scripts allow-forms")
        assert "allow-same-origin" not in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert "max-age=86400" in headers["cache-control"]
    folder = path.split("/")[2]
    for url in (
        "/landers/../secret.txt",
        "/landers/..%2fsecret.txt",
        f"/landers/{folder}/../../secret.txt",
        f"/landers/{folder}/%2e%2e/%2e%2e/secret.txt",
        f"/landers/{folder}/missing.html",
        "/landers/",
    ):
        status, _, got = request(port, url)
        assert status in (400, 403, 404) and b"not a lander's" not in got, (url, status)
    assert request(port, path + "index.html", method="POST", body=b"")[0] == 403


def test_a_landers_zip_upload_passes_nginx_to_its_bound_and_no_further(
    lanner_on_socket, start_nginx, lanner, db
):
    import io
    import json
    import random
    import zipfile

    from models.conversions.postbacks import read_secret

    lanner("lander", "create", "Summer", "--url", "https://lp.example/")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.html", "<h1>Summer</h1>")
        archive.writestr("hero.jpg", random.Random(3).randbytes(2_000_000))  # Past /api/'s 1 MB.
    port = start_nginx(lanner_on_socket)
    headers = {"X-Api-Key": read_secret(db, "api_key"), "Content-Type": "application/zip"}
    status, _, body = request(port, "/api/v1/landers/Summer/zip", headers, "POST", buffer.getvalue())
    assert status == 200, body
    assert json.loads(body)["path"].startswith("/landers/1-")
    status, _, got = request(port, json.loads(body)["path"] + "hero.jpg")
    assert status == 200 and len(got) == 2_000_000
    # Past LANNER_LANDER_MAX_BYTES (20 MB) nginx answers 413 itself, before Lanner reads a byte.
    status, _, _ = request(port, "/api/v1/landers/Summer/zip", headers, "POST", b"\0" * (22 * 2**20))
    assert status == 413
