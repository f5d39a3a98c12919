"""A measured run of many automation rules over many zones (issue 31's target: 100 rules × 50,000
zones in 10 s a run): `python scripts/bench_rules.py`.

A throwaway SQLite database gets generated clicks spread over `zones` sub_id_1 values of one campaign
(by default) and the week before now, with a few sales, then `rules` rules over all its campaigns:
windows of 6 h to 7 days (half of them ending before today), conditions of each kind, each
blacklisting at most 10 zones a run. It times the dry run (plan_rules) from the row store, again
from the columnar history once it is built, and a real run (run_rules, acting) from the history:
what `lanner worker` does each time.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from models.admin.services import list_campaigns
from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.migrations.runner import migrate
from models.optimisation.rules import create_rule, plan_rules, run_rules
from models.reporting.history import HistoryFiles, append_history
from models.store.database import db, open_database
from workers.bench.generate import generate_clicks

WINDOWS = ("6h", "12h", "1d", "3d", "7d")
CONDITIONS = (
    ("clicks >= 20", "conversions = 0"),
    ("cost >= 5", "conversions = 0"),
    ("roi < -50", "clicks >= 30"),
    ("cr > 5", "clicks >= 10"),
    ("clicks >= 40", "epc < 0.01"),
)


def measure_rules(
    clicks: int = 500_000,
    zones: int = 50_000,
    rules: int = 100,
    days: float = 7,
    seed: int = 31,
    campaigns: int = 1,
) -> dict[str, Any]:
    """The timings of one rules run over generated data, in seconds, with what it found."""
    with tempfile.TemporaryDirectory(prefix="lanner-rules-bench-") as folder:
        path = Path(folder) / "lanner.db"
        open_database(path, autocheckpoint=True)
        try:
            return _measure(Path(folder), clicks, zones, rules, days, seed, campaigns)
        finally:
            db.close()


def _measure(
    folder: Path, clicks: int, zones: int, rules: int, days: float, seed: int, campaign_count: int
) -> dict[str, Any]:
    migrate(db)
    run_deferred(db)
    started = time.perf_counter()
    generate_clicks(db, clicks, days, campaigns=campaign_count, seed=seed, zone_count=zones)
    generated = time.perf_counter() - started
    rng = random.Random(seed)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    received = Received("GET", "127.0.0.1", "bench")
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in rng.sample(subids, min(len(subids), clicks // 100)):
        recorder.record(
            parse_postback({"subid": subid, "status": "sale", "payout": "2", "tid": "b"}), received
        )
    campaigns = [str(campaign.id) for campaign in list_campaigns(db)]
    for n in range(rules):
        create_rule(
            db,
            f"rule {n}",
            campaigns=campaigns,
            dimension="sub_id_1",
            window=WINDOWS[n % len(WINDOWS)],
            exclude_today=n % 2 == 1,
            conditions=list(CONDITIONS[n % len(CONDITIONS)]),
            action="blacklist",
            max_actions=10,
        )
    started, cpu = time.perf_counter(), time.process_time()
    row_store = plan_rules(db)
    from_rows, from_rows_cpu = time.perf_counter() - started, time.process_time() - cpu
    history = HistoryFiles(folder / "history.duckdb")
    append_history(db, history)
    started, cpu = time.perf_counter(), time.process_time()
    planned = plan_rules(db, history=history)
    from_history, from_history_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    result = run_rules(db, history=history)
    acting, acting_cpu = time.perf_counter() - started, time.process_time() - cpu
    distinct = len({(plan.rule.window_hours, plan.rule.is_today_excluded) for plan in planned})
    pairs = db.execute_sql("SELECT COUNT(*) FROM (SELECT DISTINCT campaign_id, sub_id_1 FROM click) AS z")
    return {
        "campaign_zones": pairs.fetchone()[0],
        "clicks": clicks,
        "zones": zones,
        "rules": rules,
        "reports": distinct,
        "generate_seconds": round(generated, 1),
        "dry_run_row_store_seconds": round(from_rows, 2),
        "dry_run_history_seconds": round(from_history, 2),
        "run_history_seconds": round(acting, 2),
        # CPU seconds of this process (DuckDB's threads included): what a run costs on a box shared
        # with other work, where the wall clock also counts the waits for a core.
        "dry_run_row_store_cpu_seconds": round(from_rows_cpu, 2),
        "dry_run_history_cpu_seconds": round(from_history_cpu, 2),
        "run_history_cpu_seconds": round(acting_cpu, 2),
        "load_average": round(os.getloadavg()[0], 1),
        "matches": sum(len(p.actions) + p.held_back for p in row_store),
        "acted": len(result.acted),
        "errors": sorted({p.error for p in planned if p.error}),
    }
