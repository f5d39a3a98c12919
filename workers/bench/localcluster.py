"""`lanner cluster up|down`: an N-node cluster on this machine, for trying cluster mode (issue 33).

What `up` starts, in order, each shown as it comes (the `say` callback):
- a throwaway PostgreSQL and Redis from Debian's binaries on unix sockets in directories of their
  own (workers/bench/servers.py, the tests' and the bench's: as an unprivileged user under root);
- the migrations, the report currency, a demo campaign and the first admin, as `lanner run` makes them;
- N nodes, each a real `lanner serve` (one web worker, ports the kernel picks) and `lanner worker`,
  with its own data directory (`DIR/node-K`: spool, logs) and LANNER_NODE_ID `node-K`; node-1 keeps
  the columnar history (LANNER_HISTORY_NODE);
- nginx in front, `lanner nginx site` with one upstream and one admin upstream a node, node-1's the
  report upstream, as docs/cluster.md has it for real hosts (max_fails=0, keepalive, the real-IP
  header the nodes trust).

It lives in the bench because it drives the whole stack from outside through processes it starts,
as the bench does, and reuses its process handling: every child is in a session of its own (Ctrl-C
reaches `up` only, which stops them in order: nginx, each node's web workers then its flusher, Redis,
PostgreSQL) and gets SIGTERM if `up` itself dies. `DIR/cluster.json` names
`up`'s process for `lanner cluster down --dir DIR`, and the servers' pids and directories so that
`down` can still stop them after `up` was killed outright.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workers.bench.errors import BenchError
from workers.bench.harness import (
    LANNER,
    NGINX,
    ManagedProcess,
    free_port,
    lanner_env,
    signals_deferred,
    wait_http,
)
from workers.runtime.procfs import process_start_time, stat_fields

if TYPE_CHECKING:
    from workers.bench.servers import PostgresServer, RedisServer

STATE_FILE = "cluster.json"
START_SECONDS = 60.0  # A node binding its ports and answering /healthz on a busy box.
STOP_SECONDS = 120.0  # `down` waiting for `up` to have stopped everything.
NGINX_TRIES = 5  # Free ports tried for nginx when --port 0 (another process may take one first).
DEMO_QUERY = "?source=test&sub1=hello"
HISTORY_NODE = "node-1"  # Keeps the columnar history; nginx sends the panel and reports to it.
NGINX_DIRECTIVES = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
LISTENING = "{pool}: listening on 127\\.0\\.0\\.1:(\\d+) "


@dataclass
class Node:
    name: str
    data_dir: Path
    env: dict[str, str]
    serve: ManagedProcess | None = None
    worker: ManagedProcess | None = None
    port: int = 0
    admin_port: int = 0


@dataclass
class LocalCluster:
    """`nodes` nodes behind nginx on `port` (0: a free one), their files under `directory`."""

    directory: Path
    nodes: int
    port: int = 0
    say: Callable[[str], None] = print
    database_url: str = ""
    redis_url: str = ""
    campaign_url: str = ""
    panel_url: str = ""
    demo_alias: str = ""
    first_admin: tuple[str, str] | None = None
    members: list[Node] = field(default_factory=list)
    nginx: ManagedProcess | None = None
    _stack: ExitStack = field(default_factory=ExitStack)
    _postgres: PostgresServer | None = None
    _redis: RedisServer | None = None

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- starting ----------------------------------------------------------------------------

    def start(self) -> None:
        refuse_used(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._stack.callback(lambda: (self.directory / STATE_FILE).unlink(missing_ok=True))
        self.start_servers()
        self.prepare_database()
        self.start_nodes()
        self.start_nginx()
        self.write_state()

    def start_servers(self) -> None:
        from workers.bench.servers import PostgresServer, RedisServer, ServerMissing

        try:
            postgres, redis = PostgresServer(fsync=True, shared_buffers="128MB"), RedisServer()
        except ServerMissing as exc:
            raise BenchError(str(exc)) from None
        self.say("PostgreSQL: initdb and start (unix socket only) ...")
        self._stack.callback(postgres.stop)  # Also removes what a failed start left.
        self._postgres = postgres.start()
        self.database_url = postgres.url(postgres.create_database())
        self.say("Redis: start (unix socket only) ...")
        self._stack.callback(redis.stop)
        self._redis = redis.start()
        self.redis_url = redis.url()
        self.write_state()

    def node_env(self, name: str) -> dict[str, str]:
        env = lanner_env(self.directory / name)
        env.update(
            LANNER_DATABASE_URL=self.database_url,
            LANNER_REDIS_URL=self.redis_url,
            LANNER_NODE_ID=name,
            LANNER_HISTORY_NODE=HISTORY_NODE,
            LANNER_LOG_LEVEL="INFO",  # Where each pool listens, read back from the log.
        )
        return env

    def prepare_database(self) -> None:
        """Migrations, the report currency, a demo campaign and the first admin, as `lanner run`."""
        from models.accounts.users import ensure_first_admin
        from models.admin.services import first_campaign
        from models.migrations.runner import migrate
        from models.reporting.currency import adopt_report_currency
        from models.store.database import open_database
        from settings import load_settings

        self.say("Migrating the database, a demo campaign and the first admin ...")
        settings = load_settings(self.node_env("node-1"))
        database = open_database(self.database_url)
        try:
            migrate(database)
            adopt_report_currency(database, settings.report_currency)
            self.demo_alias = first_campaign(database).alias
            self.first_admin = ensure_first_admin(database)
        finally:
            database.close()

    def start_nodes(self) -> None:
        for number in range(1, self.nodes + 1):
            name = f"node-{number}"
            node = Node(name, self.directory / name, self.node_env(name))
            node.data_dir.mkdir()
            # The flusher is stopped after the web workers, so that it lands what they journalled last.
            node.worker = ManagedProcess(
                f"{name} lanner worker", [*LANNER, "worker"], node.data_dir / "worker.log", node.env
            )
            self._stack.callback(node.worker.stop, signal.SIGTERM, 60)
            args = [
                *LANNER,
                "serve",
                "--workers",
                "1",
                "--bind",
                "127.0.0.1:0",
                "--admin-bind",
                "127.0.0.1:0",
            ]
            node.serve = ManagedProcess(f"{name} lanner serve", args, node.data_dir / "serve.log", node.env)
            self._stack.callback(node.serve.stop, signal.SIGTERM, 30)
            self.members.append(node)
            self.say(f"{name}: starting `lanner serve` and `lanner worker` ...")
        for node in self.members:
            assert node.serve is not None
            node.port = bound_port(node.serve, "web")
            node.admin_port = bound_port(node.serve, "admin")
            wait_http(node.serve, node.port, "/healthz", 200, START_SECONDS)
            self.say(f"{node.name}: ready, web 127.0.0.1:{node.port}, admin 127.0.0.1:{node.admin_port}")
            self.write_state()

    def start_nginx(self) -> None:
        if not Path(NGINX).exists():
            raise BenchError(
                f"{NGINX} is missing: the cluster's nodes are behind nginx (apt-get install nginx)."
            )
        self.say("nginx: one upstream over every node ...")
        for _ in range(NGINX_TRIES if self.port == 0 else 1):
            port = self.port or free_port()
            if self._start_nginx_on(port):
                self.port = port
                break
        else:
            raise BenchError(
                f"nginx could not listen on 127.0.0.1:{self.port or 'a free port'}: it is taken."
            )
        self.campaign_url = f"http://127.0.0.1:{self.port}/{self.demo_alias}{DEMO_QUERY}"
        self.panel_url = f"http://127.0.0.1:{self.port}/panel"

    def _start_nginx_on(self, port: int) -> bool:
        """nginx on `port`, answering; False if the port was taken."""
        prefix = self.directory / "nginx"
        shutil.rmtree(prefix, ignore_errors=True)
        (prefix / "temp").mkdir(parents=True)
        write_nginx_config(prefix, port, self.members, self.node_env("node-1"))
        args = [NGINX, "-c", str(prefix / "nginx.conf"), "-p", str(prefix), "-g", NGINX_DIRECTIVES]
        nginx = ManagedProcess("nginx", args, prefix / "run.log", {"PATH": os.environ.get("PATH", "")})
        try:
            wait_http(nginx, port, "/healthz", 200, START_SECONDS)
        except BenchError:
            nginx.stop()
            if "Address already in use" in nginx.log_tail() + _read(prefix / "error.log"):
                return False
            raise
        self.nginx = nginx
        self._stack.callback(nginx.stop, signal.SIGTERM, 10)
        return True

    def write_state(self) -> None:
        """DIR/cluster.json: what `lanner cluster down --dir DIR` stops."""
        postgres, redis = self._postgres, self._redis
        state = {
            "pid": os.getpid(),
            "started": process_start_time(os.getpid()),
            "postgres_data": str(postgres.data_dir) if postgres is not None else None,
            "postgres_bindir": str(postgres.bindir) if postgres is not None else None,
            "redis_pid": redis.process.pid if redis is not None and redis.process is not None else None,
            "redis_dir": str(redis.base) if redis is not None else None,
            "database_url": self.database_url,
            "redis_url": self.redis_url,
            "port": self.port,
            "nodes": [node.name for node in self.members],
        }
        path = self.directory / STATE_FILE
        path.with_suffix(".tmp").write_text(json.dumps(state, indent=1))
        path.with_suffix(".tmp").replace(path)

    # -- running and stopping ----------------------------------------------------------------

    def wait(self, is_stopping: Callable[[], bool]) -> None:
        """Until `is_stopping()`; says once about each process that exited meanwhile."""
        told: set[str] = set()
        while not is_stopping():
            processes = [self.nginx, *(p for node in self.members for p in (node.serve, node.worker))]
            for process in processes:
                if process is not None and not process.is_running() and process.name not in told:
                    told.add(process.name)
                    self.say(f"{process.name} exited ({process.process.returncode}); see {process.log_path}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Everything, in the reverse order of its start: nginx, the nodes (web, then flusher), Redis,
        PostgreSQL; each waited for."""
        with signals_deferred():
            self._stack.close()


def write_nginx_config(prefix: Path, port: int, nodes: list[Node], env: dict[str, str]) -> None:
    """What `lanner nginx site` (one --upstream and --admin-upstream a node) and `lanner nginx main`
    write, rendered here: two processes fewer to start."""
    from settings import load_settings
    from workers.ops.certs import site_settings
    from workers.ops.nginx import SiteOptions, render_main, render_site

    site = SiteOptions(
        upstream=tuple(f"127.0.0.1:{node.port}" for node in nodes),
        admin_upstream=tuple(f"127.0.0.1:{node.admin_port}" for node in nodes),
        report_upstream=next(f"127.0.0.1:{node.admin_port}" for node in nodes if node.name == HISTORY_NODE),
        listen=f"127.0.0.1:{port}",
        **site_settings(load_settings(env)),
    )
    (prefix / "site.conf").write_text(render_site(site))
    main = render_main(
        sites=str(prefix / "site.conf"),
        pid_path=str(prefix / "nginx.pid"),
        error_log=str(prefix / "error.log"),
        temp_dir=str(prefix / "temp"),
    )
    (prefix / "nginx.conf").write_text(main)


def bound_port(process: ManagedProcess, pool: str) -> int:
    """The port `lanner serve` bound for `pool` (started on port 0), read back from its log."""
    pattern = re.compile(LISTENING.format(pool=pool))
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        found = pattern.search(_read(process.log_path))
        if found:
            return int(found.group(1))
        if not process.is_running():
            raise BenchError(
                f"{process.name} exited with {process.process.returncode}:\n{process.log_tail()}"
            )
        time.sleep(0.05)
    raise BenchError(f"{process.name} did not listen within {START_SECONDS:.0f} s:\n{process.log_tail()}")


def refuse_used(directory: Path) -> None:
    """BenchError for a directory a cluster runs from, or one a stopped cluster's nodes left."""
    state = read_state(directory)
    if state is not None and _is_alive(state["pid"], state["started"]):
        raise BenchError(
            f"A cluster runs from {directory} already (pid {state['pid']}): "
            f"`lanner cluster down --dir {directory}` stops it."
        )
    if any(directory.glob("node-*")):
        raise BenchError(
            f"{directory} holds the nodes of a cluster that has stopped (its spools name another "
            "database): remove it, or give another --dir."
        )


def read_state(directory: Path) -> dict | None:
    try:
        return json.loads((directory / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        raise BenchError(f"{directory / STATE_FILE} is not a cluster's state: remove it.") from None


def stop_cluster(directory: Path, say: Callable[[str], None] = print) -> None:
    """`lanner cluster down`: ask `up` to stop everything and wait for it; if `up` is gone (killed),
    stop what it left: its nodes got SIGTERM when it died, the servers did not."""
    state = read_state(directory)
    if state is None:
        raise BenchError(f"No cluster runs from {directory} (no {STATE_FILE} there).")
    pid, started = state["pid"], state["started"]
    if _is_alive(pid, started):
        say(f"Stopping the cluster of `lanner cluster up` (pid {pid}) ...")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while _is_alive(pid, started):
            if time.monotonic() > deadline:
                raise BenchError(f"`lanner cluster up` (pid {pid}) did not stop within {STOP_SECONDS:.0f} s.")
            time.sleep(0.1)
        say("Stopped.")
        return
    say(f"`lanner cluster up` (pid {pid}) is gone; stopping the PostgreSQL and Redis it left ...")
    if state.get("redis_pid"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state["redis_pid"], signal.SIGTERM)
    if state.get("postgres_data") and Path(state["postgres_data"], "postmaster.pid").exists():
        from workers.bench.servers import run_as

        pg_ctl = Path(state["postgres_bindir"]) / "pg_ctl"
        user = run_as()  # pg_ctl refuses root, as the server does: its user.
        as_user = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        stopped = subprocess.run(
            [str(pg_ctl), "-D", state["postgres_data"], "-m", "fast", "-w", "stop"],
            capture_output=True,
            text=True,
            check=False,
            timeout=STOP_SECONDS,
            cwd="/",
            **as_user,
        )
        if stopped.returncode != 0:
            raise BenchError(f"pg_ctl could not stop the cluster's PostgreSQL: {stopped.stderr.strip()}")
    for server_dir in (
        state.get("postgres_data") and str(Path(state["postgres_data"]).parent),
        state.get("redis_dir"),
    ):
        if server_dir:
            shutil.rmtree(server_dir, ignore_errors=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    say("Stopped.")


def run_cluster(directory: Path | None, nodes: int, port: int, say: Callable[[str], None]) -> None:
    """`lanner cluster up`: start, print where everything is, run until SIGINT or SIGTERM, stop."""
    if nodes < 1:
        raise BenchError("--nodes must be at least 1.")
    is_temporary = directory is None
    directory = Path(tempfile.mkdtemp(prefix="lanner-cluster-")) if directory is None else directory.resolve()
    stopping = []
    previous = {
        sig: signal.signal(sig, lambda *_: stopping.append(True)) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        with LocalCluster(directory, nodes, port, say) as cluster:
            say("")
            say(f"Cluster of {nodes} node{'s' if nodes > 1 else ''} up, files in {directory}")
            say(f"Campaign URL: {cluster.campaign_url}")
            say(f"Panel: {cluster.panel_url}")
            if cluster.first_admin:
                say(f"First login: {cluster.first_admin[0]}, password: {cluster.first_admin[1]}")
            say(f"The CLI on it: export LANNER_DATABASE_URL='{cluster.database_url}'")
            say(f"               export LANNER_REDIS_URL='{cluster.redis_url}'")
            say(f"Ctrl-C (or `lanner cluster down --dir {directory}`) stops everything.")
            cluster.wait(lambda: bool(stopping))
            say("Stopping nginx, the nodes, Redis and PostgreSQL ...")
        say("Stopped; nothing of the cluster runs any more.")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if is_temporary:
            shutil.rmtree(directory, ignore_errors=True)


def _is_alive(pid: int, started: int | None) -> bool:
    """The very process that started at `started` runs (a zombie has exited: its parent has not
    reaped it yet)."""
    fields = stat_fields(pid)
    return started is not None and fields is not None and fields[0] != "Z" and int(fields[19]) == started


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
