"""Throwaway PostgreSQL and Redis servers, for the tests (tests/conftest.py registers them as
fixtures) and for `lanner bench unique|rotation --cluster` (workers/bench/cluster.py).

Each listens only on a unix socket in its own temporary directory: no TCP port, so no race for one,
and nothing of the distribution's own services (a running cluster, redis-server.service) is used or
needed. PostgreSQL refuses to run as root; under root (CI) both servers run as an unprivileged user
(`lanner-test` when `make test-deps` made it, else `nobody`), their directory handed to that user.

PostgreSQL is tuned for throwaway data by default: fsync, synchronous_commit and full_page_writes
off (a crash of the test box loses nothing a test needs; a test about durability starts its own
PostgresServer(fsync=True)). shared_buffers is small: tests hold kilobytes. The bench starts
PostgresServer(fsync=True, shared_buffers="128MB"): durability is part of what it measures, and
128 MB is Debian's default.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from models.errors import LannerError

UNPRIVILEGED_USERS = ("lanner-test", "nobody")
SUPERUSER = "lanner"  # initdb's superuser; trust authentication over the socket only.
POSTGRES_MISSING = "Debian's postgresql package (apt-get install postgresql; `make test-deps` installs it)"
REDIS_MISSING = "Debian's redis-server package (apt-get install redis-server; `make test-deps` installs it)"
START_SECONDS = 30


class ServerMissing(LannerError, RuntimeError):
    """The server's binaries are not installed; the message names the package."""


def postgres_bindir() -> Path | None:
    """The newest PostgreSQL server's bin directory: Debian keeps it off PATH (/usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).resolve().parent if on_path else None


def run_as() -> pwd.struct_passwd | None:
    """The user the servers run as when this process is root; None: as this process's user."""
    if os.geteuid() != 0:
        return None
    for name in UNPRIVILEGED_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError(f"running as root, the test servers need one of the users {UNPRIVILEGED_USERS}")


def _owned_dir(prefix: str) -> Path:
    """A new temporary directory the servers' user owns (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    user = run_as()
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)
    return path


def _user_options() -> dict:
    user = run_as()
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _run(args: list[str], cwd: Path) -> None:
    result = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=120, env=_server_env(), **_user_options()
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")


def _server_env() -> dict[str, str]:
    user = run_as()
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if user is not None:
        environ.update(HOME=str(Path(tempfile.gettempdir())), USER=user.pw_name)
    return environ


class PostgresServer:
    """A PostgreSQL cluster of its own (initdb) under `base`, listening on `base`/socket only."""

    def __init__(
        self, *, fsync: bool = False, shared_buffers: str = "16MB", superuser: str = SUPERUSER
    ) -> None:
        self.bindir = postgres_bindir()
        if self.bindir is None or not (self.bindir / "initdb").exists():
            raise ServerMissing(f"PostgreSQL tests need {POSTGRES_MISSING}.")
        self.fsync = fsync
        self.shared_buffers = shared_buffers
        self.superuser = superuser
        self.base: Path | None = None
        self._names = itertools.count(1)

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base / "socket"

    @property
    def log_path(self) -> Path:
        return self.base / "postgres.log"

    def start(self) -> PostgresServer:
        self.base = _owned_dir("lanner-pg-")
        _run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.superuser,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            self.base,
        )
        self.socket_dir.mkdir()
        if (user := run_as()) is not None:
            os.chown(self.socket_dir, user.pw_uid, user.pw_gid)
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.socket_dir}'",
            "shared_buffers": self.shared_buffers,
            "max_connections": "100",
            "fsync": "on" if self.fsync else "off",
            "synchronous_commit": "on" if self.fsync else "off",
            "full_page_writes": "on" if self.fsync else "off",
        }
        self._options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        self.resume()
        return self

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (its first line of postmaster.pid): every backend is its child."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError, TypeError):
            return None

    def pause(self) -> None:
        """Stop the server (fast: sessions are cut, nothing is waited for), keeping its files: an
        outage, until `resume()`."""
        if (self.data_dir / "postmaster.pid").exists():
            _run(
                [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"], self.base
            )

    def resume(self) -> None:
        """Start the server on its files, at its socket (after `start()` made them, or `pause()`)."""
        _run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-o",
                self._options,
                "-w",
                "-t",
                str(START_SECONDS),
                "start",
            ],
            self.base,
        )

    def stop(self) -> None:
        """Stop the server and remove its files."""
        if self.base is None:
            return
        self.pause()
        shutil.rmtree(self.base, ignore_errors=True)
        self.base = None

    def url(self, database: str) -> str:
        """A postgresql:// URL for `database` over the server's socket (libpq's host= a directory)."""
        return f"postgresql://{self.superuser}@/{database}?host={self.socket_dir}"

    def admin(self):
        import psycopg

        return psycopg.connect(self.url("postgres"), autocommit=True)

    def create_database(self, template: str = "template0") -> str:
        """A new database copied from `template` (by default template0, empty: nothing a test left in
        template1); its name.

        FILE_COPY (PostgreSQL 15+) copies template0's few files and checkpoints, cheap with fsync off:
        17 ms a database here, against 270 ms for the default WAL_LOG, which logs every page."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"{strategy}')
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # Cuts a test's leftover sessions.

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except (OSError, TypeError):
            return ""


class RedisServer:
    """A redis-server of its own, on a unix socket in its own directory, keeping nothing on disk."""

    def __init__(self) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise ServerMissing(f"Redis tests need {REDIS_MISSING}.")
        self.base: Path | None = None
        self.process: subprocess.Popen | None = None

    @property
    def socket_path(self) -> Path:
        return self.base / "redis.sock"

    def start(self) -> RedisServer:
        self.base = _owned_dir("lanner-redis-")
        self.resume()
        return self

    def resume(self) -> None:
        """Start redis-server at the socket (after `start()` made its directory, or `pause()`): empty, as
        a Redis without persistence restarts."""
        log = open(self.base / "redis.log", "ab")
        args = [
            self.binary,
            "--port",
            "0",
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "777",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.base),
            "--daemonize",
            "no",
        ]
        # A session of its own: a Ctrl-C meant for `lanner cluster up` or the bench reaches them only,
        # and they stop Redis last.
        self.process = subprocess.Popen(
            args,
            cwd=self.base,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_server_env(),
            start_new_session=True,
            **_user_options(),
        )
        log.close()
        deadline = time.monotonic() + START_SECONDS
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start:\n{self.log()}")
            time.sleep(0.01)

    def _answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(1)
                sock.connect(str(self.socket_path))
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def url(self, database: int = 0) -> str:
        return f"unix://{self.socket_path}?db={database}"

    def pause(self) -> None:
        """Stop redis-server, keeping its directory: an outage, until `resume()`."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # redis-server exits at once on SIGTERM without --save.
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def stop(self) -> None:
        self.pause()
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def log(self) -> str:
        try:
            return (self.base / "redis.log").read_text(errors="replace")
        except (OSError, TypeError):
            return ""


def start_both(stack: ExitStack, *, shared_buffers: str = "16MB") -> tuple[PostgresServer, RedisServer]:
    """A PostgreSQL with fsync on (durability is part of what a bench measures) and a Redis, each
    stopped when `stack` closes; BenchError if either is not installed."""
    from workers.bench.errors import BenchError

    try:
        postgres, redis = PostgresServer(fsync=True, shared_buffers=shared_buffers), RedisServer()
    except ServerMissing as exc:
        raise BenchError(str(exc)) from None
    stack.callback(postgres.stop)
    postgres.start()
    stack.callback(redis.stop)
    redis.start()
    return postgres, redis
