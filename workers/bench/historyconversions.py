"""Bench: reports over clicks that left the row store, with every one converted, and the append's cost
per conversion (docs/analytics.md, "Measured").

`python -m workers.bench.historyconversions --clicks 200000` (LANNER_* as for `lanner`, on a fresh,
migrated data directory) generates that many clicks over 30 days (`lanner generate clicks`'s
generator), appends them to the history, records a lead for every click straight into the row store
(the bench harness may), appends again (timed: what the conversions' copy costs), deletes every click
from the row store as LANNER_RAW_RETENTION would once the history holds it (the cutoff recorded; a
converted click is kept by retention, so this is the most a report can meet: every conversion's click
only in the history), and times `source="history"` reports over all time (median of --runs). Runs on a
tree without conversions in the history too (the append then copies none): the before figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import ReportQuery, run_report
from models.store.database import open_database, write_tx
from models.store.meta import MetaStore
from models.store.retention import RetentionStore
from workers.bench.generate import generate_clicks

SQL_CONVERT_ALL = (
    "INSERT INTO conversion (subid, tid, status, original_status, raw_status, network, payout, currency, "
    "report_payout, cost, click_id, campaign_id, stream_id, offer_id, click_created_at, created_at, "
    "updated_at) SELECT subid, '', 'lead', 'lead', '', '', 2.5, 'USD', 2.5, 0, id, campaign_id, "
    "stream_id, offer_id, created_at, created_at + 1000, created_at + 1000 FROM click"
)
SQL_CAMPAIGNS = "SELECT DISTINCT campaign_id FROM click"
SHAPES = {"sub_id_1": ("sub_id_1",), "country": ("country",), "day": ("day",)}


def main() -> None:
    from settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    settings = load_settings()
    db = open_database(settings.database_location)
    files = HistoryFiles.of(settings)
    generate_clicks(db, args.clicks, 30, seed=1)
    append_history(db, files)
    with write_tx(db):
        db.connection().execute(SQL_CONVERT_ALL).close()
    began, cpu = time.perf_counter(), time.process_time()
    appended = append_history(db, files)
    append_seconds, append_cpu = time.perf_counter() - began, time.process_time() - cpu
    cutoff = int(time.time() * 1000) + 1
    with write_tx(db):
        retention = RetentionStore(db.connection())
        for (campaign_id,) in db.connection().execute(SQL_CAMPAIGNS).fetchall():
            retention.delete_clicks_before(campaign_id, cutoff, 10**9)
        MetaStore(db.connection()).move_pruned_before(cutoff)
    figures: dict[str, object] = {
        "clicks": args.clicks,
        "conversions_copied": getattr(appended, "conversions", 0),
        "append_seconds": round(append_seconds, 2),
        "append_us_per_conversion": round(append_seconds / args.clicks * 1e6, 1),
        "append_cpu_us_per_conversion": round(append_cpu / args.clicks * 1e6, 1),
    }
    for name, group_by in SHAPES.items():
        query = ReportQuery(group_by=group_by, preset="all_time", source="history")
        seconds, cpu_seconds = [], []
        for _ in range(args.runs):
            began, cpu = time.perf_counter(), time.process_time()
            report = run_report(db, query, history=files)
            seconds.append(time.perf_counter() - began)
            cpu_seconds.append(time.process_time() - cpu)  # DuckDB's threads' too: the box is shared.
        assert report.total["conversions"] == args.clicks, report.total
        figures[f"report_{name}_ms"] = round(statistics.median(seconds) * 1000)
        figures[f"report_{name}_cpu_ms"] = round(statistics.median(cpu_seconds) * 1000)
        figures[f"report_{name}_rows"] = len(report.rows)
    db.close()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
