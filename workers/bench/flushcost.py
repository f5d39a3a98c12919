"""PostgreSQL's CPU per click landed by N concurrent flushers of one campaign (issue 33, point 2).

Starts a throwaway PostgreSQL (fsync on, Debian's 128 MB shared_buffers: workers/bench/servers.py),
migrates it, makes one campaign of 3 streams x 3 offers rotated at random, writes --clicks journal
lines into each of --nodes spools with in-process trackers (all in one hour: every flusher adds onto
the same cap counter and rollup rows), then lands the spools with one flusher thread each, at once,
in batches of --batch. PostgreSQL's CPU is the postmaster's and its children's utime + stime
(/proc, reaped backends included: every connection is closed before the second reading), over the
landing only; the flushers' is this process's own over the landing (it does nothing else meanwhile).
Prints µs per click of each, the wall time, and the lock waits the server logged past a
1 ms deadlock_timeout; then the wall time of a report over the rollups the landing made (the day
by offer, browser and OS: whole days, read from `rollup_day`; median of --reports runs) and how many
rollup_day rows it summed. Run it a few times: the box's other work shows in the spread. In the bench
because it sets the sessions' lock logging itself (SQL the store has no reason to hold).

    .venv/bin/python scripts/flush_pg_cost.py [--nodes 4] [--clicks 5000] [--batch 2000]
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path


def time_report(db, now: float, runs: int) -> tuple[float, int]:
    """The median wall ms of a report of the landing's UTC day by offer, browser and OS (whole days:
    `rollup_day`), and that table's row count."""
    from datetime import UTC, datetime, timedelta

    from models.reporting.reports import ReportQuery, run_report

    day = datetime.fromtimestamp(now, UTC).date()
    until = (day + timedelta(days=1)).isoformat()
    query = ReportQuery(group_by=("offer", "browser", "os"), since=day.isoformat(), until=until)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        report = run_report(db, query, now=now)
        times.append((time.perf_counter() - started) * 1000)
    assert report.sources == ["rollup_day"], report.sources
    (rows,) = db.execute_sql("SELECT COUNT(*) FROM rollup_day").fetchone()
    return statistics.median(times), rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--clicks", type=int, default=5000, help="Per node.")
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--reports", type=int, default=21, help="Timed report runs (the median is printed).")
    args = parser.parse_args(argv)

    from models.admin.services import add_stream, create_campaign, create_offer, update_stream
    from models.clicks.node import ensure_spool_node
    from models.clicks.spool import flush_spool
    from models.clicks.tracker import ClickTracker
    from models.clicks.visit import Visit
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from workers.bench.harness import process_cpu_seconds
    from workers.bench.servers import PostgresServer

    server = PostgresServer(fsync=True, shared_buffers="128MB").start()
    try:
        url = server.url(server.create_database())
        migrate(open_database(url))
        offers = [create_offer(db, f"Offer {n}", f"https://{n}.example/?c={{subid}}").id for n in range(3)]
        campaign = create_campaign(db, "Cost", "cost", offer_id=offers[0], rotation="weight")
        update_stream(db, campaign.streams.get().id, offers=[(offer, 100) for offer in offers])
        for _ in range(2):
            add_stream(db, campaign.id, offers=[(offer, 100) for offer in offers])
        work = Path(tempfile.mkdtemp(prefix="lanner-flush-cost-"))
        spools = []
        now = time.time()
        for n in range(args.nodes):
            spool = work / f"node-{n}" / "spool"
            spool.mkdir(parents=True)
            ensure_spool_node(spool, f"node-{n}")
            tracker = ClickTracker(
                db,
                spool_dir=spool,
                segment_bytes=64 << 20,
                uniqueness_hours=24,
                debounce_seconds=2,
                clock=lambda: now,
                rng=random.Random(n),
            )
            config = tracker.campaign("cost")
            for i in range(args.clicks):
                visit = Visit(
                    ip=f"10.{n}.{i // 250}.{i % 250 + 1}", user_agent=f"Mozilla/5.0 (X11) Cost/{i % 7}"
                )
                tracker.track(config, visit)
            tracker.close()
            spools.append(spool)
        db.close()

        log_before = len(server.log())
        errors: list[BaseException] = []
        start = threading.Barrier(args.nodes)

        def land(spool: Path) -> None:
            try:
                db.execute_sql("SET deadlock_timeout = '1ms'").close()
                db.execute_sql("SET log_lock_waits = on").close()
                start.wait(timeout=60)
                flush_spool(db, spool, 64 << 20, batch_size=args.batch)
            except BaseException as error:
                errors.append(error)
            finally:
                db.close()

        threads = [threading.Thread(target=land, args=(spool,)) for spool in spools]
        own_before = resource.getrusage(resource.RUSAGE_SELF)
        cpu_before, wall_before = process_cpu_seconds(server.pid), time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - wall_before
        own_after = resource.getrusage(resource.RUSAGE_SELF)
        # This process does nothing else meanwhile: its CPU over the landing is the flushers'.
        flushers_cpu = (own_after.ru_utime - own_before.ru_utime) + (own_after.ru_stime - own_before.ru_stime)
        time.sleep(0.5)  # The backends' exit, reaped by the postmaster: their CPU moves to its cutime.
        cpu = process_cpu_seconds(server.pid) - cpu_before
        if errors:
            raise SystemExit(f"a flusher failed: {errors[0]!r}")
        waits = re.findall(r"still waiting for \w+ on (\w+)", server.log()[log_before:])
        clicks = args.nodes * args.clicks
        per_click = cpu * 1e6 / clicks
        line_bytes = sum(path.stat().st_size for spool in spools for path in spool.glob("*.log")) / clicks
        print(
            f"{args.nodes} flushers, {clicks} clicks ({line_bytes:.0f} journal bytes each), "
            f"batch {args.batch}: "
            f"flushers {flushers_cpu * 1e6 / clicks:.0f} µs CPU per click, PostgreSQL {per_click:.0f} µs, "
            f"landed in {wall:.2f} s; {len(waits)} lock waits past 1 ms ({sorted(set(waits))})"
        )
        report_ms, rows = time_report(db, now, args.reports)
        print(f"report over rollup_day ({rows} rows): median {report_ms:.2f} ms of {args.reports} runs")
    finally:
        db.close()
        server.stop()
