"""`lanner bench faults`: each fault of issue 13 under traffic, every subid reconciled, one row each.

A fault run starts a fresh install (its own data dir, `lanner serve` + `lanner worker` on loopback),
offers a constant rate of campaign clicks with k6 (scripts/bench-k6.js), injects the fault a few
seconds in, ends it, and then measures recovery: from the end of the fault, a probe click with a
visitor of its own is sent every 0.2 s until one gets its 302 and that subid is in the database.
When k6 is done the spool must drain, and every subid k6 (and the fault itself) received in a 302
must be in the click table exactly once.

The harness plays systemd's part: a `lanner serve` or `lanner worker` that died is started again
after RESTART_SECONDS (the units say `Restart=always`), except while a fault keeps it down on
purpose. Nothing else is done for Lanner: recovering is its own job.

Each row: requests, 302s with a subid, lost, duplicated, 500s, other 5xx (503 is the configured
answer while the spool cannot be written), seconds to recover, peak RSS of every Lanner process
together, and what the fault itself checks (rejected lines, report JSON, database growth...).
Target in every row: 0 lost, 0 duplicated, no 500, recovery in at most RECOVERY_TARGET_SECONDS.
"""

from __future__ import annotations

import errno
import fcntl
import http.client
import json
import math
import os
import random
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.bench.harness import (
    BENCH_ALIAS,
    BENCH_OFFER_URL,
    LANNER,
    BenchError,
    ManagedProcess,
    Reporter,
    StepResult,
    _aligned,
    apply_k6_summary,
    connect_read_only,
    free_port,
    http_get,
    k6_binary,
    lanner_env,
    read_subids,
    reconcile_subids,
    run_k6_step,
    run_lanner,
    spool_pending_clicks,
    subid_finder,
    tree_memory_mb,
    vus_for_rate,
    wait_http,
)
from workers.bench.iofault import IoFaults, build_shim, fsyncs_retried_as_success
from workers.runtime.procfs import process_name, process_tree

RATE = 500
QUICK_RATE = 50  # PERF: 100 cost ~0.4 CPU-s more a row in `make test`, for no fault a 50/s row misses.
# Traffic before the fault: it begins once WARMUP_CLICK_SECONDS of k6's clicks (at the rate) have
# landed (the stack is warm, the flusher landing, the spool has lines), within WARMUP_DEADLINE_SECONDS.
# k6's duration counts WARMUP_SECONDS for it (about what it takes, k6's start included), then the
# fault's own seconds and the tail: traffic after the fault ends, recovery measured under load.
# PERF: the quick rows' windows were 4 s and 12 s, fixed; a row's CPU grows with its traffic's seconds.
WARMUP_CLICK_SECONDS = 1.0
WARMUP_SECONDS = 4.0
QUICK_WARMUP_SECONDS = 3.0
WARMUP_DEADLINE_SECONDS = 60.0
TAIL_SECONDS = 16.0
QUICK_TAIL_SECONDS = 6.0
RECOVERY_TARGET_SECONDS = 10.0
RECOVERY_DEADLINE_SECONDS = 60.0
RESTART_SECONDS = 1.0  # systemd's RestartSec in the units is 2; 1 keeps the rows short.
DRAIN_DEADLINE_SECONDS = 90.0
PROBE_EVERY = 0.2
TMPFS_MB = 512  # The spool of a full run at 1,000 clicks/s must fit before the ballast fills the rest.
# deleted-sealed-segment: segments that seal about every SEAL_SECONDS at the offered rate (a line is
# ~0.6 KB), so the one deleted is one the workers have just left, as with 64 MB segments in production
# (at 1,000/s a 32 KB segment sealed every 50 ms: a segment nobody held open any more, which is lost
# and reported, a case tests/test_spool_recovery.py covers).
SEAL_SECONDS = 2.0
LINE_BYTES = 600

POSTBACK_FLOOD = 2000
QUICK_POSTBACK_FLOOD = 500
COST_CLICKS = 200
IDLE_CONNECTIONS = 1000
IDLE_NOFILE = 256  # Per web process: the 1,000 idle connections are more than both workers can hold.
RELOADS = 10
# Rows that may run one after another on one running stack (SharedStack, is_shareable): the fault is
# what happens under traffic, each row's checks count only its own clicks and requests (write-lock's
# lock, reloads' SIGHUPs, postback-flood's added log rows, huge-cost's cost sum being finite,
# poisoned-line's lines added to rejected.log).
SHARED_STACK_FAULTS = ("write-lock", "poisoned-line", "reloads", "postback-flood", "huge-cost")
POWER_CUTS = 5
QUICK_POWER_CUTS = 1
# The files the I/O fault rows fail (iofault.c's fnmatch: `*` crosses `/`): the click spool's segments,
# and SQLite's database and WAL (not its -shm, which SQLite writes through a shared mapping).
SPOOL_FILES = ("*/spool/clicks.*.log",)
DATABASE_FILES = ("*/data/lanner.db", "*/data/lanner.db-wal")

SQL_HAS_SUBID = "SELECT 1 FROM click WHERE subid = ?"
SQL_NEWEST_CLICK = "SELECT max(id) FROM click"
SQL_POSTBACK_LOG_ROWS = "SELECT count(*) FROM postback_log"
SQL_REFUSAL_ROWS = "SELECT count(*), total(refusals) FROM postback_refusal"
SQL_SPOOL_SEGMENT = "SELECT segment FROM spool_node WHERE name = 'main'"  # The bench's one node.
SQL_COST_TOTAL = "SELECT total(cost) FROM click"
SQL_CLICK_ROWS = "SELECT count(*) FROM click"


@dataclass
class FaultRow:
    name: str
    about: str
    requests: int = 0
    redirects: int = 0  # 302s with a subid (k6's and the fault's own).
    lost: int = 0
    lost_allowed: int = 0  # Of `lost`: what the promise allows (a power cut: lines past the last fsync).
    duplicated: int = 0
    errors_500: int = 0
    errors_503: int = 0
    errors_other: int = 0  # Network errors, 4xx, 302s without a subid (a fallback answer).
    recovery_s: float | None = None  # Until a click gets its 302 and clicks are landing again.
    caught_up_s: float | None = None  # Until a click made after the fault's end is in the database.
    peak_rss_mb: float = 0.0
    fault_peak_rss_mb: float = 0.0  # While the fault lasts (a consumer outage: without the catch-up).
    checks: list[str] = field(default_factory=list)  # What the fault itself verified, or found wrong.
    problems: list[str] = field(default_factory=list)
    skipped: str = ""

    @property
    def is_met(self) -> bool:
        return (
            not self.skipped
            and not self.problems
            and self.lost == self.lost_allowed
            and self.duplicated == 0
            and (
                self.errors_500 == 0
                and self.recovery_s is not None
                and self.recovery_s <= RECOVERY_TARGET_SECONDS
            )
        )

    def to_json(self) -> dict:
        return {**asdict(self), "is_met": self.is_met}


class FaultRun:
    """One fault's install: data dir, processes (restarted like systemd would), what k6 does not see."""

    def __init__(
        self,
        work_dir: Path,
        data_dir: Path,
        env: dict[str, str],
        workers: int,
        quick: bool,
        serve_nofile: int | None = None,
    ) -> None:
        self.work_dir, self.data_dir, self.env, self.workers, self.quick = (
            work_dir,
            data_dir,
            env,
            workers,
            quick,
        )
        self.serve_nofile = serve_nofile
        self.database_path = data_dir / "lanner.db"
        self.database: Path | str = self.database_path  # What the spool lands in: a postgresql:// URL too.
        self.wal_path = data_dir / "lanner.db-wal"
        self.io_baseline: dict[str, int] = {}
        self.spool_dir = data_dir / "spool"
        self.port = free_port()
        self.serve: ManagedProcess | None = None
        self.worker: ManagedProcess | None = None
        self.lock = threading.Lock()
        self.io: IoFaults | None = None  # The LD_PRELOAD shim's switch, for the I/O fault rows.
        self._new_row()
        self.rejected_before = 0  # rejected.log's lines when the row began (earlier rows' on a shared stack).
        self._starts = 0
        self._probe = 0

    def _new_row(self) -> None:
        """Every count and list a row reconciles or checks, empty: the run's first row's, and each
        further row's on a shared stack (begin_row), set in this one place."""
        self.keep_down: set[str] = set()  # "serve"/"worker" a fault stopped on purpose.
        self.extra_subids: list[str] = []  # 302s the fault's own requests received.
        self.subids: list[str] = []  # Every 302's subid, once the row is reconciled.
        self.cuts: list[PowerCut] = []
        self.extra_errors = {"500": 0, "503": 0, "other": 0}
        self.checks: list[str] = []
        self.problems: list[str] = []
        self.landed_during_fault = 0
        self.lost_allowed = 0

    def begin_row(self, row_dir: Path) -> None:
        """A further row on this run's running stack (SharedStack): its logs in `row_dir`, and every
        count the row reconciles or checks its own, not the rows' before it."""
        self.work_dir = row_dir
        self._new_row()
        self.rejected_before = _rejected_lines(self)

    # -- processes --------------------------------------------------------------------------

    def start_serve(self) -> None:
        self._starts += 1
        args = [*LANNER, "serve", "--workers", str(self.workers), "--bind", f"127.0.0.1:{self.port}"]
        args += ["--admin-bind", f"unix:{self.data_dir / 'admin.sock'}"]  # No second TCP port to race for.
        if self.serve_nofile:  # A hard limit the master cannot raise: the fault is to go past it.
            args = ["prlimit", f"--nofile={self.serve_nofile}:{self.serve_nofile}", *args]
        self.serve = ManagedProcess(
            "lanner serve", args, self.work_dir / f"serve.{self._starts}.log", self.env
        )

    def start_worker(self) -> None:
        self._starts += 1
        self.worker = ManagedProcess(
            "lanner worker", [*LANNER, "worker"], self.work_dir / f"worker.{self._starts}.log", self.env
        )

    def supervise(self) -> None:
        """systemd's Restart=always: start again whatever died, unless a fault keeps it down."""
        for name, start in (("serve", self.start_serve), ("worker", self.start_worker)):
            process = getattr(self, name)
            if name not in self.keep_down and (process is None or not process.is_running()):
                time.sleep(RESTART_SECONDS)
                if name not in self.keep_down:
                    start()

    def pids(self) -> list[int]:
        return [p.pid for p in (self.serve, self.worker) if p is not None and p.is_running()]

    def web_workers(self) -> list[int]:
        if self.serve is None:
            return []
        return [pid for pid in process_tree(self.serve.pid)[1:] if process_name(pid) == "lanner-web"]

    def stop(self) -> None:
        for process, sig in ((self.serve, signal.SIGTERM), (self.worker, signal.SIGINT)):
            if process is not None:
                process.stop(sig, timeout=20)

    # -- requests of the fault's own ------------------------------------------------------------

    def click(self, path: str = f"/{BENCH_ALIAS}", ip: str | None = None) -> str | None:
        """One click with a visitor of its own; its subid (counted for reconciliation) or None."""
        with self.lock:
            self._probe += 1
            number = self._probe
        ip = ip or f"198.18.{(number >> 8) & 255}.{number & 255}"
        headers = {"X-Real-IP": ip, "User-Agent": f"lanner-fault probe {number} {random.getrandbits(32)}"}
        try:
            status, location = http_get(self.port, path, headers)
        except OSError:
            with self.lock:
                self.extra_errors["other"] += 1
            return None
        subid = location.partition("click=")[2].partition("&")[0] if status == 302 else ""
        with self.lock:
            if subid:
                self.extra_subids.append(subid)
            else:
                kind = "500" if status == 500 else "503" if status >= 500 else "other"
                self.extra_errors[kind] += 1
        return subid or None

    def is_landed(self, subid: str) -> bool:
        try:
            connection = connect_read_only(self.database_path)
        except sqlite3.Error:
            return False
        try:
            return connection.execute(SQL_HAS_SUBID, (subid,)).fetchone() is not None
        except sqlite3.Error:
            return False
        finally:
            connection.close()

    def measure_recovery(self, since: float) -> tuple[float | None, float | None]:
        """(recovered, caught up): seconds from `since` until the tracker works again (a click gets
        its 302 and the flusher is landing clicks), and until a click made after `since` is stored
        (clicks land in order: after a long outage, the backlog first). None past the deadline."""
        deadline = since + RECOVERY_DEADLINE_SECONDS
        landed_at_end = self.newest_click_id()
        pending: list[str] = []
        recovered = None
        while time.monotonic() < deadline:
            self.supervise()
            subid = self.click()
            if subid:
                pending.append(subid)
            if recovered is None and pending and self.newest_click_id() > landed_at_end:
                recovered = round(time.monotonic() - since, 2)
            for candidate in pending:
                if self.is_landed(candidate):
                    caught_up = round(time.monotonic() - since, 2)
                    return recovered if recovered is not None else caught_up, caught_up
            time.sleep(PROBE_EVERY)
        return recovered, None

    def newest_click_id(self) -> int:
        try:
            return _read_one(self, SQL_NEWEST_CLICK)[0] or 0
        except sqlite3.Error:
            return 0

    def segments(self) -> list[Path]:
        return sorted(self.spool_dir.glob("clicks.*.log"))


@dataclass(frozen=True)
class Fault:
    name: str
    about: str
    inject: Callable[[FaultRun, float], None]  # Begins the fault, lasting `seconds`; returns at its end.
    seconds: float = 0.0
    env: tuple[tuple[str, str], ...] = ()
    needs_tmpfs: bool = False
    serve_nofile: int | None = None  # The web processes' open-file limit, if the fault needs a low one.
    seal_seconds: float | None = None  # Spool segments sized to seal about this often at the rate.
    after: Callable[[FaultRun], None] | None = None  # Checks once the spool has drained.
    io_files: tuple[str, ...] = ()  # Globs of the files the I/O fault shim (iofault.c) fails.


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_web_worker(run: FaultRun, seconds: float) -> None:
    workers = run.web_workers()
    if not workers:
        raise BenchError("no web worker to kill")
    _kill(workers[:1])


def kill_master(run: FaultRun, seconds: float) -> None:
    _kill([run.serve.pid])


def kill_consumer(run: FaultRun, seconds: float) -> None:
    _kill(process_tree(run.worker.pid))


def kill_everything(run: FaultRun, seconds: float) -> None:
    _kill([pid for root in run.pids() for pid in process_tree(root)])


def consumer_down(run: FaultRun, seconds: float) -> None:
    run.keep_down.add("worker")
    run.worker.stop(signal.SIGINT, timeout=20)
    time.sleep(seconds)
    run.keep_down.discard("worker")
    run.start_worker()


def write_lock(run: FaultRun, seconds: float) -> None:
    connection = sqlite3.connect(run.database_path, timeout=30, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def fill_file_system(path: Path) -> None:
    """Let the file at `path` take every free byte of its file system, down to the last one (again
    later to top up: the tracker frees space too, with a checkpoint or a landed segment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)


def disk_full(run: FaultRun, seconds: float) -> None:
    """A ballast file takes every free byte, topped up twice a second, then goes again."""
    ballast = run.data_dir / "ballast"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fill_file_system(ballast)
        time.sleep(0.5)
    run.checks.append(f"disk full for {seconds:.0f} s")
    ballast.unlink()


def _journal_lock(run: FaultRun) -> int:
    fd = os.open(run.spool_dir / "journal.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def poisoned_lines(run: FaultRun, seconds: float) -> None:
    """A 20-digit created_at and a 20-digit ua_hash in lines that otherwise parse (an editor's slip)."""
    fd = _journal_lock(run)
    try:
        active = run.segments()[-1]
        lines = active.read_bytes().splitlines()
        if not lines:
            raise BenchError("the active spool segment is empty; no line to copy")
        model = lines[-1].split(b"\t")
        with open(active, "ab") as journal:
            for field_index in (2, 1):  # created_at, then ua_hash.
                poisoned = list(model)
                poisoned[field_index] = b"9" * 20
                poisoned[6] = b"%017x" % random.getrandbits(68)  # Its own subid-shaped value.
                journal.write(b"\t".join(poisoned) + b"\n")
    finally:
        os.close(fd)
    run.checks.append("2 poisoned lines appended")


def _rejected_lines(run: FaultRun) -> int:
    try:
        return run.spool_dir.joinpath("rejected.log").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def check_poison_rejected(run: FaultRun) -> None:
    rejected = _rejected_lines(run) - run.rejected_before
    if rejected >= 2:
        run.checks.append(f"rejected.log holds {rejected} line(s) more")
    else:
        run.problems.append(f"rejected.log holds {rejected} line(s) more, expected the 2 poisoned ones")


def delete_active_segment(run: FaultRun, seconds: float) -> None:
    active = run.segments()[-1]
    active.unlink()
    run.checks.append(f"deleted {active.name}")


def delete_sealed_segment(run: FaultRun, seconds: float) -> None:
    """Pause the consumer until a segment seals past the flushed position, then delete that one."""
    os.kill(run.worker.pid, signal.SIGSTOP)
    try:
        flushed = _read_one(run, SQL_SPOOL_SEGMENT)[0]
        deadline = time.monotonic() + 20
        while True:
            # Sealed and not landed: past the flushed segment, with a newer one being written.
            sealed = [path for path in run.segments()[:-1] if _segment_number(path) > flushed]
            if sealed:
                break
            if time.monotonic() > deadline:
                raise BenchError("no unlanded segment sealed within 20 s")
            time.sleep(0.1)
        sealed[0].unlink()
        run.checks.append(
            f"deleted sealed {sealed[0].name} (flushed up to segment {flushed}) while the consumer was paused"
        )
    finally:
        os.kill(run.worker.pid, signal.SIGCONT)


def _segment_number(path: Path) -> int:
    return int(path.name.split(".")[1])


def reloads(run: FaultRun, seconds: float) -> None:
    for _ in range(RELOADS):
        os.kill(run.serve.pid, signal.SIGHUP)
        time.sleep(seconds / RELOADS)


def idle_connections(run: FaultRun, seconds: float) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE_CONNECTIONS + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, IDLE_CONNECTIONS + 1024), hard))
    sockets = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            sockets.append(socket.create_connection(("127.0.0.1", run.port), timeout=5))
        run.checks.append(f"{len(sockets)} idle connections held {seconds:.0f} s")
        time.sleep(seconds)
    finally:
        for sock in sockets:
            sock.close()


def postback_flood(run: FaultRun, seconds: float) -> None:
    """Wrong-key postbacks from 8 connections at once: refused, and bounded in what they leave behind."""
    count = QUICK_POSTBACK_FLOOD if run.quick else POSTBACK_FLOOD
    before_rows = _postback_log_rows(run)
    statuses: dict[int, int] = {}

    def send(start: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", run.port, timeout=10)
        try:
            for n in range(start, count, 8):
                connection.request("GET", f"/postback?key=wrong{n}&subid={n:017d}&status=sale&payout=9")
                response = connection.getresponse()
                response.read()
                with run.lock:
                    statuses[response.status] = statuses.get(response.status, 0) + 1
        except OSError:
            with run.lock:
                statuses[0] = statuses.get(0, 0) + 1
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(start,)) for start in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    rows = _postback_log_rows(run) - before_rows
    counter_rows, counted = _read_one(run, SQL_REFUSAL_ROWS)
    run.checks.append(
        f"{count} wrong-key postbacks: answers {statuses}, +{rows} postback log rows, "
        f"{counter_rows} refusal counter row(s) counting {counted:.0f}"
    )
    if statuses.get(500):
        run.problems.append(f"{statuses[500]} wrong-key postback(s) answered 500")
    if rows > count // 10:
        run.problems.append(f"{rows} postback_log rows for {count} wrong-key postbacks: unbounded")


def _read_one(run: FaultRun, sql: str) -> tuple:
    connection = connect_read_only(run.database_path)
    try:
        return connection.execute(sql).fetchone()
    finally:
        connection.close()


def _postback_log_rows(run: FaultRun) -> int:
    return _read_one(run, SQL_POSTBACK_LOG_ROWS)[0]


def huge_costs(run: FaultRun, seconds: float) -> None:
    landed = [run.click(f"/{BENCH_ALIAS}?cost=1e308") for _ in range(COST_CLICKS)]
    run.checks.append(f"{sum(1 for s in landed if s)} clicks with cost=1e308")


def _refuse_constant(value: str):
    raise ValueError(f"{value} in JSON")


def check_costs_finite(run: FaultRun) -> None:
    connection = connect_read_only(run.database_path)
    try:
        total = connection.execute(SQL_COST_TOTAL).fetchone()[0]
    finally:
        connection.close()
    if not math.isfinite(total):
        run.problems.append(f"click costs sum to {total}")
    else:
        run.checks.append(f"click costs sum to {total:g}")
    report = run_lanner(run.env, "report", "--preset", "all_time", "--json")
    try:
        json.loads(report, parse_constant=_refuse_constant)
        run.checks.append("report JSON is valid")
    except ValueError as exc:
        run.problems.append(f"report JSON is invalid: {exc}")


def io_fault(
    *, write: str | None = None, fsync: str | None = None, percent: int = 100
) -> Callable[[FaultRun, float], None]:
    """A fault of the shim's: the matching files' writes and/or fsyncs fail (`percent` of them) for
    `seconds`, in every Lanner process, at the syscall (the processes run on; only those calls fail)."""

    def inject(run: FaultRun, seconds: float) -> None:
        landed = run.newest_click_id()
        run.io.inject(write=write, fsync=fsync, percent=percent)
        try:
            time.sleep(seconds)
        finally:
            run.io.clear()
        run.landed_during_fault = run.newest_click_id() - landed
        run.checks.append(f"{run.landed_during_fault:,} clicks landed while the fault lasted")

    return inject


def check_io_injected(run: FaultRun) -> None:
    """The shim failed calls (else the row proves nothing), and no click was stored that no 302
    gave out (a refused click's line cut back, or written after all)."""
    injected = run.io.injected()
    if not injected:
        run.problems.append("the shim injected no failure: no process made a matching call")
    else:
        run.checks.append(
            "failures injected: " + ", ".join(f"{count:,} {call}" for call, count in sorted(injected.items()))
        )
    answered = {entry.partition("\t")[0] for entry in run.subids} - missing_subids(run, run.subids)
    stored = _read_one(run, SQL_CLICK_ROWS)[0]
    if stored != len(answered):
        run.problems.append(
            f"{stored:,} clicks stored for {len(answered):,} 302s: a refused click was stored"
        )
    else:
        run.checks.append(f"{stored:,} clicks stored, each one a 302's")


def check_spool_sync_failed(run: FaultRun) -> None:
    """A failing spool fsync: clicks still landed meanwhile, and no later fsync's success was
    taken for the bytes the failed one left undurable (fsyncgate)."""
    check_io_injected(run)
    if run.landed_during_fault <= 0:
        run.problems.append("no click landed while the spool's fsync failed")
    retried = fsyncs_retried_as_success([e for e in run.io.events() if e.path.endswith(".log")])
    run.problems.extend(retried)
    if not retried:
        run.checks.append("every fsync after a failed one came after its bytes were written again")


def check_database_io(run: FaultRun) -> None:
    """The shim hit SQLite's files; and whether SQLite took a later fsync of its WAL for the bytes a
    failed one left (its own fsyncgate, noted, not a problem of the row: the spool keeps the clicks
    until a checkpoint has written them into the database file again and fsynced it)."""
    check_io_injected(run)
    retried = fsyncs_retried_as_success([e for e in run.io.events() if e.path.endswith("-wal")])
    if retried:
        run.checks.append(
            f"SQLite took {len(retried)} later WAL fsync(s) for the bytes a failed one left "
            "(its own fsyncgate: docs/RELIABILITY.md, I/O faults)"
        )


@dataclass
class PowerCut:
    """What the power-cut model dropped: per file, the bytes past its last fsync."""

    at_ms: int  # Wall-clock time of the cut (subids carry theirs).
    dropped_bytes: dict[str, int] = field(default_factory=dict)
    dropped_subids: set[str] = field(default_factory=set)  # In spool lines past a segment's last fsync.


def power_cuts(count: int) -> Callable[[FaultRun, float], None]:
    """`count` power cuts, each at a random instant 1-3 s after the tracker answers again."""

    def inject(run: FaultRun, seconds: float) -> None:
        for number in range(count):
            if number:
                time.sleep(random.uniform(1.0, 3.0))
            power_cut(run)

    return inject


def power_cut(run: FaultRun) -> None:
    """A power cut, modelled after LazyFS: every Lanner process killed at once, then each spool segment
    and the SQLite WAL cut back to its size at its last fsync that succeeded (the shim's trace), the
    -shm dropped; then systemd (the harness) starts both units again.

    Appends not fsynced are all lost (the worst case; a real disk may keep some), so the clicks
    lost are every click whose line was only in the page cache and had not landed durably in the
    database. In-place writes below a file's last fsynced size are kept (SQLite writes its database
    file only in a checkpoint, which fsyncs it): that part is a possible outcome, not the worst."""
    run.keep_down.update(("serve", "worker"))
    victims = [pid for root in run.pids() for pid in process_tree(root)]
    cut = PowerCut(int(time.time() * 1000))
    _kill(victims)
    _wait_gone(victims)
    run.cuts.append(cut)
    durable = run.io_baseline | {e.path: e.a for e in run.io.events() if e.call == "synced"}
    for path in [*run.segments(), run.wal_path]:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        keep = min(size, durable.get(str(path), 0))
        if keep < size:
            mode = path.stat().st_mode & 0o7777
            path.chmod(mode | 0o200)  # A segment writers left is read-only (Journal._mark_left).
            with open(path, "r+b") as file:
                file.seek(keep)
                tail = file.read()
                file.truncate(keep)
            path.chmod(mode)
            cut.dropped_bytes[path.name] = size - keep
            if path.name.startswith("clicks."):
                cut.dropped_subids.update(_subids_in(tail))
        run.io_baseline[str(path)] = keep  # Its size now: a synced event of before is no longer its size.
    run.wal_path.with_name(run.wal_path.name.replace("-wal", "-shm")).unlink(missing_ok=True)
    dropped = ", ".join(f"{name} {size:,} B" for name, size in sorted(cut.dropped_bytes.items()))
    run.checks.append(f"power cut {len(run.cuts)}: dropped past the last fsync: {dropped or 'nothing'}")
    run.io.log.rename(run.io.log.with_name(f"iofault.{len(run.cuts)}.log"))  # The next cut's trace.
    run.keep_down.clear()
    run.start_worker()
    run.start_serve()
    wait_http(run.serve, run.port, "/healthz", 200, 60)


def _wait_gone(pids: list[int], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while any(is_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise BenchError(f"processes still alive {seconds:.0f} s after SIGKILL")
        time.sleep(0.05)


def is_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _subids_in(tail: bytes) -> set[str]:
    """The subids of the click lines in a spool tail (the 7th field; LP lines carry their click's)."""
    found = set()
    for line in tail.split(b"\n"):
        fields = line.split(b"\t")
        if len(fields) > 6 and not line.startswith(b"lp\t"):
            found.add(fields[6].decode("ascii", "replace"))
    return found


SUBID_DIGITS = {c: n for n, c in enumerate("0123456789abcdefghjkmnpqrstvwxyz")}


def subid_ms(subid: str) -> int:
    """When a subid was made (models/clicks/record.py new_subid: milliseconds << 40 | 40 random bits)."""
    value = 0
    for char in subid:
        value = value * 32 + SUBID_DIGITS[char]
    return value >> 40


def missing_subids(run: FaultRun, subids: list[str]) -> set[str]:
    unique = sorted({entry.partition("\t")[0] for entry in subids})
    found: set[str] = set()
    with subid_finder(run.database_path) as find:
        for start in range(0, len(unique), 500):
            found.update(row[0] for row in find(unique[start : start + 500]))
    return set(unique) - found


def check_power_cut(run: FaultRun) -> None:
    """Only clicks whose line was past its segment's last fsync may be lost (what the docs promise:
    the spool is fsynced once a second); how old the lost ones were at the cut; and that the spool
    says so afterwards."""
    if not run.cuts:
        run.problems.append("the power cut did not happen")
        return
    dropped = set().union(*(cut.dropped_subids for cut in run.cuts))
    lost = missing_subids(run, run.subids)
    allowed = lost & dropped
    run.lost_allowed = len(allowed)
    if lost - allowed:
        run.problems.append(
            f"{len(lost - allowed)} click(s) lost whose line was fsynced before the cut: "
            + ", ".join(sorted(lost - allowed)[:5])
        )
    cut_times = sorted(cut.at_ms for cut in run.cuts)
    ages = sorted(
        min(t for t in cut_times if t >= made) - made for made in map(subid_ms, lost) if made <= cut_times[-1]
    )
    window = f"the oldest {ages[-1] / 1000:.2f} s before its cut" if ages else "none"
    run.checks.append(
        f"{len(run.cuts)} power cut(s): {len(lost)} answered click(s) lost, {window}; "
        f"{len(dropped)} line(s) were past their segment's last fsync"
    )
    connection = connect_read_only(run.database_path)
    try:
        integrity = connection.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        connection.close()
    if integrity != "ok":
        run.problems.append(f"integrity_check after the cuts: {integrity}")
    else:
        run.checks.append("integrity_check after the cuts: ok")
    try:
        run_lanner(run.env, "spool", "status")
        run.checks.append("`lanner spool status` after the cut: exit 0, nothing damaged")
    except BenchError as exc:  # Exit 1: a segment noted damaged (a position past its end, say).
        run.checks.append(f"`lanner spool status` after the cut: {' '.join(str(exc).split())[:400]}")


def faults(quick: bool) -> dict[str, Fault]:
    """Every fault, with how long it lasts (`--quick`: short enough for `make test`)."""
    long = 6.0 if quick else 30.0
    outage = 20.0 if quick else 600.0
    flood = QUICK_POSTBACK_FLOOD if quick else POSTBACK_FLOOD
    cuts = QUICK_POWER_CUTS if quick else POWER_CUTS
    return {
        fault.name: fault
        for fault in (
            Fault("kill-web-worker", "kill -9 of one web worker", kill_web_worker),
            Fault("kill-master", "kill -9 of the web master (its workers drain)", kill_master),
            Fault("kill-consumer", "kill -9 of the Huey consumer (the flusher)", kill_consumer),
            Fault("kill-all", "kill -9 of every Lanner process at once", kill_everything),
            Fault("consumer-down", f"the consumer stopped for {outage:.0f} s", consumer_down, outage),
            Fault(
                "disk-full",
                f"the data dir's file system full for {long:.0f} s",
                disk_full,
                long,
                needs_tmpfs=True,
            ),
            Fault("write-lock", f"another process holds the write lock {long:.0f} s", write_lock, long),
            Fault(
                "poisoned-line",
                "spool lines with a 20-digit created_at and ua_hash",
                poisoned_lines,
                after=check_poison_rejected,
            ),
            Fault(
                "deleted-active-segment", "the active spool segment deleted by hand", delete_active_segment
            ),
            Fault(
                "deleted-sealed-segment",
                "a sealed, unlanded spool segment deleted by hand",
                delete_sealed_segment,
                seal_seconds=SEAL_SECONDS,
            ),
            Fault("reloads", f"{RELOADS} SIGHUPs (graceful reloads) with keep-alive clients", reloads, 10.0),
            Fault(
                "idle-connections",
                f"{IDLE_CONNECTIONS} idle connections held {long:.0f} s",
                idle_connections,
                long,
                serve_nofile=IDLE_NOFILE,
            ),
            Fault("postback-flood", f"{flood} wrong-key postbacks", postback_flood),
            Fault(
                "huge-cost", f"{COST_CLICKS} clicks with ?cost=1e308", huge_costs, after=check_costs_finite
            ),
            Fault(
                "spool-eio",
                f"every write to the click spool fails with EIO for {long:.0f} s (LD_PRELOAD shim)",
                io_fault(write="EIO"),
                long,
                after=check_io_injected,
                io_files=SPOOL_FILES,
            ),
            Fault(
                "spool-fsync-fail",
                f"every fsync of the click spool fails with EIO for {long:.0f} s (LD_PRELOAD shim)",
                io_fault(fsync="EIO"),
                long,
                after=check_spool_sync_failed,
                io_files=SPOOL_FILES,
            ),
            Fault(
                "spool-flaky",
                f"1 in 5 writes and fsyncs of the click spool fails with EIO for {long:.0f} s",
                io_fault(write="EIO", fsync="EIO", percent=20),
                long,
                after=check_spool_sync_failed,
                io_files=SPOOL_FILES,
            ),
            Fault(
                "db-eio",
                f"every write and fsync of the SQLite database and WAL fails with EIO for {long:.0f} s",
                io_fault(write="EIO", fsync="EIO"),
                long,
                after=check_database_io,
                io_files=DATABASE_FILES,
            ),
            Fault(
                "power-cut",
                f"{cuts} power cut(s): every process killed, unfsynced spool and WAL bytes dropped",
                power_cuts(cuts),
                after=check_power_cut,
                io_files=SPOOL_FILES + DATABASE_FILES,
            ),
            Fault(
                "db-fsync-fail",
                f"every fsync of the SQLite database and WAL fails with EIO for {long:.0f} s",
                io_fault(fsync="EIO"),
                long,
                after=check_database_io,
                io_files=DATABASE_FILES,
            ),
        )
    }


# -- the run ---------------------------------------------------------------------------------


def mount_tmpfs(path: Path, size_mb: int) -> str | None:
    """A small tmpfs at `path` for the disk-full fault; the reason it cannot be, or None."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if result.returncode != 0:
        return f"mount -t tmpfs failed: {(result.stderr or result.stdout).strip()}"
    return None


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True, timeout=30)


def prepare_install(env: dict[str, str], geo_path: Path) -> None:
    run_lanner(env, "db", "migrate")
    run_lanner(env, "campaign", "create", "Bench", "--alias", BENCH_ALIAS, "--offer-url", BENCH_OFFER_URL)
    if not geo_path.exists():
        run_lanner(env, "geo", "build")


def copy_install(env: dict[str, str], geo_path: Path, work_dir: Path, data_dir: Path) -> None:
    """`prepare_install` into `data_dir`, as a copy of the install the first row of `work_dir` made
    (migrated, the campaign created, no process running on it). PERF: its two `lanner` processes
    cost ~0.6 CPU-s a row; the rows change their own copy, never the template."""
    template = work_dir / "install"
    if not template.exists():
        building = work_dir / "install.tmp"
        shutil.rmtree(building, ignore_errors=True)
        prepare_install({**env, "LANNER_DATA_DIR": str(building)}, geo_path)
        os.replace(building, template)
    shutil.copytree(template, data_dir, dirs_exist_ok=True)  # data_dir may be a tmpfs mounted for the row.


def run_fault(
    fault: Fault,
    work_dir: Path,
    *,
    quick: bool,
    workers: int = 2,
    rate: int | None = None,
    reporter: Reporter | None = None,
) -> FaultRow:
    """One row: a fresh install, traffic, the fault, recovery, the spool drained, subids reconciled."""
    reporter = reporter or Reporter()
    rate = rate or (QUICK_RATE if quick else RATE)
    row = FaultRow(fault.name, fault.about)
    fault_dir = work_dir / fault.name
    fault_dir.mkdir(parents=True, exist_ok=True)
    data_dir = fault_dir / "data"
    if fault.needs_tmpfs:
        reason = mount_tmpfs(data_dir, TMPFS_MB)
        if reason:
            row.skipped = reason
            return row
    try:
        env = _install(fault, work_dir, data_dir, rate)
        io = None
        if fault.io_files:  # Built now, for this row: never at import.
            io = IoFaults(build_shim(fault_dir / "iofault"), fault_dir, list(fault.io_files))
            io.trace()
            env = io.preload_env(env)
        run = FaultRun(fault_dir, data_dir, env, workers, quick, fault.serve_nofile)
        run.io = io
        if io is not None:  # What is on disk before the processes start: durable as far as they know.
            os.sync()
            files = [path for path in [*run.segments(), run.wal_path] if path.exists()]
            run.io_baseline = {str(path): path.stat().st_size for path in files}
        try:
            _start(run)
            _run_traffic(run, fault, row, rate, quick, reporter)
        finally:
            run.stop()
    finally:
        if fault.needs_tmpfs:
            unmount(data_dir)
    return row


def _install(fault: Fault, work_dir: Path, data_dir: Path, rate: int) -> dict[str, str]:
    """`data_dir` made an install (a copy of the run's template) for `fault`; the env to run it with."""
    env = lanner_env(data_dir)
    # A country database of the user's (LANNER_GEO_DATABASE) if there is one, else one built once.
    own_geo = env.get("LANNER_GEO_DATABASE", "")
    geo_path = Path(own_geo) if own_geo and Path(own_geo).is_file() else work_dir / "country.mmdb"
    env["LANNER_GEO_DATABASE"] = str(geo_path)
    env["LANNER_LOG_LEVEL"] = env.get("LANNER_LOG_LEVEL", "WARNING")
    env.update(fault.env)
    if fault.seal_seconds:
        env["LANNER_SPOOL_SEGMENT_BYTES"] = str(int(rate * LINE_BYTES * fault.seal_seconds))
    build_country_file(env, geo_path, work_dir)
    copy_install(env, geo_path, work_dir, data_dir)
    return env


def build_country_file(env: dict[str, str], geo_path: Path, work_dir: Path) -> None:
    """Make `geo_path` with `lanner geo build` in a scratch install under `work_dir`, unless it exists."""
    if geo_path.exists():
        return
    build_env = {**env, "LANNER_DATA_DIR": str(work_dir / "geo-build")}
    build_env.pop("LANNER_GEO_DATABASE", None)
    run_lanner(build_env, "db", "migrate")
    run_lanner(build_env, "geo", "build")
    os.replace(work_dir / "geo-build" / "geo" / "country.mmdb", geo_path)


def _start(run: FaultRun) -> None:
    run.start_worker()
    run.start_serve()
    wait_http(run.serve, run.port, "/healthz", 200, 30)


def is_shareable(fault: Fault) -> bool:
    """Whether `fault` can run on a stack earlier rows ran on: it needs nothing of its own at the
    stack's start (settings, a file-system, a limit, the I/O shim), and its checks count only its
    own clicks and requests (SHARED_STACK_FAULTS: each was read for that)."""
    return fault.name in SHARED_STACK_FAULTS and not (
        fault.env or fault.needs_tmpfs or fault.serve_nofile or fault.seal_seconds or fault.io_files
    )


class SharedStack:
    """One install and one running `lanner serve` + `lanner worker` for several rows in turn, each
    row still reconciled on its own: only its own 302s' subids, its own checks and counts. For rows
    whose subject is the fault under traffic, not the stack's start (is_shareable). PERF: a row's
    install and start cost ~1.3 CPU-s."""

    def __init__(self, work_dir: Path, *, quick: bool, workers: int = 2, rate: int | None = None) -> None:
        self.work_dir, self.quick = work_dir, quick
        self.rate = rate or (QUICK_RATE if quick else RATE)
        self.stack_dir = work_dir / "shared-stack"
        self.stack_dir.mkdir(parents=True, exist_ok=True)
        plain = Fault("shared-stack", "the shared stack", reloads)  # No setting of a row's own.
        env = _install(plain, work_dir, self.stack_dir / "data", self.rate)
        self.run = FaultRun(self.stack_dir, self.stack_dir / "data", env, workers, quick)

    def run_fault(self, fault: Fault, reporter: Reporter | None = None) -> FaultRow:
        if not is_shareable(fault):
            raise BenchError(f"{fault.name} needs a stack of its own.")
        row_dir = self.work_dir / fault.name
        row_dir.mkdir(parents=True, exist_ok=True)
        self.run.begin_row(row_dir)
        if self.run.serve is None:
            _start(self.run)
        else:  # Whatever an earlier row left down comes back, as systemd would have it.
            self.run.supervise()
            wait_http(self.run.serve, self.run.port, "/healthz", 200, 30)
        row = FaultRow(fault.name, fault.about)
        _run_traffic(self.run, fault, row, self.rate, self.quick, reporter or Reporter())
        return row

    def stop(self) -> None:
        self.run.stop()


def _run_traffic(
    run: FaultRun, fault: Fault, row: FaultRow, rate: int, quick: bool, reporter: Reporter
) -> None:
    first = run.click()
    if first is None:
        raise BenchError(f"the first click got no subid:\n{run.serve.log_tail()}")
    warmup_clicks = math.ceil(rate * WARMUP_CLICK_SECONDS)
    landed_before = run.newest_click_id()
    outcome: dict[str, float | bool | None] = {}
    failure: list[BaseException] = []

    def schedule() -> None:
        try:
            wait_landed(run, landed_before + warmup_clicks)
            reporter.message(f"{fault.name}: {fault.about}")
            outcome["active"] = True
            fault.inject(run, fault.seconds)
            outcome["active"] = False
            ended = time.monotonic()
            outcome["recovery"], outcome["caught_up"] = run.measure_recovery(ended)
        except BaseException as exc:  # noqa: BLE001 (reported after k6 is done: the row says why)
            failure.append(exc)

    def tick(elapsed: float) -> None:
        rss = tree_memory_mb(run.pids())
        row.peak_rss_mb = max(row.peak_rss_mb, rss)
        if outcome.get("active"):
            row.fault_peak_rss_mb = max(row.fault_peak_rss_mb, rss)
        if "recovery" in outcome:
            run.supervise()

    injector = threading.Thread(target=schedule, name=f"fault-{fault.name}", daemon=True)
    warmup, tail = (QUICK_WARMUP_SECONDS, QUICK_TAIL_SECONDS) if quick else (WARMUP_SECONDS, TAIL_SECONDS)
    seconds = math.ceil(warmup + fault.seconds + tail)
    pre_vus, max_vus = vus_for_rate(rate)
    injector.start()
    k6 = run_k6_step(
        k6_binary(),
        f"http://127.0.0.1:{run.port}/{BENCH_ALIAS}",
        rate,
        seconds,
        run.work_dir,
        "k6",
        pre_vus=pre_vus,
        max_vus=max(max_vus, 200),
        on_tick=tick,
    )
    injector.join(timeout=RECOVERY_DEADLINE_SECONDS + 120)
    if failure:
        raise BenchError(f"{fault.name}: the fault could not be injected: {failure[0]!r}")
    row.recovery_s, row.caught_up_s = outcome.get("recovery"), outcome.get("caught_up")
    run.supervise()
    try:
        wait_drained(run)
    except BenchError as exc:  # Still reconciled: what did land, and what is missing.
        run.problems.append(str(exc))
    step = StepResult("lanner", rate, seconds, pre_vus, max_vus)
    apply_k6_summary(step, k6)
    subids, _ = read_subids(k6.log_path)
    subids += run.extra_subids
    row.requests = step.requests + len(run.extra_subids) + sum(run.extra_errors.values())
    row.redirects = step.accepted + len(run.extra_subids)
    row.lost, row.duplicated = reconcile_subids(run.database_path, subids)
    run.subids = subids
    row.errors_500 = run.extra_errors["500"] + _k6_count(k6.summary, "500")
    row.errors_503 = (
        run.extra_errors["503"] + step.errors_by_kind.get("5xx", 0) - _k6_count(k6.summary, "500")
    )
    row.errors_other = run.extra_errors["other"] + sum(
        v for k, v in step.errors_by_kind.items() if k != "5xx"
    )
    if fault.after is not None:
        fault.after(run)
    row.checks, row.problems, row.lost_allowed = run.checks, run.problems, run.lost_allowed
    if row.recovery_s is None:
        row.problems.append(f"no click landed within {RECOVERY_DEADLINE_SECONDS:.0f} s of the fault's end")
    elif row.caught_up_s is None:
        row.problems.append(
            f"clicks were landing again, but not yet one made after the fault's end "
            f"{RECOVERY_DEADLINE_SECONDS:.0f} s later"
        )


def wait_landed(run: FaultRun, click_id: int) -> None:
    """Until the click table reaches `click_id` (k6's clicks landing)."""
    deadline = time.monotonic() + WARMUP_DEADLINE_SECONDS
    while run.newest_click_id() < click_id:
        if time.monotonic() > deadline:
            raise BenchError(
                f"the click table short of id {click_id} by {click_id - run.newest_click_id()} "
                f"{WARMUP_DEADLINE_SECONDS:.0f} s into the traffic (logs: {run.work_dir})"
            )
        time.sleep(0.1)


def _k6_count(summary: dict, kind: str) -> int:
    values = summary.get("metrics", {}).get(f"bench_errors{{code:{kind}}}", {}).get("values", {})
    return int(values.get("count", 0) or 0)


def wait_drained(
    run: FaultRun, supervise: Callable[[], None] | None = None, seconds: float = DRAIN_DEADLINE_SECONDS
) -> None:
    """Until every spooled click has landed, supervising the run's processes meanwhile (`supervise`,
    by default the run's own) so a killed consumer comes back."""
    deadline = time.monotonic() + seconds
    while True:
        (supervise or run.supervise)()
        try:
            pending = spool_pending_clicks(run.database, run.spool_dir)
        except Exception:  # noqa: BLE001 (a locked SQLite file, a PostgreSQL killed and not back yet)
            pending = -1
        if pending == 0:
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"{pending} click(s) still spooled {seconds:.0f} s after the run (logs: {run.work_dir})"
            )
        time.sleep(0.1)


def run_faults(
    names: list[str],
    work_dir: Path,
    *,
    quick: bool,
    workers: int = 2,
    rate: int | None = None,
    reporter: Reporter | None = None,
) -> list[FaultRow]:
    table = faults(quick)
    unknown = [name for name in names if name not in table]
    if unknown:
        raise BenchError(f"unknown fault(s) {', '.join(unknown)}; the faults are {', '.join(table)}.")
    rows = []
    for name in names or list(table):
        try:
            row = run_fault(table[name], work_dir, quick=quick, workers=workers, rate=rate, reporter=reporter)
        except BenchError as exc:  # This fault's row says why; the others still run.
            row = FaultRow(name, table[name].about, problems=[str(exc)])
        rows.append(row)
        if reporter is not None:
            reporter.message(describe(row))
    return rows


ROW_HEADER = [
    "fault",
    "requests",
    "302s",
    "lost",
    "dup",
    "500",
    "503",
    "other",
    "recover s",
    "caught up s",
    "peak RSS MB",
    "verdict",
]


def describe(row: FaultRow) -> str:
    """One line for the console as each fault finishes."""
    if row.skipped:
        return f"{row.name}: skipped ({row.skipped})"
    recovery = "never" if row.recovery_s is None else f"{row.recovery_s:.2f} s"
    caught_up = "never" if row.caught_up_s is None else f"{row.caught_up_s:.2f} s"
    verdict = "met" if row.is_met else "MISS: " + "; ".join(row.problems or ["see the row"])
    return (
        f"{row.name}: {row.redirects:,} of {row.requests:,} requests got a subid, {row.lost} lost"
        f"{f' ({row.lost_allowed} within the promised window)' if row.lost_allowed else ''}, "
        f"{row.duplicated} duplicated, {row.errors_500} x 500, recovered in {recovery}, "
        f"caught up in {caught_up}, "
        f"peak RSS {row.fault_peak_rss_mb:.0f} MB during the fault, {row.peak_rss_mb:.0f} MB in all; "
        f"{verdict}"
    )


def format_rows(rows: list[FaultRow]) -> list[str]:
    cells = []
    for row in rows:
        if row.skipped:
            cells.append([row.name, *[""] * (len(ROW_HEADER) - 2), f"skipped: {row.skipped}"])
            continue
        recovery = "-" if row.recovery_s is None else f"{row.recovery_s:.2f}"
        caught_up = "-" if row.caught_up_s is None else f"{row.caught_up_s:.2f}"
        cells.append(
            [
                row.name,
                f"{row.requests:,}",
                f"{row.redirects:,}",
                str(row.lost),
                str(row.duplicated),
                str(row.errors_500),
                str(row.errors_503),
                str(row.errors_other),
                recovery,
                caught_up,
                f"{row.peak_rss_mb:.0f}",
                "met" if row.is_met else "MISS",
            ]
        )
    lines = list(_aligned(ROW_HEADER, cells))
    for row in rows:
        for note in row.problems:
            lines.append(f"  {row.name}: PROBLEM: {note}")
        for note in row.checks:
            lines.append(f"  {row.name}: {note}")
    return lines
