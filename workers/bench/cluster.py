"""`lanner bench unique|rotation --cluster`: N nodes (two by default) on PostgreSQL and Redis behind
nginx, beside the SQLite single box, with the same k6 ladder in the same run (issues 15 and 33,
docs/SCALING.md).

The run builds, in a temporary directory:

- **the single box**: a fresh SQLite data dir, prefilled with `lanner generate clicks`, with the
  scenario's campaigns (prepare_database, as `lanner bench clicks`), served by `lanner serve` and
  `lanner worker` on 127.0.0.1, behind nginx as deployed (`lanner nginx site`, its one upstream;
  ClusterOptions.is_single_nginx, `--single-without-nginx` for k6 straight to its web workers);
- **the cluster**: a throwaway PostgreSQL (fsync, synchronous_commit and full_page_writes ON:
  durability is part of what is measured) and Redis (no persistence) from Debian's binaries on
  unix sockets (workers/bench/servers.py, as an unprivileged user when root), migrated, then
  `lanner db copy` of the single box's database made just before: both sides start from the same
  clicks and the same campaigns (same ids). N node trees (`lanner serve` with --web-workers each +
  `lanner worker`, each with its own data dir, spool and LANNER_NODE_ID) and nginx (`lanner nginx
  site` with one upstream over all of them, trusting 127.0.0.1's X-Real-IP, where k6 puts the
  visitor's address).

Before the ladder, the **idle step** (workers/bench/idlecost.py): both sides with no traffic for
ClusterOptions.idle_seconds, CPU a second of every kind of process, so that the fixed cost (what wakes
up on a timer) is visible apart from the clicks' own.

Each rate runs on the single box, then on the cluster (interleaved: a load change on the shared box
hits both sides of a ratio alike). After each step the bench waits for the spool(s) to drain and
looks every subid k6 got in a 302 up in that side's database: lost, duplicated. For `rotation`,
the capped offers' clicks are counted: never over the cap, and exactly the cap where the offer was
full (its stream went on taking clicks, CAP_FULL_AFTER of them, after the offer's last).

Per cluster step: CPU per accepted click and peak RSS/PSS of the nodes' web workers and flushers, of
PostgreSQL (the postmaster and every backend), of Redis and of nginx, from /proc; k6's CPU; the cores
other processes of the box took meanwhile; nginx's upstream errors from its log.

With `overload` (ClusterOptions), two more cluster steps after the ladder: the **capacity** step,
offered twice what the projection says this box carries (workers/bench/projection.py), and
the **overload** step at twice the best rate the cluster accepted, where nginx must answer no 502/503
for want of a live upstream: latency rises instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.bench.harness import (
    HEALTH_DEADLINE,
    NGINX,
    SCENARIOS,
    TABLE_COLUMNS,
    BenchError,
    BenchOptions,
    LannerStack,
    ManagedProcess,
    Reporter,
    StepResult,
    _aligned,
    _cell,
    apply_k6_summary,
    bench_settings,
    connect_read_only,
    free_port,
    host_cpu_ticks,
    is_postgres,
    k6_binary,
    lanner_env,
    prepare_database,
    process_cpu_seconds,
    ratio,
    read_subids,
    reconcile_subids,
    run_k6_step,
    run_lanner,
    run_work_dir,
    signals_deferred,
    sigterm_as_interrupt,
    tree_memory_mb,
    vus_for_rate,
    wait_http,
)
from workers.bench.idlecost import (
    IDLE_KINDS,
    Unit,
    idle_us_per_click,
    measure_idle,
    serve_units,
    tree_units,
    worker_units,
)
from workers.runtime.procfs import pss_kb

CLUSTER_SCENARIOS = ("unique", "rotation")
NODES = 2
# The capacity step offers this many times the projection: it must saturate, and a click's CPU falls
# as the rate rises (the first run after issue 33's design offered 1.25x, 1,250/s, and was not
# saturated: 1,231/s accepted at p99 102 ms, 1,734/s in the overload step). Its VUs (rate / 5) bound
# the queue, so over-offering raises latency, not timeouts.
CAPACITY_OFFER = 2.0
OVERLOAD_FACTOR = 2  # The overload step: this many times the best rate the cluster accepted.
# The overload step's k6 may keep this many seconds of its offer in flight (the ladder's rate / 5
# would drop most iterations at k6 once latency passes 200 ms, so twice the capacity would never
# reach nginx): up to 2 s a request, nginx's proxy_next_upstream_timeout, all allocated up front.
OVERLOAD_VU_SECONDS = 2
RATE_ROUNDING = 50
# nginx's error log, per step: what it said about its upstreams (counted, not parsed further).
NGINX_UPSTREAM_ERRORS = {
    "no_live_upstreams": "no live upstreams",
    "timed_out": "upstream timed out",
    "connect_failed": "connect() failed",
    "closed": "upstream prematurely closed",
}
# Both sides start from this many clicks: generated into SQLite (~5,000/s here), then `lanner db
# copy` into PostgreSQL (~20-30 k rows/s, 2.2 rows a click). The suite's 3.2 M would take ~25 min.
CLUSTER_PREFILL = 250_000
QUICK_CLUSTER_PREFILL = 20_000
PG_SHARED_BUFFERS = "128MB"  # Debian's default.
# A capped offer whose stream went on taking this many clicks after the offer's last one, none of
# them its own, was full: at the bench's shares (70 %, a third) that many misses by chance is
# 0.3^50 or (2/3)^50, nil.
CAP_FULL_AFTER = 50
# The idle step: both sides with no traffic for this long, before the ladder (a whole minute, so that
# the minute's periodic tasks are in it once).
IDLE_SECONDS = 60
QUICK_IDLE_SECONDS = 5

SQL_ROUTES_SQLITE = "SELECT stream_id, offer_id, count(*) FROM click WHERE campaign_id = ? GROUP BY 1, 2"
SQL_ROUTES_POSTGRES = "SELECT stream_id, offer_id, count(*) FROM click WHERE campaign_id = %s GROUP BY 1, 2"
SQL_AFTER_LAST_SQLITE = (
    "SELECT count(*) FROM click WHERE campaign_id = ? AND stream_id = ? "
    "AND created_at > (SELECT max(created_at) FROM click WHERE offer_id = ?)"
)
SQL_AFTER_LAST_POSTGRES = SQL_AFTER_LAST_SQLITE.replace("?", "%s")


# -- what a component costs ------------------------------------------------------------------


class ComponentMeter:
    """CPU seconds and peak memory of named groups of process trees over one step."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self.cpu_before = {name: self._cpu(pids) for name, pids in groups.items()}
        self.rss = {name: 0.0 for name in groups}
        self.pss = {name: 0.0 for name in groups}
        self.sample()

    @staticmethod
    def _cpu(pids: list[int]) -> float:
        return sum(process_cpu_seconds(pid) for pid in pids)

    def sample(self) -> None:
        for name, pids in self.groups.items():
            self.rss[name] = max(self.rss[name], tree_memory_mb(pids))
            self.pss[name] = max(self.pss[name], tree_memory_mb(pids, pss_kb))

    def finish(self, accepted: int, names: Iterable[str] | None = None) -> dict[str, dict]:
        """Per group (`names`, or all): CPU µs per accepted click since the start, peak RSS and PSS (MB)."""
        rows = {}
        for name in self.groups if names is None else names:
            cpu = self._cpu(self.groups[name]) - self.cpu_before[name]
            rows[name] = {
                "cpu_us_per_click": round(cpu * 1e6 / accepted, 1) if accepted else None,
                "cpu_seconds": round(cpu, 2),
                "peak_rss_mb": self.rss[name],
                "peak_pss_mb": self.pss[name],
            }
        return rows


# -- the cluster -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterOptions:
    nodes: int = NODES
    web_workers: int | None = None  # A node's; None: BenchOptions.workers split over the nodes.
    is_overload: bool = False  # The capacity and overload steps after the ladder.
    capacity_rate: int | None = None  # The capacity step's offer; None: from the projection.
    # The single box behind nginx too (`lanner nginx site`, its one upstream), as deployed: a like-for-
    # like comparison. False: the single box on 127.0.0.1 without nginx (the bench before issue 33's
    # idle work); the ratios without nginx on either side are reported both ways.
    is_single_nginx: bool = True
    idle_seconds: int = IDLE_SECONDS  # The idle step before the ladder; 0: none.

    def node_names(self) -> list[str]:
        return [f"node-{number}" for number in range(1, self.nodes + 1)]

    def workers_per_node(self, total: int) -> int:
        return self.web_workers or max(1, total // self.nodes)


NGINX_DIRECTIVES = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")


class Cluster:
    """PostgreSQL, Redis, N node trees and nginx over them, for the length of a `with`."""

    def __init__(
        self,
        options: BenchOptions,
        work_dir: Path,
        sqlite_dir: Path,
        reporter: Reporter,
        shape: ClusterOptions | None = None,
    ) -> None:
        self.options = options
        self.shape = shape or ClusterOptions()
        self.work_dir = work_dir
        self.sqlite_dir = sqlite_dir
        self.reporter = reporter
        self.postgres = self.redis = self.nginx = None
        self.nodes: list[LannerStack] = []
        self.database_url = ""
        self.port = 0
        self.copy_seconds = 0.0
        self.copy_output: list[str] = []
        self._stack = ExitStack()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{SCENARIOS[self.options.scenario].alias}"

    def __enter__(self) -> Cluster:
        try:
            self.start_servers()
            self.copy_database()
            self.reporter.message(f"Starting {self.shape.nodes} nodes and nginx in front of them ...")
            self.start_nodes()
            self.start_nginx()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        with signals_deferred():
            self._stack.close()

    def start_servers(self) -> None:
        from workers.bench.servers import PostgresServer, RedisServer, ServerMissing

        self.reporter.message("Starting PostgreSQL (fsync on) and Redis ...")
        try:
            postgres = PostgresServer(fsync=True, shared_buffers=PG_SHARED_BUFFERS)
            redis = RedisServer()
        except ServerMissing as exc:
            raise BenchError(str(exc)) from None
        self._stack.callback(postgres.stop)  # Also removes what a failed start left.
        self.postgres = postgres.start()
        self._stack.callback(redis.stop)
        self.redis = redis.start()
        self.database_url = postgres.url(postgres.create_database())

    def node_env(self, name: str) -> dict[str, str]:
        data_dir = self.work_dir / name / "var"
        env = lanner_env(data_dir)
        env.update(
            LANNER_DATABASE_URL=self.database_url,
            LANNER_REDIS_URL=self.redis.url(),
            LANNER_NODE_ID=name,
        )
        return env

    def copy_database(self) -> None:
        """Migrate PostgreSQL, then copy the single box's database into it (clicks and campaigns)."""
        # A copy needs a source with no deferred step left (a fresh database's rollup backfill).
        run_lanner(lanner_env(self.sqlite_dir), "db", "run-deferred", timeout=3600)
        env = self.node_env(self.shape.node_names()[0])
        run_lanner(env, "db", "migrate")
        self.reporter.message("Copying the SQLite database into PostgreSQL (`lanner db copy`) ...")
        started = time.monotonic()
        output = run_lanner(
            env, "db", "copy", f"sqlite:///{self.sqlite_dir / 'lanner.db'}", self.database_url, timeout=3600
        )
        self.copy_seconds = round(time.monotonic() - started, 1)
        self.copy_output = output.strip().splitlines()[-1:] if output.strip() else []

    def start_nodes(self) -> None:
        per_node = self.shape.workers_per_node(self.options.workers)
        for name in self.shape.node_names():
            env = self.node_env(name)
            data_dir = Path(env["LANNER_DATA_DIR"])
            data_dir.mkdir(parents=True)
            # Each node keeps its own files: the country database the single box built (none when
            # LANNER_GEO_DATABASE names one).
            if (self.sqlite_dir / "geo").exists():
                shutil.copytree(self.sqlite_dir / "geo", data_dir / "geo")
            node = LannerStack(env, data_dir.parent, per_node, SCENARIOS[self.options.scenario].alias)
            self._stack.callback(node.stop)
            node.start()
            self.nodes.append(node)
        for node in self.nodes:
            node.wait_ready()

    def start_nginx(self) -> None:
        """`lanner nginx site` with one upstream a node and `lanner nginx main`, in the foreground."""
        self.nginx, self.port = start_front(
            self.work_dir / "nginx", self.nodes, self.node_env(self.shape.node_names()[0]), self._stack
        )

    def idle_units(self) -> list[Unit]:
        """What the idle step reads: every node's web workers (admin worker apart), flusher and
        consumer threads; PostgreSQL, Redis, nginx."""
        units = [unit for node in self.nodes for unit in stack_units(node)]
        units += tree_units("postgresql", self.postgres.pid)
        units += tree_units("redis", self.redis.process.pid)
        return units + tree_units("nginx", self.nginx.pid)

    def check_alive(self) -> None:
        for node in self.nodes:
            node.check_alive()
        if not self.nginx.is_running():
            raise BenchError(f"nginx exited with {self.nginx.process.returncode}:\n{self.nginx.log_tail()}")
        if self.redis.process.poll() is not None:
            raise BenchError(f"redis-server exited:\n{self.redis.log()}")
        if self.postgres.pid is None:
            raise BenchError(f"PostgreSQL stopped:\n{self.postgres.log()[-3000:]}")

    def groups(self) -> dict[str, list[int]]:
        return {
            "serve": [node.serve.pid for node in self.nodes],
            "flusher": [node.worker.pid for node in self.nodes],
            "postgresql": [self.postgres.pid],
            "redis": [self.redis.process.pid],
            "nginx": [self.nginx.pid],
        }

    @property
    def nginx_error_log(self) -> Path:
        return self.work_dir / "nginx" / "error.log"

    def nginx_log_size(self) -> int:
        try:
            return self.nginx_error_log.stat().st_size
        except FileNotFoundError:
            return 0

    def nginx_errors_since(self, offset: int) -> dict[str, int]:
        """What nginx's error log said about its upstreams after `offset`, counted by kind."""
        try:
            with self.nginx_error_log.open("rb") as file:
                file.seek(offset)
                text = file.read().decode(errors="replace")
        except FileNotFoundError:
            text = ""
        return {kind: text.count(words) for kind, words in NGINX_UPSTREAM_ERRORS.items()}

    def wait_drained(self) -> float:
        """Every spool landed; the longest of the catch-ups."""
        since = time.monotonic()
        for node in self.nodes:
            node.wait_drained(self.database_url, Path(node.env["LANNER_DATA_DIR"]) / "spool")
        return time.monotonic() - since


def start_front(prefix: Path, stacks: list[LannerStack], env: dict[str, str], exits: ExitStack):
    """nginx in front of `stacks`, as deployed: `lanner nginx site` with one upstream (and admin
    upstream) a stack, trusting 127.0.0.1's X-Real-IP (where k6 puts the visitor's address), and
    `lanner nginx main`, in the foreground; stopped by `exits`. Returns it and its port."""
    if not Path(NGINX).exists():
        raise BenchError(f"{NGINX} is missing: the cluster is measured through nginx.")
    (prefix / "temp").mkdir(parents=True)
    port = free_port()
    site_args = ["nginx", "site", "--listen", f"127.0.0.1:{port}", "-o", str(prefix / "site.conf")]
    site_args += ["--trusted-proxy", "127.0.0.1/32", "--real-ip-header", "X-Real-IP"]
    for stack in stacks:
        site_args += ["--upstream", f"127.0.0.1:{stack.port}"]
        site_args += ["--admin-upstream", f"127.0.0.1:{stack.admin_port}"]
    run_lanner(env, *site_args)
    run_lanner(
        env,
        "nginx",
        "main",
        "--sites",
        str(prefix / "site.conf"),
        "--pid",
        str(prefix / "nginx.pid"),
        "--error-log",
        str(prefix / "error.log"),
        "--temp-dir",
        str(prefix / "temp"),
        "-o",
        str(prefix / "nginx.conf"),
    )
    args = [NGINX, "-c", str(prefix / "nginx.conf"), "-p", str(prefix), "-g", NGINX_DIRECTIVES]
    nginx = ManagedProcess("nginx", args, prefix / "run.log", {"PATH": os.environ.get("PATH", "")})
    exits.callback(nginx.stop, signal.SIGTERM, 10)
    wait_http(nginx, port, "/healthz", 200, HEALTH_DEADLINE)
    return nginx, port


def stack_units(stack: LannerStack) -> list[Unit]:
    """One node's (or the single box's) `lanner serve` and `lanner worker`, for the idle step."""
    return serve_units(stack.serve.pid) + worker_units(stack.worker.pid)


# -- one step on each side --------------------------------------------------------------------


def measure_rate(
    target: str,
    url: str,
    rate: int,
    options: BenchOptions,
    work_dir: Path,
    k6: str,
    groups: dict[str, list[int]],
    reporter: Reporter,
    vus: int | None = None,
) -> tuple[StepResult, list[str], ComponentMeter]:
    """One step of k6 against `url`, with each group's CPU and memory; the subids of its 302s. With
    `vus`, that many VUs, all allocated before the step: allocating them as the queue grows lags on
    a saturated box, and k6 drops what it has no VU for."""
    pre_vus, max_vus = (vus, vus) if vus else vus_for_rate(rate, options.max_vus)
    result = StepResult(target, rate, options.step_seconds, pre_vus, max_vus)
    reporter.step_started(target, rate, options.step_seconds)
    meter = ComponentMeter(groups)
    host_before = host_cpu_ticks()

    def tick(elapsed: float) -> None:
        reporter.step_tick(elapsed)
        meter.sample()

    scenario = SCENARIOS[options.scenario]
    run = run_k6_step(
        k6,
        url,
        rate,
        options.step_seconds,
        work_dir,
        f"{target}-{rate}",
        pre_vus=pre_vus,
        max_vus=max_vus,
        repeat_percent=scenario.repeat_percent,
        mode=scenario.mode,
        on_tick=tick,
    )
    host_after = host_cpu_ticks()
    apply_k6_summary(result, run)
    busy, total = host_after[0] - host_before[0], host_after[1] - host_before[1]
    result.host_cpu_percent = round(100 * busy / total, 1) if total else None
    result.components = components = meter.finish(result.accepted)
    components["k6"] = {
        "cpu_us_per_click": round(run.cpu_seconds * 1e6 / result.accepted, 1) if result.accepted else None,
        "cpu_seconds": round(run.cpu_seconds, 2),
    }
    if total and run.wall_seconds:
        cpus = os.cpu_count() or 1
        ours = sum(part["cpu_seconds"] for part in components.values()) / run.wall_seconds
        result.other_cores = round(max(cpus * busy / total - ours, 0.0), 2)
    result.server_cpu_us_per_click = components["serve"]["cpu_us_per_click"]
    result.peak_rss_mb = round(sum(components[name]["peak_rss_mb"] for name in ("serve", "flusher")), 1)
    result.peak_pss_mb = round(sum(components[name]["peak_pss_mb"] for name in ("serve", "flusher")), 1)
    return result, read_subids(run.log_path)[0], meter


LANDING_GROUPS = ("flusher", "postgresql")  # Their work on a step's clicks goes on until the drain.


def finish_step(result: StepResult, subids: list[str], database: Path | str, meter: ComponentMeter) -> None:
    """After the drain: the landing side's CPU per click (the flushers', PostgreSQL's) with the step's
    tail landed, lost, duplicated."""
    names = [name for name in LANDING_GROUPS if name in meter.groups]
    result.components.update(meter.finish(result.accepted, names))
    result.flusher_cpu_us_per_click = result.components["flusher"]["cpu_us_per_click"]
    result.logged = len(subids)
    result.lost, result.duplicated = reconcile_subids(database, subids)


# -- caps ------------------------------------------------------------------------------------


def capped_offers(env: dict[str, str]) -> list[dict]:
    """The bench's offers with a daily or total cap: id, name, cap."""
    offers = json.loads(run_lanner(env, "offer", "list", "--json"))
    rows = []
    for offer in offers:
        caps = [cap for cap in (offer.get("daily_cap"), offer.get("total_cap")) if cap]
        if caps and offer["name"].startswith("Bench "):
            rows.append({"offer_id": offer["id"], "name": offer["name"], "cap": min(caps)})
    return rows


@contextmanager
def click_reader(database: Path | str) -> Iterator[Callable[[str, str, tuple], list[tuple]]]:
    """A function running one of a (SQLite, PostgreSQL) pair of statements with its parameters."""
    if is_postgres(database):
        import psycopg

        with psycopg.connect(database, autocommit=True) as connection:
            yield lambda sqlite, postgres, params: connection.execute(postgres, params).fetchall()
        return
    connection = connect_read_only(database)
    try:
        yield lambda sqlite, postgres, params: connection.execute(sqlite, params).fetchall()
    finally:
        connection.close()


def check_caps(database: Path | str, campaign_id: int, offers: list[dict]) -> list[dict]:
    """Per capped offer: its clicks, its stream's, and whether that is exact: never over the cap, and
    the cap itself when the offer was full (its stream took CAP_FULL_AFTER clicks after its last).

    The counts are over the whole run: a daily cap's day must not end during it (the bench's
    campaigns use UTC; a run across midnight UTC reads as over)."""
    with click_reader(database) as read:
        routes = read(SQL_ROUTES_SQLITE, SQL_ROUTES_POSTGRES, (campaign_id,))
        rows = []
        for offer in offers:
            mine = [(count, stream) for stream, offer_id, count in routes if offer_id == offer["offer_id"]]
            clicks = sum(count for count, _ in mine)
            stream = max(mine)[1] if mine else None
            stream_clicks = sum(count for stream_id, _, count in routes if mine and stream_id == stream)
            after = 0
            if mine:
                params = (campaign_id, stream, offer["offer_id"])
                after = read(SQL_AFTER_LAST_SQLITE, SQL_AFTER_LAST_POSTGRES, params)[0][0]
            expected = offer["cap"] if after >= CAP_FULL_AFTER else None
            is_exact = clicks <= offer["cap"] and (expected is None or clicks == expected)
            rows.append(
                {
                    **offer,
                    "clicks": clicks,
                    "stream_clicks": stream_clicks,
                    "after_last": after,
                    "expected": expected,
                    "is_exact": is_exact,
                }
            )
    return rows


# -- the run ---------------------------------------------------------------------------------


@dataclass
class ClusterReport:
    settings: dict = field(default_factory=dict)
    sqlite: list[StepResult] = field(default_factory=list)
    cluster: list[StepResult] = field(default_factory=list)
    caps: dict[str, list[dict]] = field(default_factory=dict)  # "sqlite"/"cluster": check_caps rows.
    # After the ladder (ClusterOptions.is_overload): the cluster just past its projected capacity, then
    # at twice the best rate it accepted.
    capacity: StepResult | None = None
    overload: StepResult | None = None
    # The idle step (workers/bench/idlecost.py): per side, per kind of process, CPU ms a second.
    idle: dict | None = None
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    is_complete: bool = False

    def comparison(self) -> list[dict]:
        """Per rate, cluster / single box: accepted, p99, and the CPU per click of the whole stack:
        without nginx on either side, and with every process (nginx on both sides when the single box
        had it: like for like; the issue's measure). Where the single box had nginx, also every process
        of the cluster against the single box without its nginx (the bench's measure before). With the
        idle step: each side's fixed cost as µs a click at that rate, and the ratios net of it."""
        single = {step.rate: step for step in self.sqlite}
        rows = []
        for step in self.cluster:
            base = single.get(step.rate)
            if base is None:
                continue
            row = {
                "rate": step.rate,
                "accepted_ratio": ratio(step.accepted, base.accepted, 3),
                "p99_ratio": ratio(step.p99_ms, base.p99_ms, 2),
                "cpu_per_click_ratio": ratio(stack_cpu(step), stack_cpu(base), 2),
                "cpu_per_click_ratio_all": ratio(stack_cpu(step, nginx=True), stack_cpu(base, nginx=True), 2),
                "is_single_nginx": "nginx" in base.components,
            }
            if row["is_single_nginx"]:
                all_cpu = stack_cpu(step, nginx=True)
                row["cpu_per_click_ratio_all_vs_direct"] = ratio(all_cpu, stack_cpu(base), 2)
            if self.idle:
                kinds = {"no_nginx": [kind for kind in IDLE_KINDS if kind != "nginx"], "all": None}
                for name, chosen in kinds.items():
                    cluster_idle = idle_us_per_click(self.idle, "cluster", step.rate, chosen)
                    single_idle = idle_us_per_click(self.idle, "sqlite", step.rate, chosen)
                    row[f"idle_us_per_click_{name}"] = {"cluster": cluster_idle, "sqlite": single_idle}
                    nginx = name == "all"
                    cluster_cpu, single_cpu = stack_cpu(step, nginx=nginx), stack_cpu(base, nginx=nginx)
                    if None not in (cluster_cpu, single_cpu, cluster_idle, single_idle):
                        row[f"cpu_per_click_ratio_{name}_net_of_idle"] = ratio(
                            cluster_cpu - cluster_idle, single_cpu - single_idle, 2
                        )
            rows.append(row)
        return rows

    def cluster_steps(self) -> list[StepResult]:
        """The ladder's cluster steps and the capacity step: the best of them sets the overload's offer."""
        return self.cluster + ([self.capacity] if self.capacity else [])

    def projection(self) -> dict | None:
        """From every cluster step, the overload step's too: where the capacity step did not saturate
        (a click's CPU falls as the rate rises, so the projection from below capacity is short of it),
        the overload step is where the cluster accepted the most; where timeouts wasted its work, it
        accepted less and is not in the projection's basis."""
        from workers.bench.projection import project

        return project(self.cluster_steps() + ([self.overload] if self.overload else []), cpus=self.cpus)

    def overload_summary(self) -> dict | None:
        """The overload step against the best accepted rate: its offer, nginx's upstream errors (must
        be none for want of a live upstream), and latency instead."""
        if self.overload is None:
            return None
        best = max(self.cluster_steps(), key=lambda step: step.accepted_per_s)
        step = self.overload
        nginx = step.components.get("nginx", {}).get("log", {})
        no_upstream = nginx.get("no_live_upstreams", 0)
        return {
            "capacity_per_s": best.accepted_per_s,
            "capacity_at_rate": best.rate,
            "rate": step.rate,
            "accepted_per_s": step.accepted_per_s,
            "p99_ms": step.p99_ms,
            "capacity_p99_ms": best.p99_ms,
            "errors_by_code": step.errors_by_code,
            "nginx_log": nginx,
            "no_live_upstreams": no_upstream,
            "is_met": no_upstream == 0 and not any(step.errors_by_code.get(code) for code in ("502", "503")),
        }

    def to_json(self) -> dict:
        return {
            "settings": self.settings,
            "is_complete": self.is_complete,
            "sqlite": [asdict(step) for step in self.sqlite],
            "cluster": [asdict(step) for step in self.cluster],
            "capacity": asdict(self.capacity) if self.capacity else None,
            "overload": asdict(self.overload) if self.overload else None,
            "idle": self.idle,
            "caps": self.caps,
            "comparison": self.comparison(),
            "projection": self.projection(),
            "overload_summary": self.overload_summary(),
        }


def stack_cpu(step: StepResult, *, nginx: bool = False) -> float | None:
    """CPU µs per click of everything but k6 (and nginx, unless `nginx`): web workers, flushers,
    PostgreSQL, Redis."""
    names = ["serve", "flusher", *(name for name in ("postgresql", "redis") if name in step.components)]
    if nginx and "nginx" in step.components:
        names.append("nginx")
    parts = [step.components.get(name, {}).get("cpu_us_per_click") for name in names]
    if any(part is None for part in parts):
        return None
    return round(sum(parts), 1)


def capacity_offer(report: ClusterReport, shape: ClusterOptions) -> int:
    """The capacity step's offer: given, or CAPACITY_OFFER times what the projection says this box
    carries (times the ladder's top rate where there is no projection)."""
    if shape.capacity_rate:
        return shape.capacity_rate
    projection = report.projection()
    top = max(step.rate for step in report.cluster)
    expected = projection["box"]["projected_per_s"] if projection else top
    return _rounded(CAPACITY_OFFER * expected)


def _rounded(rate: float) -> int:
    return max(RATE_ROUNDING, round(rate / RATE_ROUNDING) * RATE_ROUNDING)


def run_cluster_bench(
    options: BenchOptions,
    report: ClusterReport,
    reporter: Reporter | None = None,
    shape: ClusterOptions | None = None,
) -> ClusterReport:
    """The single box and the cluster, rate by rate, filling `report` step by step; then, with
    `shape.is_overload`, the cluster's capacity and overload steps."""
    reporter = reporter or Reporter()
    shape = shape or ClusterOptions()
    if options.scenario not in CLUSTER_SCENARIOS:
        raise BenchError(f"--cluster runs {' and '.join(CLUSTER_SCENARIOS)}, not {options.scenario}.")
    if shape.nodes < 1:
        raise BenchError("--nodes must be at least 1.")
    k6 = k6_binary()
    alias = SCENARIOS[options.scenario].alias
    with (
        run_work_dir("lanner-cluster-bench-", options.keep_files, reporter) as work_dir,
        sigterm_as_interrupt(),
    ):
        sqlite_dir = work_dir / "sqlite" / "var"
        sqlite_dir.mkdir(parents=True)
        env = lanner_env(sqlite_dir)
        reporter.message(f"Working in {work_dir}.")
        clicks_before = prepare_database(
            env, sqlite_dir / "lanner.db", options.prefill, options.scenario, reporter
        )
        campaign_id = json.loads(run_lanner(env, "campaign", "show", alias, "--json"))["id"]
        offers = capped_offers(env) if options.scenario == "rotation" else []
        with ExitStack() as stacks:
            single = LannerStack(env, work_dir / "sqlite", options.workers, alias)
            stacks.callback(single.stop)
            single.start()  # Starts while the cluster is built.
            cluster = stacks.enter_context(Cluster(options, work_dir, sqlite_dir, reporter, shape))
            single.wait_ready()
            single_url = single.url
            single_groups = {"serve": [single.serve.pid], "flusher": [single.worker.pid]}
            single_units = stack_units(single)
            if shape.is_single_nginx:
                single_nginx, single_port = start_front(work_dir / "sqlite" / "nginx", [single], env, stacks)
                single_url = f"http://127.0.0.1:{single_port}/{alias}"
                single_groups["nginx"] = [single_nginx.pid]
                single_units += tree_units("nginx", single_nginx.pid)
            database = sqlite_dir / "lanner.db"
            single.wait_drained(database, sqlite_dir / "spool")
            cluster.wait_drained()
            report.settings = {
                **bench_settings(options, k6, sqlite_dir, work_dir, clicks_before),
                "cluster": {
                    "nodes": shape.node_names(),
                    "web_workers_per_node": cluster.nodes[0].workers,
                    "postgresql": "fsync, synchronous_commit and full_page_writes on; shared_buffers "
                    f"{PG_SHARED_BUFFERS}; unix socket",
                    "redis": "no persistence; unix socket",
                    "front": "nginx (`lanner nginx site`, one upstream over every node)",
                    "single_front": "nginx (`lanner nginx site`, its one upstream)"
                    if shape.is_single_nginx
                    else "none: k6 to the web workers on 127.0.0.1",
                    "idle_seconds": shape.idle_seconds,
                    "copy_seconds": cluster.copy_seconds,
                    "copy": cluster.copy_output,
                    "overload": shape.is_overload,
                },
                "cpus": report.cpus,
                "load_average_at_start": os.getloadavg(),
            }

            if shape.idle_seconds:
                reporter.message(f"Idle step: both sides with no traffic for {shape.idle_seconds} s ...")
                report.idle = measure_idle(
                    {"sqlite": single_units, "cluster": cluster.idle_units()},
                    shape.idle_seconds,
                    nodes={"sqlite": 1, "cluster": shape.nodes},
                )
                single.check_alive()
                cluster.check_alive()

            def cluster_step(rate: int, vus: int | None = None) -> StepResult:
                cluster.check_alive()
                log_offset = cluster.nginx_log_size()
                result, subids, meter = measure_rate(
                    "cluster", cluster.url, rate, options, work_dir, k6, cluster.groups(), reporter, vus
                )
                cluster.check_alive()
                result.components["nginx"]["log"] = cluster.nginx_errors_since(log_offset)
                result.catch_up_s = round(cluster.wait_drained(), 2)
                finish_step(result, subids, cluster.database_url, meter)
                reporter.step_finished(result)
                return result

            for rate in options.rates:
                result, subids, meter = measure_rate(
                    "sqlite", single_url, rate, options, work_dir, k6, single_groups, reporter
                )
                single.check_alive()
                result.catch_up_s = round(single.wait_drained(database, sqlite_dir / "spool"), 2)
                finish_step(result, subids, database, meter)
                report.sqlite.append(result)
                reporter.step_finished(result)
                report.cluster.append(cluster_step(rate))
            if shape.is_overload and report.cluster:
                offer = capacity_offer(report, shape)
                reporter.message(f"Capacity step: {offer}/s offered to the cluster ...")
                report.capacity = cluster_step(offer)
                best = max(report.cluster_steps(), key=lambda step: step.accepted_per_s)
                offer = max(1, round(OVERLOAD_FACTOR * best.accepted_per_s))
                reporter.message(f"Overload step: {offer}/s, {OVERLOAD_FACTOR}x the best accepted ...")
                report.overload = cluster_step(offer, OVERLOAD_VU_SECONDS * offer)
            if offers:
                report.caps = {
                    "sqlite": check_caps(database, campaign_id, offers),
                    "cluster": check_caps(cluster.database_url, campaign_id, offers),
                }
        report.settings["load_average_at_end"] = os.getloadavg()
        report.is_complete = True
    return report


# -- presentation ----------------------------------------------------------------------------

COMPONENT_COLUMNS = (
    ("rate", None),
    ("web µs", "serve"),
    ("flusher µs", "flusher"),
    ("postgresql µs", "postgresql"),
    ("redis µs", "redis"),
    ("nginx µs", "nginx"),
    ("k6 µs", "k6"),
)


def format_cluster_report(report: ClusterReport) -> list[str]:
    """The steps of both sides, the cluster's cost per component, the ratios, the projection, the
    overload step and the caps."""
    header = [title for title, _ in TABLE_COLUMNS]
    steps = [step for pair in zip(report.sqlite, report.cluster, strict=False) for step in pair]
    steps += report.sqlite[len(report.cluster) :]
    steps += [step for step in (report.capacity, report.overload) if step is not None]
    cells = [[_cell(getattr(step, key)) for _, key in TABLE_COLUMNS] for step in steps]
    lines = list(_aligned(header, cells))
    cluster_steps = report.cluster_steps() + ([report.overload] if report.overload else [])
    if cluster_steps:
        lines.append("")
        lines.append("cluster, per component: CPU µs per accepted click / peak PSS MB; cores others took")
        rows = []
        for step in cluster_steps:
            row = [str(step.rate)]
            for _, name in COMPONENT_COLUMNS[1:]:
                part = step.components.get(name, {})
                row.append(f"{_cell(part.get('cpu_us_per_click'))} / {_cell(part.get('peak_pss_mb'))}")
            row.append(_cell(step.other_cores))
            rows.append(row)
        lines.extend(_aligned([title for title, _ in COMPONENT_COLUMNS] + ["others' cores"], rows))
    if report.idle:
        lines.append("")
        lines.extend(format_idle(report))
    comparison = report.comparison()
    if comparison:
        lines.append("")
        single_nginx = any(row["is_single_nginx"] for row in comparison)
        header = ["rate", "accepted cluster/sqlite", "p99 cluster/sqlite", "cpu/click (no nginx)"]
        header += ["cpu/click (all, both behind nginx)" if single_nginx else "cpu/click (all)"]
        if single_nginx:
            header.append("cpu/click (all vs single without nginx)")
        if report.idle:
            header += ["idle µs/click cluster/sqlite", "no nginx, net of idle", "all, net of idle"]
        rows = []
        for row in comparison:
            cells = [str(row["rate"]), _cell(row["accepted_ratio"]), _cell(row["p99_ratio"])]
            cells += [_cell(row["cpu_per_click_ratio"]), _cell(row["cpu_per_click_ratio_all"])]
            if single_nginx:
                cells.append(_cell(row.get("cpu_per_click_ratio_all_vs_direct")))
            if report.idle:
                idle = row.get("idle_us_per_click_all") or {}
                cells.append(f"{_cell(idle.get('cluster'))} / {_cell(idle.get('sqlite'))}")
                cells.append(_cell(row.get("cpu_per_click_ratio_no_nginx_net_of_idle")))
                cells.append(_cell(row.get("cpu_per_click_ratio_all_net_of_idle")))
            rows.append(cells)
        lines.extend(_aligned(header, rows))
    projection = report.projection()
    if projection:
        lines.append("")
        lines.append("projection (workers/bench/projection.py):")
        lines.extend(f"  {line}" for line in projection["arithmetic"])
    overload = report.overload_summary()
    if overload:
        codes = ", ".join(f"{code}: {count}" for code, count in sorted(overload["errors_by_code"].items()))
        lines.append("")
        lines.append(
            f"overload: {overload['rate']}/s offered ({OVERLOAD_FACTOR}x the best accepted, "
            f"{overload['capacity_per_s']:,.1f}/s at {overload['capacity_at_rate']}/s): accepted "
            f"{overload['accepted_per_s']:,.1f}/s, p99 {overload['p99_ms']:,.0f} ms (at capacity "
            f"{overload['capacity_p99_ms']:,.0f} ms); 5xx by code: {codes or 'none'}; nginx 'no live "
            f"upstreams': {overload['no_live_upstreams']}{'' if overload['is_met'] else ' TARGET MISSED'}"
        )
    for side, rows in report.caps.items():
        for row in rows:
            expected = f", expected {row['expected']}" if row["expected"] is not None else ""
            lines.append(
                f"{side} cap {row['name']}: {row['clicks']} of {row['cap']} "
                f"(stream {row['stream_clicks']}, {row['after_last']} after its last{expected})"
                f"{'' if row['is_exact'] else ' NOT EXACT'}"
            )
    return lines


def format_idle(report: ClusterReport) -> list[str]:
    """The idle step: per kind of process, CPU ms a second on each side (and a node's share), and what
    that fixed cost is a click at each rate of the ladder."""
    idle = report.idle or {}
    nodes = idle["cluster"]["nodes"]
    rates = [step.rate for step in report.cluster]
    lines = [
        f"idle ({idle['seconds']:g} s, no traffic): CPU ms a second; cluster of {nodes} "
        "(a node's share); the cluster's fixed cost as µs a click at each rate"
    ]
    header = ["process", "sqlite ms/s", "cluster ms/s", "a node's ms/s"]
    header += [f"µs/click at {rate}/s" for rate in rates]
    rows = []
    for kind in [*IDLE_KINDS, None]:
        single = idle["sqlite"]["kinds"].get(kind, {}) if kind else {"ms_per_s": idle["sqlite"]["ms_per_s"]}
        cluster = idle["cluster"]["kinds"].get(kind) if kind else {"ms_per_s": idle["cluster"]["ms_per_s"]}
        if cluster is None and not single:
            continue
        cluster = cluster or {}
        row = [kind or "all", _cell(single.get("ms_per_s")), _cell(cluster.get("ms_per_s"))]
        row.append(_cell(cluster.get("ms_per_s_per_node", round(cluster.get("ms_per_s", 0) / nodes, 2))))
        row += [_cell(idle_us_per_click(idle, "cluster", rate, [kind] if kind else None)) for rate in rates]
        rows.append(row)
    return lines + list(_aligned(header, rows))
