"""Real nodes of a cluster for the tests, and the nginx in front of them (tests/test_nginx.py,
tests/test_cluster.py).

A node is what a host runs: `lanner serve` (its master, web workers and admin worker) and `lanner worker`
(the Huey consumer and the spool flusher), with a data directory (spool) and node name of its own, on the
test's one database (and Redis). Everything listens on ports the kernel picks; nginx, whose port must be
written into its configuration, takes a free one and another if it was taken first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import (
    LANNER,
    ROOT,
    START_SECONDS,
    LiveProcess,
    bound_port,
    free_port,
    request,
    run_lanner,
    start_process,
    wait_healthy,
)

from workers.runtime.procfs import process_tree

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
nginx_required = pytest.mark.skipif(
    not os.path.exists(NGINX), reason="nginx is not installed (`make deps` installs it)"
)


def start_nginx(directory: Path, env: dict[str, str], *site_args: str) -> LiveProcess:
    """nginx with `lanner nginx site SITE_ARGS` (its upstreams among them) under `directory`; its port is
    the LiveProcess's. The caller stops it."""
    for _ in range(5):
        live = _start_nginx_on(free_port(), directory, env, *site_args)
        if live is not None:
            return live
    raise AssertionError("nginx found no free port in 5 tries")


def _start_nginx_on(port: int, directory: Path, env: dict[str, str], *site_args: str) -> LiveProcess | None:
    prefix = directory / f"nginx-{port}"
    (prefix / "temp").mkdir(parents=True)
    site, main = prefix / "site.conf", prefix / "nginx.conf"
    common = {"env": env, "cwd": ROOT, "check": True, "capture_output": True}
    subprocess.run(
        [*LANNER, "nginx", "site", "--listen", f"127.0.0.1:{port}", *site_args, "-o", str(site)], **common
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
    assert "[warn]" not in checked.stderr, checked.stderr  # The rendered site is what operators install.
    # As root, nginx's workers would run as nobody, who cannot reach pytest's private tmp dir.
    directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
    live = start_process(
        [NGINX, "-c", str(main), "-p", str(prefix), "-g", directives], env, prefix / "run.log"
    )
    live.port = port
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            if request(port, "/healthz")[0] == 200:
                return live
        except OSError:
            pass
        if live.process.poll() is not None and "Address already in use" in live.log:
            return None  # another process took the port since free_port() saw it free
        if time.monotonic() > deadline:
            live.stop()
            raise AssertionError((prefix / "error.log").read_text())
        time.sleep(0.05)


def upstream_args(webs: list[LiveProcess]) -> list[str]:
    """`lanner nginx site` arguments for one upstream and one admin upstream a node (its `lanner serve`)."""
    args = []
    for web in webs:
        args += ["--upstream", f"127.0.0.1:{web.port}"]
        args += ["--admin-upstream", f"127.0.0.1:{web.extra['admin_port']}"]
    return args


def start_node(env, settings, tmp_path, name: str) -> tuple[LiveProcess, dict[str, str]]:
    """A `lanner serve` of its own (data dir, spool, node name) on the test's one database, on ports
    the kernel picks, and its environment (without `lanner worker`: its spool is landed by hand)."""
    database = settings.database_location if settings.uses_postgres else f"sqlite:///{settings.database_path}"
    node = Node(tmp_path, name, {**env, "LANNER_DATABASE_URL": database})
    return node.start_web(), node.environ


@contextlib.contextmanager
def two_nodes(directory: Path, postgres_server, template: str, redis_server):
    """(nodes, env): `node-a` and `node-b` on a database of their own (a copy of `template`) in
    `postgres_server` and on `redis_server` (emptied first), each answering /healthz; killed, and the
    database dropped, on leaving. The database is this process's `models.store.database.db` meanwhile."""
    import redis

    from models.store.database import db, open_database

    database = postgres_server.create_database(template)
    url = postgres_server.url(database)
    open_database(url)
    client = redis.Redis.from_url(redis_server.url())
    client.flushall()
    client.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(PYTHONPATH=str(ROOT), LANNER_DATABASE_URL=url, LANNER_REDIS_URL=redis_server.url())
    # `lanner worker` yields the CPU (nice 10) to the web workers, and on a box the rest of the run keeps
    # busy it would to every test process too: its start and landing would take tens of seconds.
    env["LANNER_WORKER_NICE"] = "0"
    env["LANNER_EXCHANGE_RATE_URL"] = ""  # No machine here reaches the ECB.
    nodes = [Node(directory, name, env) for name in ("node-a", "node-b")]
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.wait_listening(START_SECONDS)
        for node in nodes:
            wait_healthy(node.web, START_SECONDS)
        yield nodes, env
    finally:
        for node in nodes:
            node.kill()  # Quicker than stopping, and nothing of theirs is looked at any more.
        db.close()
        postgres_server.drop_database(database)


class Node:
    """One node: its `lanner serve` tree (`web`) and its `lanner worker` (`worker`), with its own data
    directory under `directory` and node name `name`; `environ` adds both to `env`."""

    def __init__(self, directory: Path, name: str, env: dict[str, str]) -> None:
        self.name, self.directory = name, directory
        data_dir = directory / name
        data_dir.mkdir(exist_ok=True)
        self.environ = {**env, "LANNER_DATA_DIR": str(data_dir), "LANNER_NODE_ID": name}
        self.web: LiveProcess | None = None
        self.worker: LiveProcess | None = None
        self.starts = 0  # Each start logs to a file of its own.

    @property
    def spool_dir(self) -> Path:
        return Path(self.environ["LANNER_DATA_DIR"]) / "spool"

    def start(self) -> Node:
        """Both trees, without waiting for `lanner serve` to listen (`wait_listening()`)."""
        self.launch_web()
        self.start_worker()
        return self

    def start_web(self) -> LiveProcess:
        self.launch_web()
        return self.wait_listening()

    def launch_web(self) -> None:
        self.starts += 1
        args = [*LANNER, "serve", "--workers", "1", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0"]
        log = self.directory / f"{self.name}-serve-{self.starts}.log"
        self.web = start_process(args, {**self.environ, "LANNER_LOG_LEVEL": "INFO"}, log)

    def wait_listening(self, seconds: float = START_SECONDS) -> LiveProcess:
        """`lanner serve` once it has bound its ports (read back from its log)."""
        self.web.port = bound_port(self.web, deadline_seconds=seconds)
        self.web.extra["admin_port"] = bound_port(self.web, "admin", seconds)
        return self.web

    def start_worker(self) -> LiveProcess:
        self.starts += 1
        log = self.directory / f"{self.name}-worker-{self.starts}.log"
        self.worker = start_process([*LANNER, "worker"], self.environ, log)
        return self.worker

    def processes(self) -> list[int]:
        """Every live process of the node: both masters and all their descendants."""
        lives = [live for live in (self.web, self.worker) if live is not None]
        return [pid for live in lives for pid in process_tree(live.process.pid)]

    def kill(self) -> None:
        """The whole node at once (each web worker is in a process group of its own): SIGKILL."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for live in (self.web, self.worker):
            if live is not None:
                live.process.wait()

    def pause_worker(self) -> None:
        """SIGSTOP `lanner worker`: its flusher lands nothing until `resume_worker()`."""
        self.worker.process.send_signal(signal.SIGSTOP)

    def resume_worker(self) -> None:
        self.worker.process.send_signal(signal.SIGCONT)

    @property
    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
            for path in sorted(self.directory.glob(f"{self.name}-*.log"))
        )


class Clicks:
    """Client threads clicking `path` through nginx, each click a new visitor (its own user agent)."""

    def __init__(self, port: int, threads: int = 4, path: str = "/front") -> None:
        self.port, self.path, self.answers, self.lock = port, path, [], threading.Lock()
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(threads)]

    def __enter__(self) -> Clicks:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=20)

    def run(self, thread: int) -> None:
        n = 0
        while not self.stopped.is_set():
            n += 1
            try:
                status, headers, _ = request(
                    self.port, f"{self.path}?sub1={thread}", {"User-Agent": f"Node {thread} {n}"}
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
    """Land a node's spool by hand (`lanner spool flush`): how many clicks it inserted."""
    flushed = run_lanner(lanner_env, "spool", "flush").stdout
    return int(flushed.split("Inserted ")[1].split(",")[0])
