"""Shared-service CPU per cluster click, in process (issue 33, point 1): PostgreSQL's and Redis's CPU, and
the web worker's, per click of an in-process tracker in cluster mode, with the visitor's landed history
asked of PostgreSQL (the probe per click, before) or of the node's own file (after).

Starts a throwaway PostgreSQL (fsync on, 128 MB shared_buffers) and Redis (workers/bench/servers.py),
migrates, makes one campaign whose offer has a daily cap too high to reach (so every click passes a cap:
leases) and a fallback offer. Prefills --visitors visitors' clicks and lands them (PostgreSQL and the
node's file both hold them), then, for each mode in turn, with a fresh tracker, --clicks clicks of those
visitors past debounce (so the probes find rows). PostgreSQL's CPU is its postmaster tree's utime +
stime (/proc; the tracker keeps one connection open, so its backend's CPU is read live), Redis's its
process's; the web worker's is the clicking thread's CPU time. The flush is not in these figures (it is
measured by scripts/flush_pg_cost.py). Prints µs per click for each mode and --rounds rounds.

    .venv/bin/python scripts/cluster_click_cost.py [--visitors 2000] [--clicks 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--visitors", type=int, default=2000)
    parser.add_argument("--clicks", type=int, default=4000, help="Per mode and round.")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from models.admin.services import create_campaign, create_offer, update_stream
    from models.clicks.landing import SpoolLanding
    from models.clicks.node import ensure_spool_node
    from models.clicks.tracker import ClickTracker
    from models.clicks.visit import Visit
    from models.cluster.shared_state import SharedState
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from models.store.nodevisitors import LandedVisitors, landed_visitors_path
    from workers.bench.harness import process_cpu_seconds
    from workers.bench.servers import PostgresServer, RedisServer

    postgres = PostgresServer(fsync=True, shared_buffers="128MB").start()
    redis_server = RedisServer().start()
    try:
        migrate(open_database(postgres.url(postgres.create_database())))
        offer = create_offer(db, "Capped", "https://capped.example/?c={subid}", daily_cap=10**9).id
        spare = create_offer(db, "Spare", "https://spare.example/?c={subid}").id
        campaign = create_campaign(db, "Cost", "cost", offer_id=offer)
        update_stream(db, campaign.streams.get().id, fallback_offer_id=spare)
        spool = Path(tempfile.mkdtemp(prefix="lanner-click-cost-")) / "spool"
        spool.mkdir(parents=True)
        ensure_spool_node(spool, "node-a")
        landing = SpoolLanding(db, spool, 64 << 20, bot_ips=(), park_ms=60_000, visitor_window_ms=86_400_000)
        now = [time.time()]

        def visit(n: int) -> Visit:
            return Visit(
                ip=f"10.{n // 62500}.{n // 250 % 250}.{n % 250 + 1}", user_agent="Mozilla/5.0 Cost/1"
            )

        def tracker(is_node_file: bool) -> ClickTracker:
            return ClickTracker(
                db,
                spool_dir=spool,
                segment_bytes=64 << 20,
                uniqueness_hours=24,
                debounce_seconds=2,
                clock=lambda: now[0],
                rng=random.Random(1),
                shared=SharedState(redis_server.url(), prefix="cost:", timeout=2.0),
                landed=LandedVisitors(landed_visitors_path(spool)) if is_node_file else None,
            )

        prefill = tracker(True)
        config = prefill.campaign("cost")
        for n in range(args.visitors):
            prefill.track(config, visit(n))
        prefill.close()
        landing.flush()
        redis_pid = redis_server.process.pid if redis_server.process is not None else 0
        results: dict[str, list[tuple[float, float, float]]] = {"postgresql probe": [], "node file": []}
        for _ in range(args.rounds):
            for mode in results:
                now[0] += 10  # Past debounce: each click a new one of a known visitor.
                clicker = tracker(mode == "node file")
                config = clicker.campaign("cost")
                clicker.track(config, visit(0))  # Connected, loaded, leased: not measured.
                pg, rd = process_cpu_seconds(postgres.pid), process_cpu_seconds(redis_pid)
                own = time.thread_time()
                for n in range(args.clicks):
                    clicker.track(config, visit(n % args.visitors))
                own = time.thread_time() - own
                pg, rd = process_cpu_seconds(postgres.pid) - pg, process_cpu_seconds(redis_pid) - rd
                clicker.close()
                landing.flush()  # Lands them (not measured): the next round's visitors have these too.
                per = 1e6 / args.clicks
                results[mode].append((pg * per, rd * per, own * per))
        landing.close()
        print(f"{args.clicks} clicks of {args.visitors} known visitors per mode and round, µs per click:")
        for mode, rounds in results.items():
            pg, rd, own = (statistics.median(r[i] for r in rounds) for i in range(3))
            runs = "; ".join(f"{a:.0f}/{b:.0f}/{c:.0f}" for a, b, c in rounds)
            print(
                f"  {mode:17} PostgreSQL {pg:6.1f}  Redis {rd:6.1f}  shared {pg + rd:6.1f}  "
                f"web worker {own:6.1f}   (rounds pg/redis/worker: {runs})"
            )
    finally:
        redis_server.stop()
        postgres.stop()
