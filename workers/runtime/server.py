"""The bjoern process manager behind `lanner serve`: listening sockets, each with pre-forked workers.

It works like PHP-FPM's pools, static or on demand:

- the master binds each pool's socket once and forks its workers, and replaces any that exits: the
  `web` pool (`settings.workers` workers on `settings.bind`: campaign URLs, postbacks) and, when
  `settings.admin_address` is set, the `admin` pool (one worker at idle CPU priority: the report
  API and the admin API), so a heavy report never holds a worker, or CPU, that visitors are waiting for;
- an on-demand pool (the admin pool unless `admin_idle_seconds` is 0) has no worker until its socket
  has a connection waiting: the master watches the socket, forks the worker, and the worker accepts
  that connection once it has loaded the app. A worker idle for `idle_seconds` drains itself and
  the master watches the socket again, like PHP-FPM's `pm = ondemand`. Nothing is lost in between:
  a connection waits in the socket's backlog, and an idle keep-alive connection is closed the same
  way as on a reload;
- each worker calls `app_loader(settings)` itself, after fork, so it opens its own database connection
  and a reload imports the app code afresh; the loader returns the app with the largest request body
  its routes read (LoadedApp); then the worker runs bjoern on the shared socket;
- SIGHUP starts a complete new generation and drains the old one once every new worker has loaded
  the app (an app that fails to load leaves the old generation serving);
- SIGTERM or SIGINT drains every worker and returns once they are gone; a second one kills them now;
- a worker recycles itself after `max_requests` requests (plus up to 10 % jitter).

Draining bjoern 3.2.2 needs care. On SIGINT it stops accepting, but its loop keeps running while any
client connection is open (it has no keep-alive timeout); it also stops the 0.1 s timer through which
Python signal handlers run, and resets SIGINT to SIG_DFL (a second SIGINT kills the process). So a
worker keeps SIGTERM blocked, and a small drain thread waits for it with `sigtimedwait`. A drain
(SIGTERM, or max_requests reached in the request that reaches it) sends bjoern's thread exactly one
SIGINT. From then on every answer says `Connection: close`, so a keep-alive client that keeps sending
moves to a new connection, served by another worker, after its current request (bjoern decides
keep-alive from the request alone and still adds its own `Connection: Keep-Alive`; clients and nginx
honour the `close` that comes first). The drain thread exits the process with `os._exit(0)` once no
request has been in progress for IDLE_EXIT_SECONDS (which ends idle keep-alive connections), or, past
graceful_timeout, at the first moment no request is in progress, so no answer is cut off halfway.
Whether bjoern is not running yet, accepting, or already drained is read from SIGINT's disposition in
/proc: SIG_IGN (ours), libev's handler, SIG_DFL. With no connection left, bjoern's loop ends by itself,
and so does the worker.

bjoern has no idle timeout either, and spins when accept() fails with EMFILE: the watch thread also
ends TCP connections idle for keepalive_timeout, sooner near the open-file limit, and drains the worker
when it stays near the limit with nothing idle to end (workers/runtime/connections.py says how, and what it
cannot).

The bjoern here is not PyPI's: it is built from workers/runtime/bjoern-3.2.2 (pyproject.toml's ext-
modules), 3.2.2's sources with a patch for two holes (its README.md has the details). Stock bjoern reads
a request's whole body into memory before the app runs, however large Content-Length says it is; ours
answers 413 and closes the connection before reading a body announced larger than the LoadedApp's
`max_body_bytes`, or as a chunked one passes it. And stock bjoern parses every request that arrives in
one read into the same environ, so of requests pipelined in one packet only the last was answered; ours
answers each in turn, but closes the connection after a draining worker's `Connection: close` answer
rather than serve what was pipelined after it (the client sends that again elsewhere).

Workers live in their own process group, so a terminal's Ctrl-C reaches only the master, which
drains them. They write (pid, event) records to a pipe the master reads: ready, recycling, draining.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import random
import select
import signal
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal, NoReturn

from settings import Settings
from workers.runtime import connections
from workers.runtime.procfs import set_process_name

try:
    from workers.runtime import _bjoern
except ImportError as exc:  # a checkout where `pip install -e .` has not run since the extension changed
    raise ImportError(
        f"Lanner's bjoern extension cannot be loaded ({exc}): build it with `make venv` or "
        "`pip install -e .`, or in a second work tree on the same venv, `make bjoern VENV=<the venv>`."
    ) from exc

try:
    from setproctitle import setproctitle as _setproctitle  # type: ignore[import-not-found]  # Not a dependency.
except ImportError:  # optional: nicer `ps` output only

    def _setproctitle(title: str) -> None:
        pass


logger = logging.getLogger(__name__)

WSGIApp = Callable[[dict, Callable[..., Any]], Iterable[bytes]]

LISTEN_BACKLOG = 4096  # the kernel caps it at net.core.somaxconn
IDLE_EXIT_SECONDS = 0.3  # a draining worker exits after this long with no request in progress
KILL_AFTER_GRACE_SECONDS = 2.0  # the master SIGKILLs a worker this long after graceful_timeout
RESPAWN_BACKOFF_SECONDS = 1.0  # pause before replacing a worker that died while starting
QUICK_DEATH_SECONDS = 1.0  # a worker dying sooner than this after fork counts as a failed start
WATCH_INTERVAL_SECONDS = 0.1  # how often a draining worker's drain thread looks around
IDLE_WATCH_SECONDS = 1.0  # ...and a serving one (SIGTERM wakes it at once): keeps idle CPU near 0
RECYCLE_JITTER = 0.10  # up to 10 % more than max_requests, so workers do not recycle together
OVERDUE_WATCH_SECONDS = 0.005  # past graceful_timeout: how often to look for a moment with no request
DESCRIPTOR_HEADROOM = 64  # this close to RLIMIT_NOFILE, a worker closes connections idle for...
SHORT_IDLE_SECONDS = 1.0  # ...this long, not keepalive_timeout; if none is...
EXHAUSTED_AFTER_SECONDS = 5.0  # ...for this long (a flood's young connections age meanwhile), it drains
REAP_TRIES = 40  # looks for a moment with no request in progress before a reaping round gives up

_MESSAGE = struct.Struct("=ii")  # (worker pid, event); 8 bytes, so each write is atomic
_READY = 1  # the app is loaded; bjoern is about to run
_RECYCLING = 2  # max_requests reached: the worker is draining itself
_DRAINING = 3  # the worker got SIGINT or SIGTERM from someone else than the master
_EXHAUSTED = 4  # out of file descriptors with no idle connection to close: the worker drains itself
_IDLE = 5  # an on-demand worker served nothing for its pool's idle_seconds: it drains itself

_MASTER_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
ADMIN_NICE = 19  # If SCHED_IDLE is refused: the admin worker still yields the CPU to everything else.


@dataclasses.dataclass(frozen=True)
class LoadedApp:
    """What a pool's loader returns in the worker: the app, and the largest request body any of its routes
    reads. bjoern answers a bigger one 413 before reading it (by its Content-Length, or as a chunked one
    passes the limit), so a worker never holds more of a request; each route keeps its own limit."""

    app: WSGIApp
    max_body_bytes: int
    # Run once as the worker exits after a clean drain (no request in progress): cluster mode gives its
    # cap lease units back (models/cluster/leases.py). Not run when the worker is killed.
    on_exit: Callable[[], None] | None = None


@dataclasses.dataclass(frozen=True)
class Pool:
    """Workers running one app on one socket."""

    name: str
    bind: str
    workers: int
    app_loader: Callable[[Settings], LoadedApp]
    is_idle_priority: bool = False  # SCHED_IDLE: it runs only on CPU time nothing else wants.
    idle_seconds: float = 0.0  # > 0: workers start on demand and stop after this long idle.


def parse_bind(bind: str) -> tuple[Literal["unix"], str] | tuple[Literal["tcp"], str, int]:
    """Split a `bind` setting into ("unix", path) or ("tcp", host, port); ValueError if malformed."""
    if bind.startswith("unix:"):
        path = bind[len("unix:") :]
        if not path or path.startswith("@"):
            raise ValueError(f"bind {bind!r} must give a socket file path after 'unix:'.")
        if len(os.fsencode(path)) > 107:
            raise ValueError(f"bind {bind!r} is too long: a unix socket path may have at most 107 bytes.")
        return ("unix", path)
    host, colon, port = bind.rpartition(":")
    if ":" in host or host.startswith("["):
        raise ValueError(f"bind {bind!r} is IPv6, which bjoern cannot serve; use IPv4 or unix:/PATH.")
    if not colon or not host or not (port.isascii() and port.isdigit()):
        raise ValueError(f"bind {bind!r} is not of the form HOST:PORT or unix:/PATH.")
    if not 0 <= int(port) <= 65535:  # 0: any free port, see bound_address()
        raise ValueError(f"bind {bind!r} has port {int(port)}, which is outside 0..65535.")
    return ("tcp", host, int(port))


def serve(
    settings: Settings,
    app_loader: Callable[[Settings], LoadedApp],
    *,
    on_ready: Callable[[dict[str, str]], None] | None = None,
    admin_loader: Callable[[Settings], LoadedApp] | None = None,
) -> None:
    """Run the master until SIGTERM or SIGINT; return once every worker has stopped.

    `app_loader(settings)` is called in each web worker after fork, never in the master;
    `admin_loader` likewise in the admin worker, when `settings.admin_address` is set. `on_ready` is
    called in the master once the sockets are bound and the first workers are forked, with each
    pool's address as really bound ({"web": "127.0.0.1:41234"} for a bind to port 0).
    """
    if settings.workers < 1:
        raise ValueError(f"workers is {settings.workers}, but at least 1 worker is needed.")
    if settings.max_requests < 0 or settings.graceful_timeout < 0:
        raise ValueError("max_requests and graceful_timeout must not be negative.")
    pools = [Pool("web", settings.bind, settings.workers, app_loader)]
    if admin_loader is not None and settings.admin_address:
        pools.append(
            Pool(
                "admin",
                settings.admin_address,
                1,
                admin_loader,
                is_idle_priority=settings.admin_idle_priority,
                idle_seconds=settings.admin_idle_seconds,
            )
        )
    listening: dict[str, tuple[socket.socket, int | None]] = {}
    connections.raise_descriptor_limit()  # inherited by the workers: each connection is one
    try:
        for pool in pools:
            listening[pool.name] = _listen(pool.bind)
        bound = [dataclasses.replace(pool, bind=bound_address(listening[pool.name][0])) for pool in pools]
        _Master(settings, bound, {name: sock for name, (sock, _) in listening.items()}).run(on_ready)
    finally:
        for pool in pools:
            if pool.name in listening:
                sock, unix_inode = listening[pool.name]
                sock.close()
                if unix_inode is not None:
                    _remove_own_socket(parse_bind(pool.bind)[1], unix_inode)
    logger.info("stopped")


def bound_address(sock: socket.socket) -> str:
    """A listening socket's address in `bind` form, with the port the kernel chose for port 0."""
    if sock.family == socket.AF_UNIX:
        return f"unix:{sock.getsockname()}"
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def _listen(bind: str) -> tuple[socket.socket, int | None]:
    """Bind and listen, non-blocking; return the socket and, for a unix socket, its file's inode."""
    where = parse_bind(bind)
    if where[0] == "unix":
        path = where[1]
        _remove_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        if where[0] == "unix":
            sock.bind(path)
            os.chmod(path, 0o666)  # nginx runs as another user
            inode = os.stat(path).st_ino
        else:
            sock.bind((where[1], where[2]))
            inode = None
        sock.listen(LISTEN_BACKLOG)
        # Non-blocking matters: every worker wakes up for each new connection, the losers' accept()
        # must fail with EAGAIN rather than block bjoern's loop.
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {bind}: {exc.strerror}") from None
    return sock, inode


def _remove_stale_socket(path: str) -> None:
    """Unlink a socket file left by a crashed server; refuse to touch anything else."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(errno.EEXIST, f"cannot listen on unix:{path}: the path exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        return
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"cannot listen on unix:{path}: another server is listening there")


def _remove_own_socket(path: str, inode: int) -> None:
    """Unlink our socket file, unless a newer server has already replaced it."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


def _describe_exit(code: int) -> str:
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


@dataclasses.dataclass
class _Child:
    """The master's record of one worker process."""

    pid: int
    pool: Pool
    generation: int
    started_at: float
    is_ready: bool = False
    kill_at: float | None = None  # set once draining: SIGKILL at this moment
    is_killed: bool = False

    @property
    def is_draining(self) -> bool:
        return self.kill_at is not None


class _Master:
    """The master loop. Signal handlers only set flags; the wakeup fd makes select() return."""

    def __init__(self, settings: Settings, pools: list[Pool], sockets: dict[str, socket.socket]):
        self.settings = settings
        self.pools = pools
        self.sockets = sockets
        self.pid = os.getpid()
        self.children: dict[int, _Child] = {}
        self.generation = 1
        self.spawn_not_before = 0.0
        self.is_reload_requested = False
        self.stop_requests = 0
        self.stop_requests_seen = 0
        self.is_stopping = False
        self.wakeup_r, self.wakeup_w = os.pipe()
        self.status_r, self.status_w = os.pipe()
        for fd in (self.wakeup_r, self.wakeup_w, self.status_r, self.status_w):
            os.set_blocking(fd, False)
        self.status_buffer = b""
        # An on-demand pool is wanted from the first connection waiting on its socket until its
        # worker reports itself idle; any other pool always is.
        self.is_wanted = {pool.name: pool.idle_seconds <= 0 for pool in pools}

    # -- signals -------------------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGHUP:
            self.is_reload_requested = True
        elif signum in (signal.SIGTERM, signal.SIGINT):
            self.stop_requests += 1
        # SIGCHLD needs no flag: the byte on the wakeup fd makes the loop reap.

    # -- loop ----------------------------------------------------------------------------------------

    def run(self, on_ready: Callable[[dict[str, str]], None] | None) -> None:
        _setproctitle(f"lanner: master {self.pools[0].bind}")
        previous = {signum: signal.signal(signum, self._on_signal) for signum in _MASTER_SIGNALS}
        previous_wakeup_fd = signal.set_wakeup_fd(self.wakeup_w, warn_on_full_buffer=False)
        try:
            self._spawn_missing(time.monotonic())
            for pool in self.pools:
                logger.info(
                    "%s: listening on %s with %d workers%s (master pid %s)",
                    pool.name,
                    pool.bind,
                    pool.workers,
                    f" started on demand, stopped after {pool.idle_seconds:g} s idle"
                    if pool.idle_seconds > 0
                    else "",
                    self.pid,
                )
            if on_ready is not None:
                on_ready({pool.name: pool.bind for pool in self.pools})
            while self.children or not self.is_stopping:
                self._wait()
                self._step()
        finally:
            self._kill_remaining()
            signal.set_wakeup_fd(previous_wakeup_fd)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for fd in (self.wakeup_r, self.wakeup_w, self.status_r, self.status_w):
                os.close(fd)

    def _wait(self) -> None:
        now = time.monotonic()
        deadlines = [c.kill_at for c in self.children.values() if c.kill_at is not None and not c.is_killed]
        if self._missing_workers():
            deadlines.append(self.spawn_not_before)
        timeout = max(0.0, min(deadlines) - now) if deadlines else None  # None: sleep until woken
        # Only while no worker is wanted: once one is, the connection waits for it in the backlog.
        dormant = {
            self.sockets[pool.name].fileno(): pool
            for pool in self.pools
            if not self.is_wanted[pool.name] and not self.is_stopping
        }
        readable, _, _ = select.select([self.wakeup_r, self.status_r, *dormant], [], [], timeout)
        for fd in readable:
            if fd in dormant:
                self.is_wanted[dormant[fd].name] = True
                logger.debug("%s: a connection is waiting; starting its worker", dormant[fd].name)
        if self.wakeup_r in readable:
            try:
                while os.read(self.wakeup_r, 4096):
                    pass
            except BlockingIOError:
                pass

    def _step(self) -> None:
        exits = self._reap()
        now = time.monotonic()
        self._read_status(now)  # after reaping, so a worker's last message is read before its exit
        for pid, code in exits:
            self._on_exit(pid, code, now)
        if self.stop_requests != self.stop_requests_seen:
            self.stop_requests_seen = self.stop_requests
            self._stop(now)
        if self.is_reload_requested:
            self.is_reload_requested = False
            self._reload()
        if not self.is_stopping:
            self._spawn_missing(now)
            self._finish_reload(now)
        self._kill_overdue(now)

    # -- worker lifecycle ----------------------------------------------------------------------------

    def _current(self, pool: Pool) -> list[_Child]:
        """The pool's workers of the current generation that are not draining."""
        return [
            c
            for c in self.children.values()
            if c.pool is pool and c.generation == self.generation and not c.is_draining
        ]

    def _wanted_workers(self, pool: Pool) -> int:
        return pool.workers if self.is_wanted[pool.name] and not self.is_stopping else 0

    def _missing_workers(self, pool: Pool | None = None) -> int:
        if pool is None:
            return sum(self._missing_workers(each) for each in self.pools)
        return max(0, self._wanted_workers(pool) - len(self._current(pool)))

    def _spawn_missing(self, now: float) -> None:
        if now < self.spawn_not_before:
            return
        for pool in self.pools:
            for _ in range(self._missing_workers(pool)):
                self._spawn(pool)

    def _spawn(self, pool: Pool) -> None:
        # Block our signals around fork, so the child cannot run the master's handlers before it
        # has installed its own.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _MASTER_SIGNALS)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            logger.error("cannot fork a worker (%s); retrying in %.0f s", exc, RESPAWN_BACKOFF_SECONDS)
            self.spawn_not_before = time.monotonic() + RESPAWN_BACKOFF_SECONDS
            return
        if pid == 0:
            self._become_worker(pool)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if not pool.is_idle_priority:  # That child makes a session of its own: not a group leader first.
            try:
                os.setpgid(pid, pid)  # also done by the child; whichever runs first wins
            except OSError:
                pass
        self.children[pid] = _Child(pid, pool, self.generation, time.monotonic())
        logger.debug("started %s worker %s (generation %d)", pool.name, pid, self.generation)

    def _become_worker(self, pool: Pool) -> NoReturn:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for fd in (self.wakeup_r, self.wakeup_w, self.status_r):
                os.close(fd)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # stays blocked: the drain thread waits for it
            # SIG_IGN until bjoern installs its own SIGINT handler: no KeyboardInterrupt ever, and the
            # drain thread can tell from the disposition whether bjoern is running yet.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if pool.is_idle_priority:
                _yield_cpu()  # Its own session: its own process group too.
            else:
                os.setpgid(0, 0)  # a terminal's Ctrl-C goes to the master only
            signal.pthread_sigmask(signal.SIG_SETMASK, {signal.SIGTERM})
            for name, sock in self.sockets.items():
                if name != pool.name:
                    sock.close()
            set_process_name(f"lanner-{pool.name}")
            title = "worker" if pool.name == "web" else f"{pool.name} worker"
            _setproctitle(f"lanner: {title} {pool.bind} (generation {self.generation})")
            loaded = pool.app_loader(self.settings)
            worker = _Worker(
                self.settings,
                loaded.app,
                self.status_w,
                self.pid,
                idle_seconds=pool.idle_seconds,
                max_body_bytes=loaded.max_body_bytes,
                on_exit=loaded.on_exit,
            )
            worker.serve(self.sockets[pool.name])
            worker.run_exit_hook()  # bjoern returned (its last connection closed): a clean stop too.
            code = 0
        except BaseException:
            logger.exception("worker %s failed", os.getpid())
        finally:
            _flush_logs()
            os._exit(code)

    def _reap(self) -> list[tuple[int, int]]:
        exits = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            exits.append((pid, os.waitstatus_to_exitcode(status)))
        return exits

    def _read_status(self, now: float) -> None:
        try:
            while chunk := os.read(self.status_r, 64 * 1024):
                self.status_buffer += chunk
        except BlockingIOError:
            pass
        whole = len(self.status_buffer) - len(self.status_buffer) % _MESSAGE.size
        for pid, event in _MESSAGE.iter_unpack(self.status_buffer[:whole]):
            child = self.children.get(pid)
            if child is None:
                continue
            if event == _READY:
                child.is_ready = True
            elif not child.is_draining:
                child.kill_at = now + self.settings.graceful_timeout + KILL_AFTER_GRACE_SECONDS
                if event == _IDLE:
                    if child.generation == self.generation:
                        self.is_wanted[child.pool.name] = False
                    logger.info(
                        "%s worker %s idle for %g s; stopping it until the next request",
                        child.pool.name,
                        pid,
                        child.pool.idle_seconds,
                    )
                elif event == _RECYCLING:
                    logger.info("worker %s reached max_requests; recycling it", pid)
                elif event == _EXHAUSTED:
                    logger.warning("worker %s ran out of file descriptors; replacing it", pid)
                else:
                    logger.info("worker %s was told to stop by someone else; replacing it", pid)
        self.status_buffer = self.status_buffer[whole:]

    def _on_exit(self, pid: int, code: int, now: float) -> None:
        child = self.children.pop(pid, None)
        if child is None or child.is_killed:
            return  # not ours, or already reported when we killed it
        if code == 0 and child.is_draining:
            logger.debug("worker %s stopped", pid)
        elif child.is_draining:
            logger.warning("worker %s %s while draining", pid, _describe_exit(code))
        elif not child.is_ready or now - child.started_at < QUICK_DEATH_SECONDS:
            self.spawn_not_before = now + RESPAWN_BACKOFF_SECONDS
            logger.warning(
                "worker %s %s while starting; retrying in %.0f s",
                pid,
                _describe_exit(code),
                RESPAWN_BACKOFF_SECONDS,
            )
        else:
            logger.warning("worker %s %s; replacing it", pid, _describe_exit(code))

    def _drain(self, child: _Child, now: float) -> None:
        try:
            os.kill(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        child.kill_at = now + self.settings.graceful_timeout + KILL_AFTER_GRACE_SECONDS

    def _reload(self) -> None:
        if self.is_stopping:
            return
        self.generation += 1
        logger.info("reloading: starting generation %d", self.generation)

    def _finish_reload(self, now: float) -> None:
        old = [c for c in self.children.values() if c.generation < self.generation and not c.is_draining]
        if not old:
            return
        if any(
            sum(c.is_ready for c in self._current(pool)) < self._wanted_workers(pool) for pool in self.pools
        ):
            return
        for child in old:
            self._drain(child, now)
        logger.info("reloaded: generation %d serving, draining %d old workers", self.generation, len(old))

    def _stop(self, now: float) -> None:
        if self.is_stopping:
            logger.warning("second stop signal: killing %d workers now", len(self.children))
            for child in self.children.values():
                self._kill(child)
            return
        self.is_stopping = True
        logger.info("stopping: draining %d workers", len(self.children))
        for child in self.children.values():
            if not child.is_draining:
                self._drain(child, now)

    def _kill_overdue(self, now: float) -> None:
        for child in self.children.values():
            if child.kill_at is not None and not child.is_killed and now >= child.kill_at:
                logger.warning(
                    "worker %s still running %.1f s after it was told to drain; killing it",
                    child.pid,
                    self.settings.graceful_timeout + KILL_AFTER_GRACE_SECONDS,
                )
                self._kill(child)

    def _kill(self, child: _Child) -> None:
        try:
            os.kill(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.is_killed = True

    def _kill_remaining(self) -> None:
        """Only reached with children left when the loop failed: leave no orphans behind."""
        for child in self.children.values():
            self._kill(child)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.children.clear()


class _Body:
    """A streamed response: the request counts as finished when bjoern closes it, not earlier."""

    __slots__ = ("iterable", "on_close")

    def __init__(self, iterable: Iterable[bytes], on_close: Callable[[], None]):
        self.iterable = iterable
        self.on_close = on_close

    def __iter__(self):
        return iter(self.iterable)

    def close(self) -> None:
        try:
            close = getattr(self.iterable, "close", None)
            if close is not None:
                close()
        finally:
            self.on_close()


class _Worker:
    """Inside a worker: the WSGI wrapper that counts requests, and the thread that drains bjoern."""

    def __init__(
        self,
        settings: Settings,
        app: WSGIApp,
        status_w: int,
        master_pid: int,
        *,
        max_body_bytes: int,
        idle_seconds: float = 0.0,
        on_exit: Callable[[], None] | None = None,
    ):
        self.app = app
        self.on_exit = on_exit
        self.exit_hook_lock = threading.Lock()  # The drain thread and the main thread may both exit.
        self.max_body_bytes = max_body_bytes  # bjoern refuses a larger request body (LoadedApp)
        self.idle_seconds = idle_seconds  # > 0: drain after this long with no request (on demand)
        self.status_w = status_w
        self.master_pid = master_pid
        self.pid = os.getpid()
        self.graceful_timeout = settings.graceful_timeout
        self.keepalive_timeout = settings.keepalive_timeout
        self.descriptor_limit = connections.descriptor_limit()
        self.listening: socket.socket | None = None
        self.next_reap = 0.0
        self.short_since: float | None = None  # near the fd limit with nothing idle to close, since
        self.is_overdue = False  # past graceful_timeout, waiting for a moment with no request
        self.max_requests = settings.max_requests
        if self.max_requests:
            self.max_requests += random.randint(0, int(self.max_requests * RECYCLE_JITTER))
        self.served = 0
        self.in_flight = 0  # written by the main thread only
        self.last_activity = time.monotonic()
        self.drain_started: float | None = None  # set once, under the lock
        self.lock = threading.Lock()
        self.main_thread = threading.get_ident()

    def serve(self, sock: socket.socket) -> None:
        self.listening = sock
        self._announce(_READY)
        threading.Thread(target=self._watch, name="lanner-drain", daemon=True).start()
        _bjoern.server_run(sock, self, self.max_body_bytes)
        # bjoern returns once it got SIGINT and its last connection is closed.
        if self.drain_started is None:
            self._announce(_DRAINING)

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        # PERF: one uncontended lock round trip and one clock read per request. The lock makes
        # "a request starts" and "the drain thread decides to exit" mutually exclusive, so a request
        # either runs to the end or never starts.
        with self.lock:
            self.in_flight += 1
        # Draining: the answer closes the connection, and counts as finished only once bjoern has
        # written it all (it closes the body then), so exiting at in_flight == 0 cuts no answer off.
        is_draining = self.drain_started is not None
        is_streamed = False
        try:
            body = self.app(environ, _closing(start_response) if is_draining else start_response)
            is_streamed = is_draining or (type(body) is not list and type(body) is not tuple)
            return _Body(body, self._finish) if is_streamed else body
        finally:
            if not is_streamed:
                self._finish()

    def _finish(self) -> None:
        self.in_flight -= 1
        self.last_activity = time.monotonic()
        self.served += 1
        if self.served == self.max_requests:
            self._begin_drain(_RECYCLING)

    def _announce(self, event: int) -> None:
        try:
            os.write(self.status_w, _MESSAGE.pack(self.pid, event))
        except OSError:
            pass  # the master is gone or not reading: it will learn from our exit status

    def _begin_drain(self, event: int) -> None:
        """Stop accepting and start counting down to exit; from either thread, once."""
        with self.lock:
            if self.drain_started is not None:
                return
            self.drain_started = time.monotonic()
        self._announce(event)
        if threading.get_ident() == self.main_thread:
            os.kill(self.pid, signal.SIGTERM)  # Wake the drain thread now, not at its next look.
        # Only while bjoern's handler is installed: SIG_DFL would kill us, SIG_IGN means bjoern is
        # not running yet (the drain thread then exits at once).
        if _sigint_disposition() in ("caught", None):
            signal.pthread_kill(self.main_thread, signal.SIGINT)

    def _watch(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # SIGINT is for bjoern's thread
        while True:
            received = signal.sigtimedwait({signal.SIGTERM}, self._watch_interval())
            if self.drain_started is None:
                if received is not None:
                    self._begin_drain(_DRAINING)
                elif os.getppid() != self.master_pid:
                    self._begin_drain(_DRAINING)  # the master died; nobody will read the record
                elif _sigint_disposition() == "default":
                    self._begin_drain(_DRAINING)  # bjoern got a SIGINT from someone else
                elif self._is_idle():
                    self._begin_drain(_IDLE)
                else:
                    try:
                        self._reap_idle()
                    except Exception:  # the drain thread must outlive any surprise here
                        logger.exception("worker %s: cannot look at its connections", self.pid)
                    continue
            self._drain_step()

    def _is_idle(self) -> bool:
        if self.idle_seconds <= 0:
            return False
        with self.lock:
            return self.in_flight == 0 and time.monotonic() - self.last_activity >= self.idle_seconds

    def _watch_interval(self) -> float:
        if self.drain_started is None:
            return IDLE_WATCH_SECONDS
        return OVERDUE_WATCH_SECONDS if self.is_overdue else WATCH_INTERVAL_SECONDS

    def _drain_step(self) -> None:
        if _sigint_disposition() == "ignored":
            self._exit()  # bjoern has not started, so nothing was accepted yet
        now = time.monotonic()
        started = self.drain_started
        if started is None:  # Only called once a drain has begun.
            return
        with self.lock:
            if self.in_flight == 0 and now - max(self.last_activity, started) >= IDLE_EXIT_SECONDS:
                self._exit()
            if now - started >= self.graceful_timeout:
                if not self.is_overdue:
                    self.is_overdue = True
                    logger.warning(
                        "worker %s: still serving after graceful_timeout (%.1f s); "
                        "exiting between two requests",
                        self.pid,
                        self.graceful_timeout,
                    )
                if self.in_flight == 0:
                    self._exit()  # between two requests: none cut off, and none can start (the lock)

    def _reap_idle(self) -> None:
        """End TCP connections idle for keepalive_timeout, or for SHORT_IDLE_SECONDS near the fd limit."""
        if self.listening is None:
            return
        now = time.monotonic()
        fds, is_out = connections.open_descriptors()
        in_use = len(fds)
        is_short = is_out or in_use >= self.descriptor_limit - DESCRIPTOR_HEADROOM
        if not is_short and now < self.next_reap:
            return
        self.next_reap = now + max(IDLE_WATCH_SECONDS, self.keepalive_timeout / 4)
        min_idle = min(self.keepalive_timeout, SHORT_IDLE_SECONDS) if is_short else self.keepalive_timeout
        found = connections.idle_tcp_connections(self.listening, fds)
        idle = [fd for seconds, fd in found if seconds >= min_idle]
        ended = self._shut_down(idle, self.listening, min_idle) if idle else 0
        if not is_short or ended:
            self.short_since = None
        if is_short and ended:
            logger.warning(
                "worker %s: %d of %d file descriptors open; closed %d connections idle for %.0f s or more",
                self.pid,
                in_use,
                self.descriptor_limit,
                ended,
                min_idle,
            )
        elif is_short and self.short_since is None:
            self.short_since = now
        elif is_short and self.short_since is not None and now - self.short_since >= EXHAUSTED_AFTER_SECONDS:
            logger.warning(
                "worker %s: %d of %d file descriptors open and none idle for %.0f s; draining it",
                self.pid,
                in_use,
                self.descriptor_limit,
                EXHAUSTED_AFTER_SECONDS,
            )
            self._begin_drain(_EXHAUSTED)
        elif ended:
            logger.debug("worker %s: closed %d connections idle for %.0f s", self.pid, ended, min_idle)

    def _shut_down(self, fds: list[int], listening: socket.socket, min_idle: float) -> int:
        """Shut the idle connections down at a moment no request is in progress (one might be on them)."""
        for _ in range(REAP_TRIES):
            with self.lock:
                if self.in_flight == 0:
                    return sum(connections.shut_down_if_idle(fd, listening, min_idle) for fd in fds)
            time.sleep(OVERDUE_WATCH_SECONDS)
        return 0

    def run_exit_hook(self) -> None:
        """`on_exit`, once, whichever thread ends the worker first."""
        with self.exit_hook_lock:
            hook, self.on_exit = self.on_exit, None
            if hook is None:
                return
            try:
                hook()
            except Exception:  # The exit goes on: what it would have given back is only lost.
                logger.exception("worker %s: its exit hook failed", self.pid)

    def _exit(self) -> NoReturn:
        self.run_exit_hook()
        _flush_logs()
        os._exit(0)


def _closing(start_response: Callable[..., Any]) -> Callable[..., Any]:
    """start_response that adds `Connection: close` (before bjoern's own Connection header)."""

    def closing_start_response(status: str, headers: list, exc_info: Any = None) -> Any:
        return start_response(status, [*headers, ("Connection", "close")], exc_info)

    return closing_start_response


def _yield_cpu() -> None:
    """Run only on CPU time the web workers and the flusher leave idle.

    At nice 10 it competed with the spool flusher (nice 10 too) while the flusher held SQLite's
    write lock that postbacks in the web workers wait for: with reports back to back and postbacks
    at 1,000 clicks/s, click p99 was 324 ms, 86 ms at SCHED_IDLE (and 70 ms once the flusher's
    TRUNCATE checkpoint stopped waiting for readers, workers/runtime/tasks.py).

    SCHED_IDLE yields only to the tasks of its own scheduling group. With autogroup (Linux's default
    on most distributions, and wherever the cpu cgroup controller is off) a session is a group, and
    the master's session holds the web workers: the admin worker's group then ran at their weight
    against nginx's, `lanner worker`'s and the client's groups, a whole slice at a time (k6 waited
    ~1.5 ms behind it, docs/PERFORMANCE.md "fourth pass"). Its own session is a group of its own,
    charged for its own CPU, and nice 19 on that group keeps it owed little: click p99 beside reports
    0.82x (1,000/s) and 0.59x (3,000/s) of sharing the web workers' group. It still runs a slice once
    picked, but a 0.1 ms one did not help: at SCHED_OTHER it made the admin worker preempt the clicks
    on its wake-ups, and at SCHED_IDLE it changed nothing measurable (docs/PERFORMANCE.md "fifth pass").
    """
    os.setsid()
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(ADMIN_NICE)
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(ADMIN_NICE))
    except OSError:  # No autogroup here (another OS, or a kernel without it): nothing to lower.
        pass


def _sigint_disposition() -> str | None:
    """SIGINT's disposition in this process: "caught", "ignored" or "default"; None off Linux.

    Read from /proc because libev installs and removes its handler behind Python's back.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            masks = {
                line[:6]: int(line[7:], 16) for line in status if line.startswith((b"SigIgn", b"SigCgt"))
            }
    except (OSError, ValueError):
        return None
    bit = 1 << (signal.SIGINT - 1)
    if masks.get(b"SigCgt", 0) & bit:
        return "caught"
    if masks.get(b"SigIgn", 0) & bit:
        return "ignored"
    return "default"
