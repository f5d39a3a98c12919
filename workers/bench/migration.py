"""`lanner bench migration`: the upgrade rehearsal of docs/PERFORMANCE.md, on a live database.

A pre-upgrade database is built once (kept as `pre-upgrade.db` in the data dir): the schema of the
release before the newest migration, millions of clicks over 30 days with about a million in the
last 24 hours, and the generator's NAT addresses carrying thousands of clicks each. Each run copies
it, applies the newest migration as `lanner db migrate` would (the synchronous step, timed), starts
the web workers and k6 at a constant rate, then starts `lanner worker` a few seconds into the load,
as an upgrade restarts it, so its deferred steps (backfill, index build) run under traffic. After
the load the spool drains, every subid of every 302 is looked up in the database, and the steps'
own start and finish times say how long each took and whether it ran inside the load.

The migration's last step (dropping the index it replaced) waits out a grace period by design and
is not part of the rehearsal. Both visitor indexes exist at the end, so the run also times the
uniqueness probe through each on the same visitors.
"""

from __future__ import annotations

import importlib
import random
import shutil
import sqlite3
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.bench.harness import (
    BENCH_ALIAS,
    BENCH_OFFER_URL,
    BenchError,
    BenchOptions,
    LannerStack,
    Reporter,
    StepResult,
    connect_read_only,
    k6_binary,
    lanner_env,
    measure_step,
    read_subids,
    reconcile_subids,
    run_lanner,
    run_work_dir,
    sigterm_as_interrupt,
)

PRISTINE = "pre-upgrade.db"
PRISTINE_MAX_AGE_HOURS = 1  # Older, its "last 24 h" has lost clicks to the past: rebuilt.
OLDER_DAYS = 29
WORKER_DELAY_SECONDS = 5.0  # The upgrade restarts `lanner worker` while traffic flows.
STEPS_DEADLINE_SECONDS = 1800.0
PROBE_SAMPLES = 300
SQL_STEPS = (
    "SELECT name, state, done_units, total_units, started_at, finished_at FROM deferred_step ORDER BY rowid"
)


@dataclass
class MigrationOptions:
    clicks: int = 3_900_000
    recent: int = 1_000_000  # Of them, in the last 24 hours.
    rate: int = 1000
    seconds: int = 180
    workers: int = 2
    data_dir: Path | None = None
    rebuild: bool = False
    keep_files: bool = False
    seed: int = 39


@dataclass
class MigrationReport:
    settings: dict = field(default_factory=dict)
    database: dict = field(default_factory=dict)  # What the upgrade met: clicks, recent, NAT addresses.
    migration: str = ""
    sync_step_s: float | None = None
    steps: list[dict] = field(default_factory=list)
    load: StepResult | None = None
    probes_us: dict = field(default_factory=dict)
    index_mb: dict = field(default_factory=dict)
    is_complete: bool = False

    def to_json(self) -> dict:
        data = asdict(self)
        data["load"] = asdict(self.load) if self.load else None
        return data


def rehearsed_migration() -> tuple[str, str]:
    """(the newest migration with deferred steps, the one before it): the rehearsal upgrades from the
    second, through it and any later ones (which have none: they are timed with it)."""
    from models.migrations.runner import migration_names

    names = migration_names()
    heavy = [
        name for name in names if getattr(importlib.import_module(f"models.migrations.{name}"), "STEPS", ())
    ]
    newest = heavy[-1]
    return newest, names[names.index(newest) - 1]


def build_pre_upgrade_database(path: Path, options: MigrationOptions, reporter: Reporter) -> None:
    """The database as the previous release leaves it, with older and last-24-hour traffic."""
    from models.migrations.deferred import run_deferred
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from workers.bench.generate import generate_clicks, insert_campaign

    _, previous = rehearsed_migration()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    open_database(path, autocheckpoint=True)
    try:
        migrate(db, up_to=previous)
        insert_campaign(db, "Bench", BENCH_ALIAS, BENCH_OFFER_URL)  # The services speak the new schema.
        now_ms = int(time.time() * 1000)
        older = options.clicks - options.recent
        for count, days, end_ms, what in (
            (older, OLDER_DAYS, now_ms - 86_400_000, "older clicks"),
            (options.recent, 1, now_ms, "clicks in the last 24 h"),
        ):
            done = [0]

            def progress(
                rows: int, total: int = count, label: str = f"Generating {what}", done: list[int] = done
            ) -> None:
                done[0] += rows
                reporter.progress(label, done[0], total)

            generate_clicks(db, count, days, seed=options.seed + days, end_ms=end_ms, on_progress=progress)
        run_deferred(db, pause=0)  # The previous release's own steps: done before its upgrade.
        db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def newest_click_age_hours(path: Path) -> float:
    """Hours since the database's newest click: the rehearsal's "last 24 h" share shrinks with it."""
    conn = connect_read_only(path)
    try:
        newest = conn.execute(  # One index probe per campaign instead of a scan.
            "SELECT MAX(created_at) FROM click INDEXED BY click_campaign_created_at "
            "WHERE campaign_id IN (SELECT id FROM campaign)"
        ).fetchone()[0]
    finally:
        conn.close()
    return (time.time() * 1000 - (newest or 0)) / 3_600_000


def describe_database(path: Path) -> dict:
    """What the upgrade meets: clicks, those of the last 24 hours, the busiest (NAT) addresses."""
    conn = connect_read_only(path)
    try:
        day_ago = int(time.time() * 1000) - 86_400_000
        busiest = conn.execute(
            "SELECT ip, COUNT(*) AS clicks, COUNT(DISTINCT ua_hash) FROM click INDEXED BY click_visitor "
            "GROUP BY ip ORDER BY clicks DESC LIMIT 5"
        ).fetchall()
        return {
            "clicks": conn.execute("SELECT MAX(id) FROM click").fetchone()[0] or 0,
            "clicks_last_24h": conn.execute(
                "SELECT COUNT(*) FROM click INDEXED BY click_campaign_created_at WHERE campaign_id IN "
                "(SELECT id FROM campaign) AND created_at >= ?",
                (day_ago,),
            ).fetchone()[0],
            "busiest_ips": [{"ip": ip, "clicks": n, "user_agents": uas} for ip, n, uas in busiest],
            "size_mb": round(path.stat().st_size / 1e6, 1),
        }
    finally:
        conn.close()


def index_sizes_mb(path: Path, names: tuple[str, ...]) -> dict:
    """Each index's size from SQLite's dbstat table (where this SQLite has it)."""
    conn = connect_read_only(path)
    try:
        sizes = {}
        for name in names:
            row = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = ?", (name,)).fetchone()
            if row and row[0]:
                sizes[name] = round(row[0] / 1e6, 1)
        return sizes
    except sqlite3.OperationalError:  # No dbstat in this build.
        return {}
    finally:
        conn.close()


def time_probes(path: Path) -> dict:
    """Median µs of one visitor-history probe through the old and the new index, same visitors.

    Three kinds of visitor: new (no row), returning (a click in the last 24 h) and NAT (the
    busiest address with one of its user agents).
    """
    from models.clicks.record import visitor_key
    from models.store.hotpath import VisitorProbe

    conn = connect_read_only(path)
    try:
        now_ms = int(time.time() * 1000)
        since = now_ms - 86_400_000
        returning = conn.execute(
            "SELECT ip, ua_hash FROM click WHERE id > (SELECT MAX(id) FROM click) - 500000 "
            "ORDER BY random() LIMIT ?",
            (PROBE_SAMPLES,),
        ).fetchall()
        nat = conn.execute(
            "SELECT ip, ua_hash FROM click WHERE ip = (SELECT ip FROM click INDEXED BY click_visitor "
            "GROUP BY ip ORDER BY COUNT(*) DESC LIMIT 1) ORDER BY random() LIMIT ?",
            (PROBE_SAMPLES,),
        ).fetchall()
        rng = random.Random(PROBE_SAMPLES)  # Random addresses: no index page is warm by accident.
        fresh = [(".".join(str(rng.randint(1, 223)) for _ in range(4)), n) for n in range(PROBE_SAMPLES)]
        result = {}
        for kind, visitors in (("new", fresh), ("returning", returning), ("nat", nat)):
            for label, probe in (
                ("ip_ua_index", VisitorProbe.sibling_for(conn)(False)),
                ("visitor_key_index", VisitorProbe.sibling_for(conn)(True)),
            ):
                timings = []
                for ip, ua_hash in visitors:
                    started = time.perf_counter()
                    key = visitor_key(ip, ua_hash) if probe.by_key else 0
                    probe.history(conn, probe.visitor(ip, ua_hash, key), since)
                    timings.append((time.perf_counter() - started) * 1e6)
                result.setdefault(kind, {})[label] = round(statistics.median(timings), 1)
        return result
    finally:
        conn.close()


def read_steps(path: Path) -> list[dict]:
    conn = connect_read_only(path)
    try:
        return [
            {
                "name": name,
                "state": state,
                "units": done,
                "total_units": total,
                "started_at": started,
                "finished_at": finished,
                "seconds": round((finished - started) / 1000, 2) if started and finished else None,
            }
            for name, state, done, total, started, finished in conn.execute(SQL_STEPS).fetchall()
        ]
    finally:
        conn.close()


def wait_for_steps(path: Path, names: list[str], stack: LannerStack, reporter: Reporter) -> None:
    """Until the named deferred steps are done (the worker runs them), with a deadline."""
    deadline = time.monotonic() + STEPS_DEADLINE_SECONDS
    while True:
        pending = [s["name"] for s in read_steps(path) if s["name"] in names and s["state"] != "done"]
        if not pending:
            return
        stack.check_alive()
        if time.monotonic() > deadline:
            raise BenchError(
                f"Deferred steps {', '.join(pending)} did not finish in {STEPS_DEADLINE_SECONDS:.0f} s."
            )
        reporter.message(f"Waiting for {', '.join(pending)} ...")
        time.sleep(5)


def run_rehearsal(options: MigrationOptions, report: MigrationReport, reporter: Reporter) -> MigrationReport:
    """Build (once) and copy the pre-upgrade database, upgrade it under load, fill `report`."""
    from models.migrations.runner import migrate
    from models.store.database import db, open_database

    if options.recent > options.clicks or options.clicks <= 0 or options.rate <= 0 or options.seconds <= 0:
        raise BenchError("--clicks, --rate and --seconds must be positive and --recent at most --clicks.")
    k6 = k6_binary()
    with run_work_dir("lanner-rehearsal-", options.keep_files, reporter) as work_dir:
        data_dir = (options.data_dir or Path("var/bench-migration")).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        pristine, live = data_dir / PRISTINE, data_dir / "lanner.db"
        newest, previous = rehearsed_migration()
        report.migration = newest
        env = lanner_env(data_dir)
        with sigterm_as_interrupt():
            rebuild = options.rebuild or not pristine.exists()
            if not rebuild and (age := newest_click_age_hours(pristine)) > PRISTINE_MAX_AGE_HOURS:
                reporter.message(
                    f"{pristine.name}'s newest click is {age:.0f} h old: its last 24 h have aged."
                )
                rebuild = True
            if rebuild:
                reporter.message(f"Building the pre-upgrade database ({previous}) in {pristine} ...")
                build_pre_upgrade_database(pristine, options, reporter)
            for stale in (live, Path(f"{live}-wal"), Path(f"{live}-shm"), data_dir / "queue.db"):
                stale.unlink(missing_ok=True)
            shutil.rmtree(data_dir / "spool", ignore_errors=True)
            reporter.message(f"Copying {pristine.name} to {live.name} ...")
            shutil.copyfile(pristine, live)
            if not (data_dir / "geo" / "country.mmdb").exists() and "LANNER_GEO_DATABASE" not in env:
                run_lanner(env, "geo", "build")
            report.database = describe_database(live)
            report.settings = {
                "rate": options.rate,
                "seconds": options.seconds,
                "workers": options.workers,
                "worker_started_after_s": WORKER_DELAY_SECONDS,
                "data_dir": str(data_dir),
                "pre_upgrade_schema": previous,
            }

            open_database(live)
            try:
                started = time.perf_counter()
                applied = migrate(db)
                report.sync_step_s = round(time.perf_counter() - started, 3)
            finally:
                db.close()
            if applied[:1] != [newest]:
                raise BenchError(f"Expected to apply {newest} first, applied {applied}.")
            step_names = [step["name"] for step in read_steps(live) if step["state"] != "done"]
            reporter.message(
                f"{', '.join(applied)} applied in {report.sync_step_s} s; deferred: {', '.join(step_names)}."
            )

            bench_options = BenchOptions(
                rates=[options.rate], step_seconds=options.seconds, workers=options.workers
            )
            with LannerStack(env, work_dir, options.workers, with_worker=False) as stack:

                def start_worker_once(elapsed: float) -> None:
                    if stack.worker is None and elapsed >= WORKER_DELAY_SECONDS:
                        stack.start_worker()

                load_started_ms = int(time.time() * 1000)
                result, run = measure_step(
                    "lanner",
                    stack.url,
                    options.rate,
                    bench_options,
                    work_dir,
                    k6,
                    stack.serve.pid,
                    reporter,
                    on_tick=start_worker_once,
                )
                load_ended_ms = int(time.time() * 1000)
                if stack.worker is None:
                    stack.start_worker()
                result.catch_up_s = round(stack.wait_drained(live, data_dir / "spool"), 2)
                subids, _ = read_subids(run.log_path)
                result.logged = len(subids)
                result.lost, result.duplicated = reconcile_subids(live, subids)
                report.load = result
                reporter.step_finished(result)
                timed = [name for name in step_names if name in _timed_steps(newest)]
                wait_for_steps(live, timed, stack, reporter)
            for step in read_steps(live):
                if step["name"] in step_names:
                    step["under_load"] = bool(
                        step["started_at"]
                        and step["finished_at"]
                        and step["finished_at"] <= load_ended_ms
                        and step["started_at"] >= load_started_ms
                    )
                    report.steps.append(step)
            reporter.message("Timing the uniqueness probes through both indexes ...")
            report.probes_us = time_probes(live)
            report.index_mb = index_sizes_mb(live, ("click", "click_visitor", "click_visitor_key"))
        report.is_complete = True
    return report


def _timed_steps(migration: str) -> list[str]:
    """The migration's deferred steps that run at once (not the grace-delayed index drop)."""
    module = importlib.import_module(f"models.migrations.{migration}")
    return [name for name in getattr(module, "STEPS", ()) if name not in getattr(module, "DELAYED_STEPS", ())]


def format_rehearsal(report: MigrationReport) -> list[str]:
    database = report.database
    lines = [
        f"Upgrade to {report.migration} on {database.get('clicks', 0):,} clicks "
        f"({database.get('clicks_last_24h', 0):,} in the last 24 h, {database.get('size_mb')} MB)",
        f"  synchronous step: {report.sync_step_s} s",
    ]
    for step in report.steps:
        where = "under load" if step.get("under_load") else "not entirely under load"
        seconds = f"{step['seconds']} s" if step["seconds"] is not None else step["state"]
        lines.append(f"  {step['name']}: {seconds} ({step['units']:,} units, {where})")
    load = report.load
    if load:
        lines.append(
            f"  clicks: {load.rate}/s offered for {load.seconds} s, {load.accepted_per_s}/s accepted, "
            f"{load.errors} errors, {load.dropped} dropped, p50 {load.p50_ms} / p95 {load.p95_ms} / "
            f"p99 {load.p99_ms} ms, {load.lost} lost, {load.duplicated} duplicated"
        )
    for kind, timings in report.probes_us.items():
        pairs = ", ".join(f"{label} {value} µs" for label, value in timings.items())
        lines.append(f"  probe, {kind} visitor: {pairs}")
    if report.index_mb:
        lines.append("  sizes: " + ", ".join(f"{name} {mb} MB" for name, mb in report.index_mb.items()))
    return lines
