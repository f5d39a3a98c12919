"""Replaying conversion histories (workers/bench/histories.py) against real servers, and the bench over it.

`prepare_history` makes what a history needs in the database the caller has open (two campaigns over three
offers in three currencies with their rates, the generator's network words mapped, an outbound postback
target) and clicks each campaign through the given nodes until `clicks` subids have landed. `replay`
sends a plan over HTTP from several threads, the operations handed out in order (neighbours overlap),
each to node `index % nodes`; an answer that says try again (503, no answer) is sent again, as a network
would, after a growing pause, each time as an operation of its own marked as a retry. `Outage` stops the
cluster's PostgreSQL or Redis once the history is under way and starts it again once the nodes have
answered "try again" enough times (or a deadline passed). `read_outcome` reads the conversion rows and
the reports by campaign and by offer; `check_history` judges.

`lanner bench histories` (`run_histories`) does all of it on throwaway processes: one box (`lanner serve`
and `lanner worker` on SQLite, or on PostgreSQL and Redis when a fault needs them), or two nodes on one
PostgreSQL and Redis.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from workers.bench.histories import (
    CURRENCIES,
    NETWORK,
    NETWORK_WORDS,
    Anomaly,
    ConversionRow,
    Operation,
    check_history,
    generate_history,
    summarise,
)

SQL_CONVERSIONS = (
    "SELECT id, subid, tid, status, original_status, report_payout, campaign_id, offer_id FROM conversion"
)
SQL_CAMPAIGN_CLICKS = "SELECT subid FROM click WHERE campaign_id IN ({})"
SQL_PARKED_SUBIDS = "SELECT subid FROM postback_log WHERE verdict = 'parked'"
SQL_POSTBACK_LOG = "SELECT subid, tid, raw_status, verdict, conversion_id, detail FROM postback_log"
SETTLED_DETAIL = re.compile(r"\(matched after [0-9.]+ s parked\)$")  # ConversionRecorder.settle_parked's
RATES = {"EUR": 1.1, "GBP": 1.25}
REQUEST_SECONDS = 60.0
LAND_SECONDS = 120.0
GIVE_UP_SECONDS = 120.0  # A postback still told to try again after this long is left at its last answer.
FAULTS = ("none", "postgres", "redis")


@dataclass
class Setup:
    """What `prepare_history` made: campaign and offer ids, and the landed clicks' subids."""

    campaigns: list[int]
    offers: list[int]
    subids: list[str]


def http_request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
    """One request on a fresh connection: (status, body); (0, the error) when none came back."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_SECONDS)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        return 0, f"{type(exc).__name__}: {exc}"
    finally:
        connection.close()


def click_subid(port: int, alias: str, visitor: int) -> str:
    """One new visitor's click: the subid in its Location ("" when the click was not answered 302)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_SECONDS)
    ip = f"10.{visitor >> 16 & 255}.{visitor >> 8 & 255}.{visitor & 255}"
    try:
        connection.request("GET", f"/{alias}", headers={"X-Real-IP": ip, "User-Agent": f"History {visitor}"})
        response = connection.getresponse()
        response.read()
        location = response.getheader("Location") or ""
    finally:
        connection.close()
    return parse_qs(urlsplit(location).query).get("click", [""])[0] if response.status == 302 else ""


def prepare_history(db, ports: list[int], clicks: int, *, prefix: str = "hist") -> Setup:
    """Campaigns, offers, rates, network words and an outbound target in `db`, then `clicks` clicks
    through `ports` (each a new visitor), waited for until every one has landed."""
    from models.admin.services import create_campaign, create_offer, update_stream
    from models.conversions.admin import add_target, map_status
    from models.reporting.currency import set_rates

    set_rates(db, RATES)
    offers = [
        create_offer(
            db,
            f"{prefix} {currency}",
            f"https://{prefix}.example/?click={{subid}}",
            payout=payout,
            currency=currency,
        ).id
        for currency, payout in zip(CURRENCIES, (10.0, 7.5, 3.25), strict=True)
    ]
    first = create_campaign(db, f"{prefix} one", f"{prefix}-one", offer_id=offers[0])
    second = create_campaign(db, f"{prefix} two", f"{prefix}-two", offer_id=offers[1])
    update_stream(db, second.streams.get().id, offers=[(offers[1], 50), (offers[2], 50)])
    for word, status in NETWORK_WORDS.items():
        map_status(db, word, status, network=NETWORK)
    # Nothing listens there: each delivery fails and is retried, beside the history, as a dead source's would.
    add_target(db, first.alias, "http://127.0.0.1:9/cb?st={status}&p={payout}", ["lead", "sale", "rejected"])
    subids = []
    for n in range(clicks):
        subid = click_subid(ports[n % len(ports)], (first.alias, second.alias)[n % 2], n + 1)
        if not subid:
            raise AssertionError(f"click {n} was not answered with a redirect")
        subids.append(subid)
    campaigns = [first.id, second.id]
    wait_for(lambda: len(landed(db, campaigns)) >= len(subids), LAND_SECONDS, "the clicks to land")
    return Setup(campaigns, offers, subids)


def wait_for(predicate: Callable[[], Any], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.05)


def _fresh(db, read: Callable[[], Any]) -> Any:
    """`read()`, once more on a new connection if an outage cut this process's."""
    from models.store.database import STORE_ERRORS

    try:
        return read()
    except STORE_ERRORS:
        db.close()
        return read()


def landed(db, campaigns: list[int]) -> list[str]:
    sql = SQL_CAMPAIGN_CLICKS.format(", ".join(str(int(c)) for c in campaigns))
    return _fresh(db, lambda: [row[0] for row in db.execute_sql(sql).fetchall()])


def parked(db) -> set[str]:
    """The subids of the postbacks still parked."""
    return _fresh(db, lambda: {row[0] for row in db.execute_sql(SQL_PARKED_SUBIDS).fetchall()})


def settled(db) -> list[tuple[str, str, str, str, int | None]]:
    """The postback log's parked postbacks matched since: (subid, tid, word, verdict, conversion id)."""
    rows = _fresh(db, lambda: db.execute_sql(SQL_POSTBACK_LOG).fetchall())
    return [tuple(row[:5]) for row in rows if SETTLED_DETAIL.search(row[5] or "")]


def read_outcome(db) -> tuple[list[ConversionRow], dict[str, list[dict[str, Any]]]]:
    """The conversion rows and the all-time reports by campaign and by offer (from the rollups, and from the
    raw rows as `campaign:raw`, `offer:raw`), as the checker takes them."""
    from models.reporting.reports import ReportQuery, run_report

    def read() -> tuple[list[ConversionRow], dict[str, list[dict[str, Any]]]]:
        rows = [ConversionRow(*row) for row in db.execute_sql(SQL_CONVERSIONS).fetchall()]
        reports = {
            f"{group}{suffix}": run_report(db, ReportQuery(group_by=(group,), source=source)).rows
            for group in ("campaign", "offer")
            for suffix, source in (("", "auto"), (":raw", "raw"))
        }
        return rows, reports

    return _fresh(db, read)


class Replay:
    """Sends a plan from `threads` client threads over `ports`, recording every send as an Operation."""

    def __init__(
        self, ports: list[int], key: str, *, threads: int = 8, give_up_seconds: float = GIVE_UP_SECONDS
    ):
        self.ports, self.key, self.threads = ports, key, threads
        self.give_up_seconds = give_up_seconds
        self.history: list[Operation] = []
        self.lock = threading.Lock()
        self.try_again = 0
        self._next_index = 0
        self.gate: Callable[[Operation], None] | None = None  # Called before each planned operation.

    @property
    def sent(self) -> int:
        with self.lock:
            return len(self.history)

    def run(self, plan: list[Operation]) -> list[Operation]:
        pending = iter(plan)
        self._next_index = len(plan)

        def client() -> None:
            while True:
                with self.lock:
                    op = next(pending, None)
                if op is None:
                    return
                if self.gate is not None:
                    self.gate(op)
                self._send_until_answered(op)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(self.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sorted(self.history, key=lambda op: op.sent_at)

    def _send_until_answered(self, op: Operation) -> None:
        deadline = time.monotonic() + self.give_up_seconds
        pause = 0.05
        while True:
            self._send(op)
            if not op.is_try_again or time.monotonic() > deadline:
                return
            time.sleep(pause)  # A network's back-off before it retries.
            pause = min(pause * 2, 1.0)
            with self.lock:
                index, self._next_index = self._next_index, self._next_index + 1
            op = op.again(index)

    def _send(self, op: Operation) -> None:
        op.node = op.index % len(self.ports)
        port = self.ports[op.node]
        query = urlencode(op.params())
        op.sent_at = time.monotonic()
        if op.method == "POST":
            op.code, op.body = http_request(port, "POST", f"/{self.key}/postback", query.encode())
        else:
            op.code, op.body = http_request(port, "GET", f"/{self.key}/postback?{query}")
        op.answered_at = time.monotonic()
        with self.lock:
            self.history.append(op)
            self.try_again += op.is_try_again


@dataclass
class Outage:
    """Stop `server` (PostgresServer or RedisServer: pause/resume) once `after` postbacks were sent, and
    start it again once `answers` of them were told to try again or `during` more were answered (a
    server the postbacks do not need), or after `seconds` at most."""

    server: Any
    after: int
    answers: int = 8
    during: int = 200
    seconds: float = 20.0
    timeline: list[tuple[str, float]] = field(default_factory=list)
    thread: threading.Thread | None = None
    error: BaseException | None = None
    stopped: threading.Event = field(default_factory=threading.Event)

    def start(self, replay: Replay) -> None:
        replay.gate = self.gate
        self.thread = threading.Thread(target=self._run, args=(replay,), daemon=True)
        self.thread.start()

    def gate(self, op: Operation) -> None:
        """Hold the operations planned well after `after` until the server is down: on a fast box the
        rest of a short history would otherwise be answered before `pg_ctl stop` returns."""
        if op.index >= self.after + 16:
            self.stopped.wait(GIVE_UP_SECONDS)

    def _run(self, replay: Replay) -> None:
        try:
            wait_for(lambda: replay.sent >= self.after, GIVE_UP_SECONDS, f"{self.after} postbacks sent")
            self.server.pause()
            self.timeline.append(("stopped", time.monotonic()))
            self.stopped.set()
            before, sent = replay.try_again, replay.sent
            deadline = time.monotonic() + self.seconds
            while (
                replay.try_again - before < self.answers
                and replay.sent - sent < self.during
                and time.monotonic() < deadline
            ):
                time.sleep(0.02)
        except BaseException as exc:
            self.error = exc
        finally:
            self.stopped.set()  # Also when it failed: the history goes on.
            self.server.resume()
            self.timeline.append(("started", time.monotonic()))

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error


@dataclass
class HistoryResult:
    """One history replayed and checked."""

    label: str
    history: list[Operation]
    anomalies: list[Anomaly]
    seconds: float
    stats: dict[str, Any]

    def to_json(self, *, operations: bool = False) -> dict[str, Any]:
        data = {"label": self.label, "seconds": round(self.seconds, 2), **self.stats}
        data["anomaly_list"] = [anomaly.to_json() for anomaly in self.anomalies]
        if operations:
            data["history"] = [op.to_json() for op in self.history]
        return data


def run_history(
    db,
    ports: list[int],
    key: str,
    *,
    operations: int,
    clicks: int = 40,
    late_clicks: int = 8,
    seed: int = 0,
    threads: int = 8,
    outage: Outage | None = None,
    prefix: str = "hist",
    label: str = "",
) -> HistoryResult:
    """Prepare, generate, replay (with `outage`, if any), read back and check one history."""
    setup = prepare_history(db, ports, clicks, prefix=prefix)
    # Clicked just now: the first postbacks for them may come before their node's flusher lands them.
    late = [click_subid(ports[n % len(ports)], f"{prefix}-one", clicks + n + 1) for n in range(late_clicks)]
    plan = generate_history(setup.subids + late, operations, seed=seed, late=late)
    replay = Replay(ports, key, threads=threads)
    started = time.monotonic()
    if outage is not None:
        outage.start(replay)
    history = replay.run(plan)
    if outage is not None:
        outage.join()
    seconds = time.monotonic() - started
    subids = set(setup.subids + late)
    wait_for(lambda: subids <= set(landed(db, setup.campaigns)), LAND_SECONDS, "the late clicks to land")
    try:  # One never matched is the checker's to report, with its operations.
        wait_for(lambda: not parked(db) & subids, LAND_SECONDS, "the parked postbacks to be matched")
    except TimeoutError:
        pass
    rows, reports = read_outcome(db)
    mine = set(setup.campaigns)
    rows = [row for row in rows if row.campaign_id in mine]
    reports = {
        group: [
            row
            for row in report
            if (row["campaign"] in mine if group.startswith("campaign") else row["offer"] in setup.offers)
        ]
        for group, report in reports.items()
    }
    anomalies = check_history(history, rows, reports, clicks=subids, settled=settled(db))
    stats = summarise(history, anomalies)
    stats["parked_then_matched"] = sum(op.verdict == "parked" and op.subid in subids for op in history)
    return HistoryResult(label, history, anomalies, seconds, stats)


# -- the bench ------------------------------------------------------------------------------------


@dataclass
class HistoriesReport:
    operations: int
    nodes: int
    fault: str
    results: list[HistoryResult]

    @property
    def anomalies(self) -> int:
        return sum(len(result.anomalies) for result in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "operations_per_history": self.operations,
            "nodes": self.nodes,
            "fault": self.fault,
            "histories_checked": len(self.results),
            "operations": sum(result.stats["operations"] for result in self.results),
            "anomalies": self.anomalies,
            "histories": [result.to_json() for result in self.results],
        }


def format_histories(report: HistoriesReport) -> list[str]:
    """One table row per history, a total line, and each anomaly under it."""
    from workers.bench.harness import _aligned

    header = ["history", "operations", "retries", "try again", "parked, matched", "seconds", "anomalies"]
    rows = [
        [
            r.label,
            str(r.stats["operations"]),
            str(r.stats["retries"]),
            str(r.stats["try_again"]),
            str(r.stats.get("parked_then_matched", 0)),
            f"{r.seconds:.1f}",
            str(len(r.anomalies)),
        ]
        for r in report.results
    ]
    lines = list(_aligned(header, rows))
    total = sum(r.stats["operations"] for r in report.results)
    lines.append(f"{len(report.results)} histories checked, {total} operations, {report.anomalies} anomalies")
    for result in report.results:
        for anomaly in result.anomalies[:20]:
            lines.append(
                f"  {result.label}: {anomaly.kind}: {anomaly.detail} (operations {anomaly.operations[:10]})"
            )
    return lines


def run_histories(
    work_dir: Path,
    *,
    operations: int,
    nodes: int,
    fault: str,
    histories: int = 1,
    seed: int = 0,
    threads: int = 8,
    reporter=None,
) -> HistoriesReport:
    """`histories` histories of `operations` postbacks each, against fresh processes in `work_dir`: one
    box on SQLite (one node, no fault), else `nodes` nodes on a throwaway PostgreSQL and Redis, `fault`
    (postgres, redis) stopped and started again in the middle of each history."""
    from models.conversions.postbacks import read_secret
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from settings import load_settings
    from workers.bench.harness import BenchError, Reporter, lanner_env, run_lanner

    reporter = reporter or Reporter()
    if fault not in FAULTS:
        raise BenchError(f"--fault is one of {', '.join(FAULTS)}.")
    results = []
    with ExitStack() as stack:
        postgres = redis = None
        envs = [lanner_env(work_dir / f"node-{n}") for n in range(nodes)]
        if nodes > 1 or fault != "none":
            from workers.bench.servers import start_both

            reporter.message("Starting PostgreSQL and Redis ...")
            postgres, redis = start_both(stack)
            url = postgres.url(postgres.create_database())
            for n, env in enumerate(envs):
                env.update(LANNER_DATABASE_URL=url, LANNER_REDIS_URL=redis.url(), LANNER_NODE_ID=f"node-{n}")
        run_lanner(envs[0], "db", "migrate")
        settings = load_settings(envs[0])
        location = settings.database_location if settings.uses_postgres else settings.database_path
        open_database(location, autocheckpoint=True)
        stack.callback(db.close)
        migrate(db)
        reporter.message(f"Starting {nodes} node(s) ...")
        ports = [
            stack.enter_context(NodeProcesses(env, work_dir / f"node-{n}")) for n, env in enumerate(envs)
        ]
        key = read_secret(db, "postback_key")
        for n in range(histories):
            label = f"{nodes} node{'s' if nodes > 1 else ''}, {fault}, #{n + 1}"
            reporter.message(f"History {label}: {operations} postbacks ...")
            server = {"postgres": postgres, "redis": redis}.get(fault)
            outage = Outage(server, after=operations // 3) if server is not None else None
            result = run_history(
                db,
                ports,
                key,
                operations=operations,
                seed=seed + n,
                threads=threads,
                outage=outage,
                prefix=f"h{n}",
                label=label,
            )
            results.append(result)
    return HistoriesReport(operations, nodes, fault, results)


class NodeProcesses:
    """`lanner serve` (port 0, read back from its log) and `lanner worker` for one node, in a `with`."""

    def __init__(self, env: dict[str, str], directory: Path) -> None:
        self.env, self.directory = env, directory
        self.processes: list[Any] = []

    def __enter__(self) -> int:
        import re

        from workers.bench.harness import HEALTH_DEADLINE, LANNER, BenchError, ManagedProcess, wait_http

        self.directory.mkdir(parents=True, exist_ok=True)
        env = {**self.env, "LANNER_LOG_LEVEL": "INFO", "LANNER_WORKER_NICE": "0"}
        worker = ManagedProcess("lanner worker", [*LANNER, "worker"], self.directory / "worker.log", env)
        self.processes.append(worker)
        args = [*LANNER, "serve", "--workers", "2", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0"]
        serve = ManagedProcess("lanner serve", args, self.directory / "serve.log", env)
        self.processes.append(serve)
        pattern = re.compile(r"web: listening on 127\.0\.0\.1:(\d+) ")
        deadline = time.monotonic() + HEALTH_DEADLINE
        while not (found := pattern.search(serve.log_path.read_text(errors="replace"))):
            if not serve.is_running() or time.monotonic() > deadline:
                self.__exit__()
                raise BenchError(f"lanner serve did not start:\n{serve.log_tail()}")
            time.sleep(0.05)
        port = int(found.group(1))
        wait_http(serve, port, "/healthz", 200, HEALTH_DEADLINE)
        return port

    def __exit__(self, *exc_info: Any) -> None:
        for process in reversed(self.processes):
            process.stop()
