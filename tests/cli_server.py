"""A fork server for the tests' `lanner` calls (conftest.run_lanner): `python -m cli` without paying for
Python's start and the app's imports each time.

A run makes thousands of short `lanner` calls, and each spent ~0.15 s of CPU importing click, peewee and
the models before doing a few milliseconds of work: minutes of a two-core box. The server, one per
pytest process and kind of database, imports them once; each call is a process forked from it that takes
the caller's stdin/stdout/stderr (passed over a unix socket), environment, working directory and argv,
and runs the `cli` module as `python -m cli` does, so a command still runs in a process of its own, with
its own database connection, umask and exit code.

A server for SQLite hides the PostgreSQL drivers before it imports anything, as `lanner` does on SQLite
(models/store/drivers.py); commands that decide about the drivers themselves (`db copy`, `bench`) run
as real subprocesses (conftest.run_lanner).

Run as `python tests/cli_server.py SOCKET sqlite|postgresql`; it exits when its parent does.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import struct
import sys

PRELOAD = (
    "settings",
    # The `lanner` group; its 30 command modules, which it imports when a command is named, below.
    "cli",
    "peewee",
    "click",
    "models.store.database",
    "models.migrations.runner",
    "models.migrations.deferred",
    "models.admin.services",
    "models.admin.landers",
    "models.admin.domains",
    "models.conversions.postbacks",
    "models.conversions.outbound",
    "models.clicks.tracker",
    "models.reporting.clicklog",
    "models.routing.trace",
    "models.lookups.geoupdate",
    "models.ops.retention",
    "workers.runtime.tasks",
    "workers.ops.status",
    "app",
    # What `lanner serve` (its master, web and admin workers) and `lanner worker` import as they start:
    # the tests start a few hundred servers and consumers (ForkedProcess).
    "workers.runtime.server",
    "workers.runtime.heartbeat",
    "workers.runtime.spoolwatch",
    "workers.ops.metrics",
    "routes.click",
    "routes.errors",
    "models.optimisation.rules",
    "models.optimisation.sourcepause",
    "routes.clickapi",
    "routes.api",
    "routes.postback",
    "routes.landers",
    "routes.health",
    "routes.metrics",
    "routes.panel",
    "routes.v1",
    "models.reporting.history",
    "models.reporting.historyclicks",
    "huey.consumer",
)
# And every module of these packages: the admin worker imports the admin API's and the panel's routes
# (and Jinja2) after fork, ~0.2 s of CPU at each of its starts; walked, so that a page added later is too.
PRELOAD_PACKAGES = ("routes",)
HEADER = struct.Struct("!I")


def _preload(kind: str) -> None:
    import importlib
    import pkgutil

    from models.store.drivers import hide_postgres_drivers

    hide_postgres_drivers("" if kind == "sqlite" else "postgresql://")
    for name in PRELOAD + (("models.store.postgres",) if kind == "postgresql" else ("models.store.sqlite",)):
        try:
            importlib.import_module(name)
        except ImportError:  # Moved or renamed: the command imports what it needs itself.
            pass
    for package in PRELOAD_PACKAGES:
        for module in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
            importlib.import_module(module.name)
    # Every command module `lanner` would import for its command: ~60 ms of CPU a call paid importing them.
    import cli

    for command in cli.COMMANDS:
        cli.main.add_command(cli.load_command(command))


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    size = HEADER.unpack(data[: HEADER.size])[0]
    data = data[HEADER.size :]
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the caller went away")
        data += chunk
    return json.loads(data), fds


def _run_command(request: dict, fds: list[int]) -> None:
    """In the forked child: become `python -m cli ARGS`; never returns."""
    import atexit
    import runpy
    import traceback

    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.argv = ["-m", *request["args"]]
        sys.path[0] = os.getcwd()
        try:
            runpy.run_module("cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit:
            if exit.code is None or isinstance(exit.code, int):
                code = exit.code or 0
            else:
                print(exit.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _serve_one(conn: socket.socket) -> None:
    """In a child of the server: run the command in a grandchild, tell the caller its pid and exit code."""
    request, fds = _receive(conn)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_command(request, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def serve(path: str, kind: str) -> None:
    parent = os.getppid()
    sys.path[0] = os.getcwd()  # As under `python -m cli`, not this file's directory.
    _preload(kind)
    # What the imports made, out of the collector's reach: a forked child's collection walks them and so
    # writes to (and copies) the server's pages (a fork that only exits: 2.6 -> 1.9 ms; two a call).
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # Callers connect once it is there: the imports are done.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # The per-call children reap themselves.
    while os.getppid() == parent:
        if not select.select([listener], [], [], 1.0)[0]:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            try:
                _serve_one(conn)
            finally:
                os._exit(0)
        conn.close()


class CliServer:
    """The caller's side: starts the server on first use, runs one command a call."""

    def __init__(self, directory: str, kind: str, environ: dict[str, str], cwd: str) -> None:
        import subprocess

        self.path = os.path.join(directory, f"cli-{kind}.sock")
        self.process: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.path, kind],
            env=environ,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )

    @classmethod
    def attach(cls, path: str) -> CliServer:
        """The caller's side of a server another process started (and stops): pytest's controlling
        process under xdist starts one per kind for all its workers (conftest.share_cli_servers)."""
        server = cls.__new__(cls)
        server.path, server.process = path, None
        return server

    def wait_ready(self, timeout: float) -> None:
        import time

        deadline = time.monotonic() + timeout
        while not os.path.exists(self.path):
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the lanner fork server exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the lanner fork server did not start within {timeout} s")
            time.sleep(0.01)

    def run(self, args: list[str], env: dict[str, str], cwd: str, timeout: float, stdout, stderr) -> int:
        """Run `lanner ARGS`, its output into the open files `stdout` and `stderr`; its exit code.
        subprocess.TimeoutExpired (the command killed) after `timeout` seconds."""
        import subprocess

        process = self.spawn(args, env, cwd, stdout, stderr)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise

    def spawn(self, args: list[str], env: dict[str, str], cwd: str, stdout, stderr) -> ForkedProcess:
        """Start `lanner ARGS` (a command, a server, a consumer); return at once a handle like a Popen."""
        body = json.dumps({"args": list(args), "env": env, "cwd": cwd}).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            with open(os.devnull, "rb") as stdin:
                fds = [stdin.fileno(), stdout.fileno(), stderr.fileno()]
                socket.send_fds(conn, [HEADER.pack(len(body))], fds)
            conn.sendall(body)
            reader = conn.makefile("rb")
            pid = json.loads(reader.readline())["pid"]
        except BaseException:
            conn.close()
            raise
        return ForkedProcess(["lanner", *args], pid, conn, reader)

    def stop(self) -> None:
        if self.process is None:  # Attached: its starter stops it.
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for remove, path in ((os.unlink, self.path), (os.rmdir, os.path.dirname(self.path))):
            try:
                remove(path)
            except OSError:
                pass


class ForkedProcess:
    """A command the fork server runs, seen as a `subprocess.Popen` is (pid, poll, wait, signals): its
    exit code arrives on the connection, from the server's child that waits for it."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket, reader) -> None:
        self.args, self.pid, self.returncode = args, pid, None
        self._conn, self._reader = conn, reader

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_code()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_code()
        return self.returncode

    def _read_code(self) -> None:
        line = self._reader.readline()
        # No line: the server's child died before telling (never seen); say it as a kill would.
        self.returncode = json.loads(line)["code"] if line else -signal.SIGKILL
        self._reader.close()
        self._conn.close()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # Exited; its code is on the way.
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
