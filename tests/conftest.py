"""Fixtures: a migrated real SQLite file per test, the `lanner` CLI, in-process apps, live servers."""

from __future__ import annotations

import http.client
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId

from workers.bench.harness import free_port  # noqa: F401 - shared with the tests that import it from here

ROOT = Path(__file__).resolve().parent.parent
LANNER = [sys.executable, "-m", "cli"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "var"
    path.mkdir()
    return path


# The store backends every test that uses `db` (or `store`) runs against, each a parameter `backend`:
# LANNER_TEST_BACKENDS=sqlite,postgresql (make test sets both; a throwaway PostgreSQL per run). A test
# about what only SQLite has (its files, its locks) is marked sqlite_only; one about what the store does
# not change (the process model, nginx, TLS, the browser) store_agnostic.
STORE_BACKENDS = tuple(os.environ.get("LANNER_TEST_BACKENDS", "sqlite").split(","))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "sqlite_only: runs on the SQLite backend only (its files, locks, pragmas)"
    )
    config.addinivalue_line(
        "markers",
        "store_agnostic: about what does not vary with the store (the process model, nginx, TLS); "
        "runs on SQLite only, what it stores being tested on both backends elsewhere",
    )
    config.addinivalue_line(
        "markers",
        "postgresql_only: about what only PostgreSQL has (pg_dump, its locks); runs where the "
        "postgresql backend is tested",
    )
    config.addinivalue_line(
        "markers",
        "alone_on_database: on PostgreSQL, no session of the test run's own stays on the test's database "
        "(lanner restore refuses beside other clients): the reset's kept session is closed first",
    )
    config.addinivalue_line(
        "markers", "long: takes about ten seconds or more; collected first so it starts first"
    )
    if not config.pluginmanager.hasplugin("xdist"):
        # xdist registers its own mark; without it (`-p no:xdist`, as a module is measured) every
        # module grouped for `--dist loadgroup` warned of an unknown mark.
        config.addinivalue_line(
            "markers", "xdist_group(name): under `--dist loadgroup`, run in the process of its group"
        )
    share_bytecode(config)
    warm_bytecode(config)
    share_cli_servers(config)


@pytest.hookimpl(trylast=True)  # After xdist's own, which this completes.
def pytest_collection_modifyitems(config, items):
    """The long tests first, in their own order, then the rest in theirs; under `--dist loadgroup`,
    each test marked `xdist_group(name)` is sent to the process of its group.

    `make test` hands tests out one at a time as processes come free: a long test met near the end of
    the run would keep one process busy while the others sit idle. A module whose fixture builds
    one cluster or database for all its tests is a group, so one process builds it once.

    xdist 3.8 names the group in the node id by setting `item._nodeid`, an attribute pytest 9.2 no
    longer reads (the id is `item._id` now): its groups were ignored, and the cluster fixture was
    built once per test. The group suffix is set here as xdist means it to be."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    if not config.getoption("loadgroup", default=False):
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name")) for mark in marks})
        if groups and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def share_bytecode(config) -> None:
    """Let the run's Python subprocesses (thousands of `lanner` calls, servers, workers) keep the app's
    compiled bytecode, in pytest's cache directory rather than next to the sources.

    Under PYTHONDONTWRITEBYTECODE (set where source trees must stay clean) each of them compiled every
    module of the app again: about 0.1 s of CPU per process."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: nothing to keep it in.
    if cache is None:
        return
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache.mkdir("pycache"))
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    # And this process (warm_bytecode's children are forked from it): set at start-up from the
    # environment, these two are read at each import.
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = False


WARMING_PROCESSES = 2  # The box's cores.


def warm_bytecode(config) -> None:
    """Before xdist starts its processes, compile once what each of them would compile at collection.

    Each xdist process collects every test module: on a clean clone (no bytecode yet) all six compiled
    and assertion-rewrote all of them, and the app and libraries they import, at the same moment
    (~9 s of CPU each, ~2 s with the bytecode there). Importing the test modules here, in two forked
    children, writes that bytecode (the rewritten tests' included) where the processes look for it."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        return
    if sys.dont_write_bytecode:  # Nowhere to keep it: share_bytecode had no cache directory.
        return
    modules = sorted(path.stem for path in Path(__file__).parent.glob("test_*.py"))
    children = []
    for share in range(WARMING_PROCESSES):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for name in modules[share::WARMING_PROCESSES]:
                    try:
                        __import__(name)
                    except BaseException:  # noqa: BLE001 - the processes' collection reports it.
                        code = 1
            finally:
                os._exit(code)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        # A browser test is about the panel in the browser: the pages' data is tested on both backends
        # over HTTP (tests/test_panel*.py), and a second backend under Chromium cost ~40 s of CPU a run.
        one = "browser" in metafunc.fixturenames or any(
            metafunc.definition.get_closest_marker(name) for name in ("sqlite_only", "store_agnostic")
        )
        if metafunc.definition.get_closest_marker("postgresql_only"):
            metafunc.parametrize("backend", [b for b in STORE_BACKENDS if b == "postgresql"])
            return
        metafunc.parametrize("backend", ("sqlite",) if one else STORE_BACKENDS)


def backend_of(request) -> str:
    """The backend of the running test: its `backend` parameter, SQLite for a test without a database."""
    callspec = getattr(request.node, "callspec", None)
    return callspec.params.get("backend", "sqlite") if callspec else "sqlite"


@pytest.fixture
def env(data_dir: Path, request) -> dict[str, str]:
    """The environment every process of one test shares: its own data directory (and on the
    postgresql backend, its own migrated database)."""
    environ = base_environ(data_dir)
    if backend_of(request) == "postgresql":
        environ["LANNER_DATABASE_URL"] = request.getfixturevalue("postgres_migrated_url")
    return environ


def base_environ(data_dir: Path) -> dict[str, str]:
    """The environment of a test's processes on the SQLite database in `data_dir`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    environ["LANNER_DATA_DIR"] = str(data_dir)
    environ["PYTHONPATH"] = str(ROOT)
    # The run shares its machine with itself (xdist workers) and often with more: a process that yields the
    # CPU to everything else (the admin worker at SCHED_IDLE, `lanner worker` at nice 10) would wait
    # minutes for it there. Production keeps both; a test that is about them sets its own.
    environ["LANNER_ADMIN_IDLE_PRIORITY"] = "off"
    environ["LANNER_WORKER_NICE"] = "0"
    # No machine here reaches the ECB: a test that reads rates serves its own feed (tests/test_rates.py).
    environ["LANNER_EXCHANGE_RATE_URL"] = ""
    return environ


TEST_COUNTRY_DATABASE = ROOT / "tests" / "fixtures" / "maxmind" / "GeoIP2-Country-Test.mmdb"


@pytest.fixture
def bench_env(env):
    """`env` for a `lanner bench` run: the tests' small country database instead of `lanner geo build`
    (~3.4 CPU-s each run): the harness builds none where LANNER_GEO_DATABASE names one, and the
    traffic here is local."""
    return {**env, "LANNER_GEO_DATABASE": str(TEST_COUNTRY_DATABASE)}


@pytest.fixture
def settings(env):
    from settings import load_settings

    return load_settings(env)


@pytest.fixture
def store(backend, settings, request):
    """A migrated real database of the test's backend, opened in this process as `models.store.database.db`.

    A SQLite file starts as a copy of the run's migrated one (as a PostgreSQL database copies its
    template); `migrate()` then finds nothing to do. On the process's reusable PostgreSQL database the
    session is the one the last test's store kept (tests/reusable_database.py), not a new one."""
    from models.migrations.runner import migrate
    from models.store.database import db as database
    from models.store.database import open_database

    if not settings.uses_postgres and not settings.database_path.exists():
        settings.database_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(request.getfixturevalue("sqlite_template"), settings.database_path)
    reusable = _reusable_of(settings)
    if reusable is None or not _reopen_kept(reusable):
        open_database(settings.database_location, autocheckpoint=True)
    migrate(database)
    yield database
    if reusable is None or not _keep(reusable):
        database.close()


def _reusable_of(settings):
    """The process's reusable PostgreSQL database (postgres_reusable) if it is the test's, else None."""
    if not settings.uses_postgres:
        return None
    return next((r for r in _reusable_databases if r.url == settings.database_location), None)


def _reopen_kept(reusable) -> bool:
    """Bind `db` to the store's session the last test on this database kept; False if there is none,
    or it was ended since (a test that cuts sessions, a server restarted)."""
    import psycopg
    from peewee import OperationalError

    from models.store.database import proxy

    kept = reusable.take()
    if kept is None:
        return False
    handle, conn = kept
    try:
        conn.execute("SELECT 1").close()
    except (psycopg.Error, OperationalError):  # OperationalError: the store's PostgresUnavailable.
        conn.close()
        return False
    previous = proxy.obj
    for other in (previous, handle):  # What a test reopened without the store since (peewee reconnects).
        if other is not None and not other.is_closed():
            other.close()
    handle._state.set_connection(conn)
    proxy.initialize(handle)
    return True


# DISCARD ALL but for its DEALLOCATE ALL and DISCARD PLANS: a session's settings, temporary tables,
# advisory locks, cursors and LISTENs put back as a new session has them. psycopg's prepared statements
# stay, and with them psycopg's record of them (DISCARD ALL would drop them under it the second time it
# ran, its record being cleared only the first); they hold no data, and the server replans them when
# the schema under them changes.
SQL_SESSION_RESET = (
    "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; "
    "SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES"
)


def _keep(reusable) -> bool:
    """Hand the test's store session to `reusable` for the next test, its state put back as a new
    session's (SQL_SESSION_RESET), if it is still `db`'s, on that database and idle; False (the caller
    closes it) otherwise. The handle is left closed, as close() leaves it, so nothing reaches the
    session through it until the next store."""
    import psycopg
    from peewee import OperationalError

    from models.store.database import proxy

    handle = proxy.obj
    if handle is None or handle.is_closed() or getattr(handle, "dialect", None) != "postgres":
        return False
    conn = handle._state.conn
    if (
        handle.database != reusable.url
        or handle._state.transactions
        or conn.closed
        or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
    ):
        return False
    try:
        conn.execute(SQL_SESSION_RESET).close()
    except (psycopg.Error, OperationalError):  # Ended by the test: the caller closes what is left.
        return False
    handle._state.reset()
    reusable.keep(handle, conn)
    return True


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """A SQLite file migrated once per run, which each test's database copies: migrating one takes
    ~0.3 s of mostly fsync on a busy machine, a copy ~1 ms, and over a thousand tests start with one."""
    from models.migrations.runner import migrate
    from models.store.database import db as database
    from models.store.database import open_database

    path = tmp_path_factory.mktemp("sqlite-template") / "lanner.db"
    migrate(open_database(path, autocheckpoint=True))
    database.close()  # The last connection: the WAL is checkpointed into the file and removed.
    assert not path.with_name("lanner.db-wal").exists()
    return path


# -- throwaway PostgreSQL and Redis (workers/bench/servers.py) -------------------------------


def _server_missing(error: Exception):
    """Skip a test whose server is not installed; under CI (.ci/run installs both) fail instead."""
    if os.environ.get("CI"):
        raise RuntimeError(f"CI must run every test: {error}") from error
    pytest.skip(str(error))


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL for the whole run, on a unix socket in a temporary directory; stopped at the end."""
    from servers import PostgresServer, ServerMissing

    try:
        server = PostgresServer()
    except ServerMissing as error:
        _server_missing(error)
    server.start()
    yield server
    server.stop()


def _close_if_on(url: str) -> None:
    """Close this process's `models.store.database.db` if a test left it open on `url`."""
    from models.store.database import db as database

    if database.obj is not None and not database.is_closed() and database.obj.database == url:
        database.close()


def _database_of(server, template: str = "template0"):
    name = server.create_database(template)
    yield server.url(name)
    _close_if_on(server.url(name))
    server.drop_database(name)


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A fresh empty database of the run's PostgreSQL, as a postgresql:// URL; dropped after the test."""
    yield from _database_of(postgres_server)


@pytest.fixture(scope="session")
def postgres_template(postgres_server) -> str:
    """A database migrated once per test process, copied into the process's reusable database
    (postgres_reusable) and by the tests that make databases of their own."""
    from models.migrations.runner import migrate
    from models.store.database import db as database
    from models.store.database import open_database

    name = postgres_server.create_database()
    migrate(open_database(postgres_server.url(name)))
    database.close()
    return name


@pytest.fixture(scope="session")
def postgres_reusable(postgres_server, postgres_template):
    """This process's one migrated database, which each test gets back in the migrated state
    (tests/reusable_database.py: a copy per test cost ~0.28 s of CPU)."""
    from reusable_database import ReusableDatabase

    database = ReusableDatabase(postgres_server, postgres_template)
    _reusable_databases.append(database)
    yield database
    _reusable_databases.remove(database)
    database.drop()


_reusable_databases: list = []  # postgres_reusable's, while it lasts: the store keeps its session on it.


@pytest.fixture
def postgres_migrated_url(postgres_reusable, request) -> str:
    """A migrated database for one test, as the migrations left it, whatever the test before did."""
    postgres_reusable.reset()
    if request.node.get_closest_marker("alone_on_database"):
        postgres_reusable.release()
    url = postgres_reusable.url
    yield url
    _close_if_on(url)


@pytest.fixture(scope="session")
def redis_server():
    """One redis-server for the whole run, on a unix socket, keeping nothing on disk."""
    from servers import RedisServer, ServerMissing

    try:
        server = RedisServer()
    except ServerMissing as error:
        _server_missing(error)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    """The run's Redis, emptied for this test, as a unix:// URL redis-py opens."""
    import redis

    client = redis.Redis.from_url(redis_server.url())
    client.flushall()
    client.close()
    return redis_server.url()


@pytest.fixture
def db(store):
    """The store's database handle: what most tests and every domain call are given."""
    return store


# `lanner` calls through tests/cli_server.py (a process forked per call from one that imported the app
# once) unless LANNER_TEST_CLI=subprocess; commands that choose their database drivers themselves always
# run as `python -m cli`.
_cli_servers: dict[str, object] = {}
IS_CLI_FORKED = os.environ.get("LANNER_TEST_CLI", "fork") != "subprocess"


# Where a server started by pytest's controlling process listens (share_cli_servers), per kind.
SHARED_CLI_SERVER = "LANNER_TEST_CLI_SERVER_{kind}"


def _start_cli_server(kind: str):
    import atexit
    import tempfile

    from cli_server import CliServer

    environ = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    environ["PYTHONPATH"] = str(ROOT)
    server = CliServer(tempfile.mkdtemp(prefix="lanner-cli-"), kind, environ, str(ROOT))
    atexit.register(server.stop)
    return server


def _cli_server(kind: str):
    from cli_server import CliServer

    server = _cli_servers.get(kind)
    if server is None:
        shared = os.environ.get(SHARED_CLI_SERVER.format(kind=kind.upper()))
        server = CliServer.attach(shared) if shared else _start_cli_server(kind)
        _cli_servers[kind] = server
        server.wait_ready(START_SECONDS)
    return server


def share_cli_servers(config) -> None:
    """Under xdist, one fork server per backend for the whole run, started here in the controlling
    process (which runs no test) before it starts its workers, which inherit where they listen.

    Each of `make test`'s six processes started its own for each backend: twelve servers importing
    the app (~1 s of CPU each) where two serve every call; a server forks a child per connection, so
    the workers' calls do not wait on each other."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        return
    if not IS_CLI_FORKED:
        return
    for kind in STORE_BACKENDS:
        server = _start_cli_server(kind)  # Not waited for: the workers wait, once they need it.
        _cli_servers[kind] = server
        os.environ[SHARED_CLI_SERVER.format(kind=kind.upper())] = server.path


def _server_kind(env: dict[str, str]) -> str:
    return "postgresql" if env.get("LANNER_DATABASE_URL", "").startswith("postgres") else "sqlite"


def _run_forked(env: dict[str, str], args: tuple[str, ...], timeout: float) -> subprocess.CompletedProcess:
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = _cli_server(_server_kind(env)).run(list(args), env, str(ROOT), timeout, out, err)
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode().replace("\r\n", "\n").replace("\r", "\n") for f in (out, err))
    return subprocess.CompletedProcess([*LANNER, *args], code, stdout, stderr)


def run_lanner(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    if IS_CLI_FORKED and args[:2] != ("db", "copy") and args[:1] != ("bench",):
        result = _run_forked(env, args, timeout=120)
    else:
        result = subprocess.run(
            [*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    if check and result.returncode != 0:
        raise AssertionError(
            f"lanner {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
        )
    return result


@pytest.fixture
def lanner(env, db):
    """Run the CLI against this test's (migrated) database."""

    def call(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run_lanner(env, *args, check=check)

    return call


@dataclass
class LiveProcess:
    process: subprocess.Popen
    log_path: Path
    port: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        self.signal(sig)
        return self.wait_stopped(timeout)

    def signal(self, sig: int) -> None:
        """`sig` to the process if it still runs."""
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def wait_stopped(self, timeout: float) -> int:
        """Its exit status, once it has ended: killed if it has not within `timeout` seconds."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.returncode


def start_process(args: list[str], env: dict[str, str], log_path: Path) -> LiveProcess:
    """A long-running process (a server, a consumer, nginx). `lanner` ones are forked from the tests'
    fork server like a `lanner` call (run_lanner): Python's start and the app's imports cost ~0.3 s of
    CPU a process, and a run starts a few hundred."""
    with open(log_path, "wb") as log:
        if IS_CLI_FORKED and args[:3] == LANNER and args[3:4] not in (["db"], ["bench"]):
            process = _cli_server(_server_kind(env)).spawn(args[3:], env, str(ROOT), log, log)
        else:
            process = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return LiveProcess(process, log_path)


# Deadlines for a condition a test waits on, generous for a busy box: a healthy run meets them in a fraction.
START_SECONDS = 90  # a server process binding its ports, loading the app, answering /healthz


def wait_healthy(live: LiveProcess, deadline_seconds: float = START_SECONDS, port: int | None = None) -> None:
    """Poll `/healthz` (on `port`, by default the server's web port) until it answers 200."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if live.process.poll() is not None:
            raise AssertionError(f"server exited with {live.process.returncode}:\n{live.log}")
        try:
            status, _, _ = request(live.port if port is None else port, "/healthz")
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    live.stop()
    raise AssertionError(f"server not healthy within {deadline_seconds}s:\n{live.log}")


class ClientThreads:
    """Client threads running `_run(n)` until the `with` block ends (then joined for `join_seconds`)."""

    join_seconds = 10.0

    def __init__(self, threads: int) -> None:
        self.is_stopped = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.is_stopped.set()
        for thread in self.threads:
            thread.join(timeout=self.join_seconds)

    def _run(self, n: int) -> None:
        raise NotImplementedError


def wait_until(predicate, timeout: float, what: str, log=lambda: ""):
    """The first true value of `predicate()`, polled until `timeout`; else fail saying what with `log()`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{log()}")


def bound_port(live: LiveProcess, pool: str = "web", deadline_seconds: float = START_SECONDS) -> int:
    """The port a server started on port 0 really bound, read back from its log."""
    pattern = re.compile(rf"{pool}: listening on 127\.0\.0\.1:(\d+) ")
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        found = pattern.search(live.log)
        if found:
            return int(found.group(1))
        if live.process.poll() is not None:
            raise AssertionError(f"server exited with {live.process.returncode}:\n{live.log}")
        time.sleep(0.05)
    live.stop()
    raise AssertionError(f"server did not log its {pool} address within {deadline_seconds}s:\n{live.log}")


@pytest.fixture
def start_server(env, db, tmp_path):
    """Start `lanner serve` on ports the kernel picks (extra env allowed), once it answers; stopped at
    teardown. One web worker unless a test asks for more (a test about several workers): each one
    loading the app costs ~0.2 s of CPU, ~70 s a run. With `admin=True` (a test of the admin API or
    the panel) its admin worker, which otherwise starts on demand at the first request, is started at
    once and answers too."""
    started: list[LiveProcess] = []

    def start(workers: int = 1, *, admin: bool = False, **extra_env: str) -> LiveProcess:
        environ = {**env, **{k: str(v) for k, v in extra_env.items()}}
        return serve(environ, tmp_path / f"serve-{len(started)}.log", started, workers, admin=admin)

    yield start
    stop_servers(started)


def serve(
    env: dict[str, str], log_path: Path, started: list[LiveProcess], workers: int = 1, *, admin: bool = False
) -> LiveProcess:
    """`lanner serve` with `env` on ports the kernel picks, once it answers (appended to `started`
    before it does, for the caller to stop)."""
    environ = {"LANNER_LOG_LEVEL": "INFO", **({"LANNER_ADMIN_IDLE_SECONDS": "0"} if admin else {}), **env}
    args = [*LANNER, "serve", "--workers", str(workers), "--bind", "127.0.0.1:0"]
    args += ["--admin-bind", "127.0.0.1:0"]
    live = start_process(args, environ, log_path)
    started.append(live)
    live.port = bound_port(live)
    live.extra["admin_port"] = bound_port(live, "admin")
    wait_healthy(live)
    if admin:
        wait_healthy(live, port=live.extra["admin_port"])
    return live


def stop_servers(started: list[LiveProcess]) -> None:
    for live in started:
        if live.stop() not in (0, -signal.SIGTERM):
            print(live.log)


@dataclass
class SharedServer:
    """A module's `lanner serve` on a database of its own, shared by the module's tests that keep their
    data apart (each its own campaign, its rows read by its campaign id)."""

    live: LiveProcess
    env: dict[str, str]
    location: Path | str

    @property
    def port(self) -> int:
        return self.live.port

    @property
    def log(self) -> str:
        return self.live.log

    @property
    def settings(self):
        from settings import load_settings

        return load_settings(self.env)

    @property
    def db(self):
        """`models.store.database.db`, which `shared_server` opens on this server's database for a test."""
        from models.store.database import db

        return db

    def lanner(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run_lanner(self.env, *args, check=check)


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory):
    """The module's shared servers, one per backend, each started when a test first asks for it
    (`shared_server`); stopped, and a PostgreSQL one's database dropped, after the module."""
    servers: dict[str, SharedServer] = {}
    started: list[LiveProcess] = []
    dropped: list = []

    def get(backend: str, request) -> SharedServer:
        if backend in servers:
            return servers[backend]
        base = tmp_path_factory.mktemp(f"shared-{backend}")
        data_dir = base / "var"
        data_dir.mkdir()
        environ = base_environ(data_dir)
        if backend == "postgresql":
            postgres = request.getfixturevalue("postgres_server")
            name = postgres.create_database(request.getfixturevalue("postgres_template"))
            dropped.append(lambda: postgres.drop_database(name))
            environ["LANNER_DATABASE_URL"] = postgres.url(name)
        from settings import load_settings

        location = load_settings(environ).database_location
        if backend != "postgresql":
            Path(location).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(request.getfixturevalue("sqlite_template"), location)
        live = serve(environ, base / "serve.log", started)
        servers[backend] = SharedServer(live, environ, location)
        return servers[backend]

    yield get
    stop_servers(started)
    for drop in dropped:
        drop()


@pytest.fixture
def shared_server(backend, module_servers, request):
    """The module's server of the test's backend, with `models.store.database.db` open on its database
    for the test; the test must keep to its own data (no `db`, `store` or `lanner` of its own)."""
    from models.store.database import db as database
    from models.store.database import open_database

    shared = module_servers(backend, request)
    open_database(shared.location, autocheckpoint=True)
    yield shared
    database.close()


@pytest.fixture
def server(start_server):
    return start_server()


@pytest.fixture
def start_consumer(env, db, tmp_path):
    started: list[LiveProcess] = []

    def start(**extra_env: str) -> LiveProcess:
        environ = {**env, **{k: str(v) for k, v in extra_env.items()}}
        live = start_process([*LANNER, "worker"], environ, tmp_path / f"worker-{len(started)}.log")
        started.append(live)
        return live

    yield start
    # Every consumer told first, then each waited for: a consumer on Redis stops gracefully only when
    # its BRPOP returns (workers/runtime/redisqueue.py READ_TIMEOUT, 5 s), and two stopped one after
    # the other held a test's teardown ~10 s. Signalled once each: a second SIGINT cuts Huey's
    # graceful stop short.
    for live in started:
        live.signal(signal.SIGINT)
    for live in started:
        live.wait_stopped(timeout=30)


REQUEST_SECONDS = 60  # one answer of a live server: a hung one fails the test, a slow box does not


def request(
    port: int | InProcessApp,
    path: str,
    headers: dict[str, str | bytes] | None = None,
    method: str = "GET",
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection (or a call of an in-process app); redirects are not followed."""
    if isinstance(port, InProcessApp):
        return port.request(path, headers, method, body)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_SECONDS)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket (the admin worker's default address)."""

    def __init__(self, path: str, timeout: float = REQUEST_SECONDS):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def unix_request(
    path: str, url: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """`request()` over a unix socket."""
    connection = UnixHTTPConnection(path)
    try:
        connection.request("GET", url, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def raw_request(port: int, data: bytes) -> bytes:
    """Send raw bytes, return what came back (for requests http.client refuses to build)."""
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_SECONDS) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                break
        return b"".join(chunks)


def click(
    port: int | InProcessApp,
    alias: str,
    query: str = "",
    *,
    ip: str = "203.0.113.7",
    ua: str = "Mozilla/5.0 test",
):
    """A visitor's click through the trusted-proxy header (the test client is on loopback)."""
    path = f"/{alias}" + (f"?{query}" if query else "")
    return request(port, path, {"X-Real-IP": ip, "User-Agent": ua.encode()})  # type: ignore[dict-item]


def subid_of(location: str) -> str:
    from urllib.parse import parse_qs, urlsplit

    return parse_qs(urlsplit(location).query)["click"][0]


class Clock:
    """A controllable time.time for in-process trackers."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return Clock()


def _as_wsgi(value: str | bytes) -> str:
    """A header value as a WSGI server hands it on: its bytes on the wire (http.client sends str as latin-1)
    as latin-1 text."""
    return (value if isinstance(value, bytes) else value.encode("latin-1")).decode("latin-1")


class InProcessApp:
    """A web worker's app called in this process: no socket, no master, no worker, no nginx in front.

    `request()` answers as conftest.request() does over a socket, through what Falcon's TestClient runs
    (create_environ, wsgiref's validator, StartResponseMock) from what http.client would send, the peer on
    loopback; not TestClient itself, which always sends a User-Agent (a visitor who sends none is a bot)."""

    def __init__(self, app, clock: Clock) -> None:
        self.app = app
        self.clock = clock

    def request(
        self,
        path: str,
        headers: dict[str, str | bytes] | None = None,
        method: str = "GET",
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        import wsgiref.validate

        from falcon.testing import StartResponseMock, create_environ
        from falcon.testing.helpers import closed_wsgi_iterable

        path, _, query = path.partition("?")
        sent = {name: _as_wsgi(value) for name, value in (headers or {}).items()}
        environ = create_environ(
            path=path,
            query_string=query,
            method=method,
            headers=sent,
            body=body or b"",
            host="127.0.0.1",
            remote_addr="127.0.0.1",
        )
        if not any(name.lower() == "user-agent" for name in sent):
            del environ["HTTP_USER_AGENT"]  # TestClient's own; http.client sends none.
        answer = StartResponseMock()
        data = b"".join(closed_wsgi_iterable(wsgiref.validate.validator(self.app)(environ, answer)))
        for _name, value in answer.headers:
            value.encode("latin-1")  # What a WSGI server must send a header as: one it cannot fails here.
        return int(answer.status[:3]), {k.lower(): v for k, v in answer.headers}, data


@pytest.fixture
def start_app(env, db):
    """In-process apps (`create_worker_app(settings)`: campaign URLs in front of Falcon, the rest through
    it; extra env allowed) over a real tracker on this test's migrated database and spool, as a web
    worker builds it, with a clock the test moves (it starts now)."""
    from app import build_tracker, create_worker_app
    from settings import load_settings

    trackers = []

    def start(**extra_env: str) -> InProcessApp:
        app_settings = load_settings({**env, **{k: str(v) for k, v in extra_env.items()}})
        clock = Clock(time.time())
        tracker = build_tracker(db, app_settings, clock=clock)
        trackers.append(tracker)
        return InProcessApp(create_worker_app(app_settings, tracker=tracker), clock)

    yield start
    for tracker in trackers:
        tracker.close()


@pytest.fixture
def app_client(start_app) -> InProcessApp:
    return start_app()


@pytest.fixture
def make_tracker(db, settings, clock):
    """In-process ClickTrackers ("workers") on the test's database and spool, closed at teardown."""
    from models.clicks.tracker import ClickTracker

    trackers = []

    def make(**overrides):
        options = dict(
            spool_dir=settings.spool_dir,
            segment_bytes=settings.spool_segment_bytes,
            uniqueness_hours=24,
            debounce_seconds=2,
            clock=clock,
            rng=random.Random(7),
        )
        options.update(overrides)
        tracker = ClickTracker(db, **options)
        trackers.append(tracker)
        return tracker

    yield make
    for tracker in trackers:
        tracker.close()


# -- the web panel in a real browser ---------------------------------------------------------

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

MISSING = (
    "Debian's chromium and chromium-driver "
    "(apt-get install chromium chromium-driver; `make test` installs them)"
)
# A browser test module sets `pytestmark = browser_required` and takes the `browser` fixture.
# Under CI the test is not skipped: its `browser` fixture fails, saying what is missing.
browser_required = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"), reason=f"needs {MISSING}"
)


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the whole run; tests take it as `browser`."""
    if not (CHROMIUM and CHROMEDRIVER) and os.environ.get("CI"):  # .ci/run installed them, so run.
        raise RuntimeError(f"CI must run the panel's browser tests, and they need {MISSING}.")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    # A given driver path: Selenium Manager never looks for (or downloads) another.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(90)
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium):
    """The run's Chromium, its cookies cleared after the test: every server listens on 127.0.0.1, and a
    cookie is the host's whatever the port."""
    yield chromium
    chromium.delete_all_cookies()
