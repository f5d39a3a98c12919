"""`lanner bench faults --crash-loop`: many SIGKILLs of random Lanner processes under a steady click load.

A crash loop starts a fresh install as a fault row does (workers/bench/faults.py), offers a steady rate
of campaign clicks from a few client threads (each click a visitor of its own, tagged `sub_id_1=<n>` so
a stored click says which request made it), and SIGKILLs a random Lanner process at random instants:
one drawn uniformly from every live process: a web worker, the web master, the Huey consumer (with
its threads) or the admin worker (started on demand: a thread asks the admin socket's `/healthz`
now and then, so there is often one to kill). The instants do not wait for a restart, but the master
is a victim only once it has forked its web workers (see `victims`); an instant with no victim passes.

With `cluster=True` the node runs in cluster mode, on a PostgreSQL (fsync on) and a Redis of the
run's own (workers/bench/servers.py), and both are victims too, taking half the kills: the
PostgreSQL server with every backend (as systemd's control group dies), or redis-server, each started
again RESTART_SECONDS later (PostgreSQL runs its crash recovery; Redis comes back empty, as it does
without persistence).

The harness plays systemd's part and nothing more: `lanner serve` and `lanner worker` are the two
units (systemd/lanner-web.service, systemd/lanner-worker.service: `Restart=always`, `RestartSec=2`),
so a dead master or consumer is started again RESTART_SECONDS after it died; web and admin workers
are the master's to replace.

After the last kill, once both units run again, the load stops, the spool drains and the processes
stop; then:
- every 302's subid is reconciled by list against the click table: lost (answered, not stored),
  duplicated (one subid answered to two requests or stored twice, or one request stored twice),
  phantom (a stored click no request of ours explains), and, counted apart, *unanswered*: a stored
  click whose request got no 302 (its worker or master was killed between the journal line and the
  answer, or the client gave up). The promise is durable-before-302 (docs/clicks.md), so such a click
  is allowed, and reported, never folded into the others;
- `PRAGMA integrity_check` must say ok (on PostgreSQL: amcheck's `bt_index_check` of every index, with
  `heapallindexed`);
- each rollup table's click metrics, per period, must equal a recount from the raw clicks.
"""

from __future__ import annotations

import http.client
import os
import random
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.bench.faults import FaultRun, build_country_file, is_alive, prepare_install, wait_drained
from workers.bench.harness import (
    BENCH_ALIAS,
    BenchError,
    Reporter,
    _aligned,
    connect_read_only,
    is_postgres,
    lanner_env,
    wait_http,
)
from workers.runtime.procfs import process_name, process_tree

RESTART_SECONDS = 2.0  # systemd/lanner-web.service and lanner-worker.service: RestartSec=2.
KILL_EVERY = 1.0  # Mean seconds between kills; each gap is uniform in [0, 2 x this].
RATE = 100  # Clicks offered per second, over CLIENTS threads.
CLIENTS = 8
CLIENT_TIMEOUT = 10.0
ADMIN_POKE_EVERY = 2.0
SETTLE_DEADLINE_SECONDS = 120.0
DRAIN_DEADLINE_SECONDS = 180.0
KINDS = ("web worker", "master", "consumer", "admin worker")
SERVER_KINDS = ("postgres", "redis")
SERVER_SHARE = 0.5  # Cluster mode: the share of the kills that go to PostgreSQL or Redis.

SQL_STORED = "SELECT subid, sub_id_1 FROM click"
SQL_INTEGRITY = "PRAGMA integrity_check"
# PostgreSQL has no integrity_check; amcheck (in Debian's postgresql package) checks each B-tree index
# against its table (heapallindexed: every row has its index entry).
SQL_AMCHECK = "CREATE EXTENSION IF NOT EXISTS amcheck"
SQL_INDEXES_POSTGRES = (
    "SELECT c.oid, c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE a.amname = 'btree' AND n.nspname = 'public'"
)
SQL_INDEX_CHECK = "SELECT bt_index_check(%s, true)"
# The click metrics of a rollup row, and the same recounted from raw clicks, per period.
SQL_ROLLUP_PERIODS = (
    "SELECT period, total(clicks), total(unique_global), total(unique_campaign), total(unique_stream), "
    "total(bots) FROM {table} GROUP BY period"
)
SQL_RECOUNT_PERIODS = (
    "SELECT created_at - created_at % {width}, count(*), total(is_unique_global), "
    "total(is_unique_campaign), total(is_unique_stream), total(is_bot) FROM click GROUP BY 1"
)
SQL_ROLLUP_PERIODS_POSTGRES = (
    "SELECT period, sum(clicks), sum(unique_global), sum(unique_campaign), sum(unique_stream), "
    "sum(bots) FROM {table} GROUP BY period"
)
SQL_RECOUNT_PERIODS_POSTGRES = (
    "SELECT created_at - created_at % {width}, count(*), sum(is_unique_global), "
    "sum(is_unique_campaign), sum(is_unique_stream), sum(is_bot) FROM click GROUP BY 1"
)


@dataclass
class Reconciliation:
    """Every 302 against every stored click, by list."""

    answered: int = 0  # 302s with a subid.
    stored: int = 0  # Click rows.
    lost: list[str] = field(default_factory=list)  # Answered subids with no row.
    duplicated: list[str] = field(default_factory=list)  # Subids (or request tags) seen twice.
    phantom: list[str] = field(default_factory=list)  # Stored subids nothing of ours explains.
    unanswered: list[str] = field(default_factory=list)  # Stored subids of requests that got no 302.

    @property
    def is_clean(self) -> bool:
        return not (self.lost or self.duplicated or self.phantom)


def reconcile(
    answers: Iterable[tuple[str, str]], failed: Iterable[str], rows: Iterable[tuple[str, str]]
) -> Reconciliation:
    """answers: (tag, subid) per 302; failed: tags of requests that got no 302; rows: (subid, tag) stored."""
    result = Reconciliation()
    answer_list = list(answers)
    row_list = list(rows)
    result.answered, result.stored = len(answer_list), len(row_list)
    failed_tags = set(failed)
    by_subid: dict[str, set[str]] = {}
    for tag, subid in answer_list:
        by_subid.setdefault(subid, set()).add(tag)
    # One subid answered to two requests.
    result.duplicated += sorted(subid for subid, tags in by_subid.items() if len(tags) > 1)
    stored_subids = Counter(subid for subid, _ in row_list)
    stored_tags = Counter(tag for _, tag in row_list)
    # One subid stored twice, or one request stored as two clicks.
    result.duplicated += sorted(subid for subid, count in stored_subids.items() if count > 1)
    result.duplicated += sorted(f"request {tag}" for tag, count in stored_tags.items() if count > 1)
    result.lost = sorted(subid for subid in by_subid if subid not in stored_subids)
    for subid, tag in row_list:
        if subid in by_subid:
            continue
        (result.unanswered if tag in failed_tags else result.phantom).append(subid)
    result.unanswered.sort()
    result.phantom.sort()
    return result


@dataclass
class CrashLoopResult:
    kills: int
    seed: int
    rate: int
    kill_every: float
    cluster: bool = False
    seconds: float = 0.0
    kills_by_kind: dict[str, int] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)  # Units the harness (systemd) started again.
    instants_passed: int = 0  # Kill instants at which no process could be killed.
    sent: int = 0
    redirects: int = 0
    failed: int = 0  # Connection errors, timeouts, non-302 answers.
    status_500: int = 0
    stored: int = 0
    lost: int = 0
    duplicated: int = 0
    phantom: int = 0
    unanswered: int = 0
    integrity: str = ""
    rollups: str = ""
    examples: dict[str, list[str]] = field(default_factory=dict)  # A few subids of each kind of miss.
    problems: list[str] = field(default_factory=list)

    @property
    def is_met(self) -> bool:
        return (
            not self.problems
            and self.redirects > 0
            and self.lost == 0
            and self.duplicated == 0
            and self.phantom == 0
            and self.status_500 == 0
            and self.integrity == "ok"
            and self.rollups == "ok"
        )

    def to_json(self) -> dict:
        return {**asdict(self), "is_met": self.is_met}


class ClickLoad:
    """A steady rate of campaign clicks from CLIENTS threads, each click a new visitor with a tag."""

    def __init__(self, port: int, rate: int, clients: int = CLIENTS) -> None:
        self.port, self.rate, self.clients = port, rate, clients
        self.stop_event = threading.Event()
        self.answers: list[list[tuple[str, str]]] = [[] for _ in range(clients)]
        self.failed: list[list[str]] = [[] for _ in range(clients)]
        self.statuses: list[Counter] = [Counter() for _ in range(clients)]
        self.threads = [
            threading.Thread(target=self._client, args=(n,), name=f"clicks-{n}", daemon=True)
            for n in range(clients)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=CLIENT_TIMEOUT + 10)

    def _client(self, n: int) -> None:
        every = self.clients / self.rate
        due = time.monotonic() + n * every / self.clients
        i = 0
        while not self.stop_event.is_set():
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            due = max(due + every, time.monotonic() - 1.0)  # Behind: catch up by a second, no more.
            number = i * self.clients + n
            i += 1
            tag = str(number)
            headers = {
                "X-Real-IP": f"10.{(number >> 16) & 255}.{(number >> 8) & 255}.{number & 255}",
                "User-Agent": f"lanner-crash-loop {number}",
            }
            status, location = 0, ""
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT)
            try:
                connection.request("GET", f"/{BENCH_ALIAS}?sub_id_1={tag}", headers=headers)
                response = connection.getresponse()
                response.read()
                status, location = response.status, response.getheader("Location") or ""
            except (OSError, http.client.HTTPException):
                pass
            finally:
                connection.close()
            self.statuses[n][status] += 1
            subid = location.partition("click=")[2].partition("&")[0] if status == 302 else ""
            if subid:
                self.answers[n].append((tag, subid))
            else:
                self.failed[n].append(tag)

    def all_answers(self) -> list[tuple[str, str]]:
        return [answer for answers in self.answers for answer in answers]

    def all_failed(self) -> list[str]:
        return [tag for tags in self.failed for tag in tags]

    def status_counts(self) -> Counter:
        return sum(self.statuses, Counter())


def poke_admin(socket_path: Path) -> None:
    """One GET /healthz on the admin socket: the on-demand admin pool starts a worker for it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(socket_path))
        sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: admin\r\n\r\n")
        while sock.recv(65536):
            pass


class Supervisor:
    """systemd for the two units: a dead `lanner serve` or `lanner worker` starts again RestartSec later."""

    def __init__(self, run: FaultRun, servers: Servers | None = None) -> None:
        self.run = run
        self.servers = servers
        self.died_at: dict[str, float] = {}
        self.restarts: Counter = Counter()

    def tick(self) -> None:
        now = time.monotonic()
        if self.servers is not None:
            for kind in SERVER_KINDS:
                if self.servers.is_up(kind):
                    continue
                died = self.died_at.setdefault(kind, now)
                if now - died >= RESTART_SECONDS and self.servers.start(kind):
                    self.restarts[kind] += 1
                    del self.died_at[kind]
                    now = time.monotonic()
        for name, start in (("serve", self.run.start_serve), ("worker", self.run.start_worker)):
            process = getattr(self.run, name)
            if process is not None and process.is_running():
                continue
            died = self.died_at.setdefault(name, now)
            if now - died >= RESTART_SECONDS:
                start()
                self.restarts[name] += 1
                del self.died_at[name]

    def both_running(self) -> bool:
        """Both units up (and, in cluster mode, both servers)."""
        servers_up = self.servers is None or all(self.servers.is_up(kind) for kind in SERVER_KINDS)
        return servers_up and all(p is not None and p.is_running() for p in (self.run.serve, self.run.worker))


class Servers:
    """The cluster's PostgreSQL and Redis, killed and started again like two more systemd units."""

    def __init__(self, postgres, redis) -> None:
        self.postgres, self.redis = postgres, redis
        self.start_failures = 0  # Starts that failed (tried again at the next tick).

    def is_up(self, kind: str) -> bool:
        if kind == "postgres":
            pid = self.postgres.pid
            return pid is not None and is_alive(pid)
        process = self.redis.process
        return process is not None and process.poll() is None

    def victims(self) -> dict[str, list[int]]:
        found = {}
        if self.is_up("postgres"):
            found["postgres"] = [self.postgres.pid]
        if self.is_up("redis"):
            found["redis"] = [self.redis.process.pid]
        return found

    def start(self, kind: str) -> bool:
        """Start a dead server again; False if it could not start yet (a backend of the killed
        PostgreSQL still holding its shared memory, say)."""
        server = self.postgres if kind == "postgres" else self.redis
        try:
            server.resume()
        except RuntimeError:
            self.start_failures += 1
            return False
        return True


@contextmanager
def cluster_servers(env: dict[str, str]) -> Iterator[Servers]:
    """A PostgreSQL (fsync on, as the cluster bench) and a Redis of the run's own, named in `env`."""
    from workers.bench.servers import start_both

    with ExitStack() as stack:
        postgres, redis = start_both(stack, shared_buffers="32MB")
        env.update(
            LANNER_DATABASE_URL=postgres.url(postgres.create_database()),
            LANNER_REDIS_URL=redis.url(),
            LANNER_NODE_ID="node-1",
        )
        yield Servers(postgres, redis)


def victims(run: FaultRun) -> dict[str, list[int]]:
    """The live processes of each kind (the current master's workers only: drained ones are leaving).

    The master counts once it has forked its web workers (it is serving): killed again during its
    start (~7 s on the shared box) it never serves, and systemd's default StartLimitBurst (5 starts in
    10 s) would stop restarting the unit; the consumer counts from its start."""
    found: dict[str, list[int]] = {}
    if run.serve is not None and run.serve.is_running():
        for pid in process_tree(run.serve.pid)[1:]:
            name = process_name(pid)
            if name in ("lanner-web", "lanner-admin"):
                found.setdefault("web worker" if name == "lanner-web" else "admin worker", []).append(pid)
        if "web worker" in found:
            found["master"] = [run.serve.pid]
    if run.worker is not None and run.worker.is_running():
        found["consumer"] = [run.worker.pid]
    return found


def kill_one(run: FaultRun, rng: random.Random, servers: Servers | None = None) -> str | None:
    """SIGKILL one process drawn uniformly from every live one; its kind, or None when none is up."""
    found = victims(run)
    if servers is not None:
        # Half the kills go to the servers: drawn with the Lanner processes they would be one kill in
        # six or seven, and a short run might never kill PostgreSQL.
        others = servers.victims()
        if others and (rng.random() < SERVER_SHARE or not found):
            found = others
    if not found:
        return None
    kind, pid = rng.choice(sorted((kind, pid) for kind, pids in found.items() for pid in pids))
    # The consumer with its threads and any child (as kill-consumer does), PostgreSQL with every
    # backend (its unit's control group); the others alone.
    pids = process_tree(pid) if kind in ("consumer", "postgres") else [pid]
    for target in pids or [pid]:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return kind


def run_crash_loop(
    work_dir: Path,
    *,
    kills: int,
    seed: int = 1,
    rate: int = RATE,
    kill_every: float = KILL_EVERY,
    workers: int = 2,
    cluster: bool = False,
    reporter: Reporter | None = None,
) -> CrashLoopResult:
    """A fresh install, a steady load, `kills` SIGKILLs at random instants, then every check."""
    reporter = reporter or Reporter()
    result = CrashLoopResult(kills=kills, seed=seed, rate=rate, kill_every=kill_every, cluster=cluster)
    data_dir = work_dir / "crash-loop" / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    env = lanner_env(data_dir)
    env["LANNER_LOG_LEVEL"] = env.get("LANNER_LOG_LEVEL", "WARNING")
    geo_path = work_dir / "country.mmdb"
    env["LANNER_GEO_DATABASE"] = str(geo_path)
    build_country_file(env, geo_path, work_dir)
    with ExitStack() as stack:
        servers = stack.enter_context(cluster_servers(env)) if cluster else None
        prepare_install(env, geo_path)
        run = FaultRun(data_dir.parent, data_dir, env, workers, quick=False)
        if cluster:
            run.database = env["LANNER_DATABASE_URL"]
        _crash_loop(run, result, random.Random(seed), servers, reporter)
    return result


def _crash_loop(
    run: FaultRun,
    result: CrashLoopResult,
    rng: random.Random,
    servers: Servers | None,
    reporter: Reporter,
) -> None:
    kills, kill_every = result.kills, result.kill_every
    supervisor = Supervisor(run, servers)
    load = ClickLoad(run.port, result.rate)
    admin_stop = threading.Event()
    rng_admin = random.Random(result.seed + 1)

    def admin_pokes() -> None:
        while not admin_stop.wait(ADMIN_POKE_EVERY * rng_admin.random() * 2):
            try:
                poke_admin(run.data_dir / "admin.sock")
            except OSError:
                pass

    admin = threading.Thread(target=admin_pokes, name="admin-pokes", daemon=True)
    started = time.monotonic()
    try:
        run.start_worker()
        run.start_serve()
        wait_http(run.serve, run.port, "/healthz", 200, 60)
        load.start()
        admin.start()
        made: Counter = Counter()
        skipped = 0
        next_kill = time.monotonic() + rng.uniform(0, 2 * kill_every)
        while sum(made.values()) < kills:
            supervisor.tick()
            if time.monotonic() < next_kill:
                time.sleep(min(0.02, max(0.0, next_kill - time.monotonic())))
                continue
            kind = kill_one(run, rng, servers)
            next_kill = time.monotonic() + rng.uniform(0, 2 * kill_every)
            if kind is None:
                skipped += 1  # Nothing up at this instant: it passes.
                continue
            made[kind] += 1
            done = sum(made.values())
            if done % 100 == 0 or done == kills:
                reporter.message(f"crash loop: {done} of {kills} kills ({dict(made)})")
        kinds = KINDS + SERVER_KINDS if servers is not None else KINDS
        result.kills_by_kind = {kind: made.get(kind, 0) for kind in kinds}
        result.instants_passed = skipped
        _settle(run, supervisor)
    finally:
        admin_stop.set()
        load.stop()
        admin.join(timeout=10)
    try:
        wait_drained(run, supervisor.tick, DRAIN_DEADLINE_SECONDS)
    except BenchError as exc:  # Still reconciled: what did land, and what is missing.
        result.problems.append(str(exc))
    run.stop()
    result.seconds = round(time.monotonic() - started, 1)
    result.restarts = dict(supervisor.restarts)
    statuses = load.status_counts()
    result.sent = sum(statuses.values())
    result.status_500 = statuses.get(500, 0)
    if servers is not None:
        while not (servers.is_up("postgres") or servers.start("postgres")):
            time.sleep(RESTART_SECONDS)  # wait_drained started it; a kill at the very end may not have.
    check(result, run.database, load.all_answers(), load.all_failed())


def _settle(run: FaultRun, supervisor: Supervisor) -> None:
    """After the last kill: both units up and a click answered again (the load keeps going meanwhile)."""
    deadline = time.monotonic() + SETTLE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        supervisor.tick()
        if supervisor.both_running():
            try:
                wait_http(run.serve, run.port, "/healthz", 200, 5)
                return
            except BenchError:
                pass
        time.sleep(0.05)
    raise BenchError(f"the tracker did not come back within {SETTLE_DEADLINE_SECONDS:.0f} s of the last kill")


def check(
    result: CrashLoopResult, database: Path | str, answers: list[tuple[str, str]], failed: list[str]
) -> None:
    """Reconcile, integrity_check (amcheck on PostgreSQL) and the rollups' recount, into `result`."""
    if is_postgres(database):
        rows, result.integrity, mismatches = _read_postgres(str(database))
    else:
        connection = connect_read_only(Path(database))
        try:
            rows = connection.execute(SQL_STORED).fetchall()
            result.integrity = "; ".join(row[0] for row in connection.execute(SQL_INTEGRITY).fetchall())
            mismatches = rollup_mismatches(connection)
        finally:
            connection.close()
    found = reconcile(answers, failed, rows)
    result.redirects, result.stored = found.answered, found.stored
    result.failed = len(failed)
    result.lost, result.duplicated = len(found.lost), len(found.duplicated)
    result.phantom, result.unanswered = len(found.phantom), len(found.unanswered)
    result.examples = {
        name: values[:10]
        for name, values in (
            ("lost", found.lost),
            ("duplicated", found.duplicated),
            ("phantom", found.phantom),
            ("unanswered", found.unanswered),
        )
        if values
    }
    shown = "; ".join(mismatches[:5])
    result.rollups = f"{len(mismatches)} mismatch(es): {shown}" if mismatches else "ok"


def _read_postgres(url: str) -> tuple[list[tuple[str, str]], str, list[str]]:
    """(stored rows, integrity verdict, rollup mismatches) from PostgreSQL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        rows = [(subid, tag) for subid, tag in connection.execute(SQL_STORED).fetchall()]
        try:
            connection.execute(SQL_AMCHECK)
            indexes = connection.execute(SQL_INDEXES_POSTGRES).fetchall()
            failures = []
            for oid, name in indexes:
                try:
                    connection.execute(SQL_INDEX_CHECK, (oid,))
                except psycopg.Error as exc:
                    failures.append(f"{name}: {str(exc).strip()}")
            integrity = "; ".join(failures) if failures else "ok"
        except psycopg.Error as exc:  # No amcheck in this PostgreSQL build.
            integrity = f"not checked: {str(exc).strip()}"
        mismatches = rollup_mismatches(connection, postgres=True)
    return rows, integrity, mismatches


def rollup_mismatches(connection, *, postgres: bool = False) -> list[str]:
    """Each rollup table's click metrics per period against a recount from the click table."""
    from models.tables.dimensions import TABLES

    rollup_sql = SQL_ROLLUP_PERIODS_POSTGRES if postgres else SQL_ROLLUP_PERIODS
    recount_sql = SQL_RECOUNT_PERIODS_POSTGRES if postgres else SQL_RECOUNT_PERIODS
    mismatches = []
    for table, width, _ in TABLES:
        have = _by_period(connection.execute(rollup_sql.format(table=table)).fetchall())
        want = _by_period(connection.execute(recount_sql.format(width=width)).fetchall())
        for period in sorted(set(have) | set(want)):
            if have.get(period, (0.0,) * 5) != want.get(period, (0.0,) * 5):
                mismatches.append(
                    f"{table} period {period}: rollup {have.get(period)}, recount {want.get(period)}"
                )
    return mismatches


def _by_period(rows: list[tuple]) -> dict[int, tuple[float, ...]]:
    """period -> its five counts as floats (SQLite's total() is a float, PostgreSQL's sum() a numeric)."""
    return {int(row[0]): tuple(float(value or 0) for value in row[1:]) for row in rows}


HEADER = ["kills", "web", "master", "consumer", "admin", "sent", "302s", "stored", "lost", "dup",
          "phantom", "unanswered", "integrity", "rollups", "verdict"]  # fmt: skip


def format_result(result: CrashLoopResult) -> list[str]:
    kinds = result.kills_by_kind
    shown = KINDS + SERVER_KINDS if result.cluster else KINDS
    header = HEADER[:5] + list(SERVER_KINDS) + HEADER[5:] if result.cluster else HEADER
    cells = [
        [
            f"{sum(kinds.values()):,}",
            *(f"{kinds.get(kind, 0):,}" for kind in shown),
            f"{result.sent:,}",
            f"{result.redirects:,}",
            f"{result.stored:,}",
            str(result.lost),
            str(result.duplicated),
            str(result.phantom),
            str(result.unanswered),
            result.integrity if len(result.integrity) < 20 else "FAILED",
            result.rollups if len(result.rollups) < 20 else "MISMATCH",
            "met" if result.is_met else "MISS",
        ]
    ]
    lines = list(_aligned(header, cells))
    lines.append(
        f"  {result.seconds:.0f} s, {result.rate}/s offered, a kill every {result.kill_every:g} s on average "
        f"(seed {result.seed}); restarts by systemd's part: {result.restarts}; "
        f"{result.failed:,} requests without a 302 ({result.status_500} x 500)"
    )
    if result.unanswered:
        lines.append(
            f"  {result.unanswered} stored click(s) whose request got no 302 (killed between the journal "
            "line and the answer): allowed, the promise is durable before the 302"
        )
    for name, values in result.examples.items():
        lines.append(f"  {name}: {', '.join(values)}")
    for problem in result.problems:
        lines.append(f"  PROBLEM: {problem}")
    if len(result.integrity) >= 20:
        lines.append(f"  integrity_check: {result.integrity}")
    if len(result.rollups) >= 20:
        lines.append(f"  rollups: {result.rollups}")
    return lines
