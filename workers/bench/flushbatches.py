"""How big a batch a real `lanner worker` lands under load on PostgreSQL, and its cost (issue 33, point 3).

Starts a throwaway PostgreSQL (fsync on, 128 MB of shared_buffers: workers/bench/servers.py), migrates
it, makes one campaign of one stream and offer, starts `lanner worker` on it (no Redis: its flusher is
what is measured), then journals --rate clicks a second for --seconds into the worker's spool with an
in-process tracker, waits until all have landed, and prints the flush batches (each batch upserts the
campaign's one `rollup_campaign_hour` row once: its inserts and updates count them), the clicks a
batch, and the worker's CPU (its process tree's utime + stime, /proc) and PostgreSQL's per click over
the run. PostgreSQL's includes the tracker's own probes, the same in every run. The tracker shares this
process's CPU with the box: on a busy box it journals fewer clicks than asked, and says how many.

    .venv/bin/python scripts/flush_batch_run.py [--rate 400] [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# One campaign, stream and offer in one hour: each flush batch upserts one rollup_campaign_hour row once.
SQL_BATCHES = "SELECT n_tup_upd + n_tup_ins FROM pg_stat_user_tables WHERE relname = 'rollup_campaign_hour'"
SQL_CLICKS = "SELECT COUNT(*) FROM click"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=400, help="Clicks a second journalled.")
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args(argv)

    from models.admin.services import create_campaign, create_offer
    from models.clicks.tracker import ClickTracker
    from models.clicks.visit import Visit
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from settings import load_settings
    from workers.bench.harness import process_cpu_seconds
    from workers.bench.servers import PostgresServer

    server = PostgresServer(fsync=True, shared_buffers="128MB").start()
    worker = None
    try:
        url = server.url(server.create_database())
        data = Path(tempfile.mkdtemp(prefix="lanner-flush-batches-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
        env.update(LANNER_DATA_DIR=str(data), LANNER_DATABASE_URL=url, PYTHONPATH=str(ROOT))
        env["LANNER_EXCHANGE_RATE_URL"] = ""
        settings = load_settings(env)
        open_database(url)
        migrate(db)
        offer = create_offer(db, "Offer", "https://o.example/?c={subid}").id
        create_campaign(db, "Batches", "batches", offer_id=offer)
        with open(data / "worker.log", "w") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "cli", "worker"],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        tracker = ClickTracker(
            db,
            spool_dir=settings.spool_dir,
            segment_bytes=settings.spool_segment_bytes,
            uniqueness_hours=24,
            debounce_seconds=2,
            rng=random.Random(1),
        )
        config = tracker.campaign("batches")
        deadline = time.monotonic() + 60
        while not (settings.data_dir / "flusher.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # The worker's flusher has started.
        time.sleep(2)
        (batches_before,) = db.execute_sql(SQL_BATCHES).fetchone()
        worker_before, server_before = process_cpu_seconds(worker.pid), process_cpu_seconds(server.pid)
        started, sent = time.monotonic(), 0
        while (elapsed := time.monotonic() - started) < args.seconds:
            for _ in range(int(elapsed * args.rate) - sent):
                n = sent
                visit = Visit(
                    ip=f"10.{n // 62500}.{n // 250 % 250}.{n % 250 + 1}", user_agent=f"Mozilla/5.0 B/{n % 7}"
                )
                tracker.track(config, visit)
                sent += 1
            time.sleep(0.005)
        deadline = time.monotonic() + 120
        while db.execute_sql(SQL_CLICKS).fetchone()[0] < sent and time.monotonic() < deadline:
            time.sleep(0.2)
        worker_cpu = process_cpu_seconds(worker.pid) - worker_before
        server_cpu = process_cpu_seconds(server.pid) - server_before
        time.sleep(1)  # The statistics collector's report of the last transactions.
        batches = db.execute_sql(SQL_BATCHES).fetchone()[0] - batches_before
        landed = db.execute_sql(SQL_CLICKS).fetchone()[0]
        tracker.close()
        print(
            f"{sent} clicks journalled at {args.rate}/s asked over {args.seconds} s, {landed} landed in "
            f"{batches} flush batches (~{landed / max(batches, 1):.0f} clicks a batch); CPU a click: worker "
            f"{worker_cpu * 1e6 / sent:.0f} µs, PostgreSQL {server_cpu * 1e6 / sent:.0f} µs"
        )
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        db.close()
        server.stop()
