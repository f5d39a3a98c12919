"""A measured spend sync (issue 30's target: 50,000 zone-day rows in 60 s, a second run changing nothing):
`lanner bench spend-sync`.

A throwaway SQLite database gets generated clicks over the last days (workers/bench/generate.py), its
campaigns a traffic source whose `zone` parameter is sub_id_1. A local HTTP server stands in for
PropellerAds' statistics API and answers one row per (campaign, zone, day) the clicks have, up to
`rows`, each with a spend; a spend connection maps each generated campaign. The bench times the first
sync (every row a new cost set spread over its clicks), the second (the same answer: nothing written)
and a third after a tenth of the rows changed, and checks the clicks' costs add up to the spend.
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from models.accounts.principal import CLI
from models.admin.sources import create_source
from models.migrations.deferred import run_deferred
from models.migrations.runner import migrate
from models.reporting.spend.connections import create_spend_connection, map_ids
from models.reporting.spend.sync import SpendConfig, sync_connection
from models.store.database import db, open_database
from models.tables.campaign import Campaign
from workers.bench.generate import generate_clicks
from workers.bench.servers import PostgresServer

TOKEN = "bench-propeller-token-0000"
SQL_ZONE_DAYS = (
    "SELECT campaign_id, sub_id_1, (created_at / 86400000) AS day, COUNT(*) FROM click "
    "GROUP BY campaign_id, sub_id_1, day ORDER BY day, campaign_id, sub_id_1"
)
SQL_TOTAL_COST = "SELECT SUM(cost) FROM click"
SQL_SET_SPEND = "SELECT SUM(amount) FROM cost_entry WHERE spend_connection_id IS NOT NULL"


class _Statistics:
    """PropellerAds' /v5/adv/statistics answering whatever rows the bench sets (one request a sync)."""

    def __init__(self) -> None:
        self.body = b"[]"
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def measure_spend_sync(
    rows: int = 50_000, clicks: int = 200_000, campaigns: int = 10, seed: int = 30, *, postgres: bool = False
) -> dict:
    """The timings of three syncs over generated data, in seconds, with their counts; on a throwaway
    SQLite file, or with `postgres` a throwaway PostgreSQL server (fsync on)."""
    with tempfile.TemporaryDirectory(prefix="lanner-spend-bench-") as folder, ExitStack() as stack:
        if postgres:
            server = PostgresServer(fsync=True)
            stack.callback(server.stop)
            server.start()
            open_database(server.url(server.create_database()))
        else:
            open_database(Path(folder) / "lanner.db", autocheckpoint=True)
        stack.callback(db.close)
        statistics = _Statistics()
        stack.callback(statistics.close)
        result = _measure(statistics, rows, clicks, campaigns, seed)
        return result | {"backend": "postgresql" if postgres else "sqlite"}


def _measure(server: _Statistics, rows: int, clicks: int, campaigns: int, seed: int) -> dict[str, Any]:
    migrate(db)
    run_deferred(db)
    started = time.perf_counter()
    # Every click on one of the window's 5 UTC days, today included.
    now = time.time()
    window_start = (now // 86400 - 4) * 86400
    days = (now - window_start) / 86400 * 0.999
    generate_clicks(db, clicks, days, campaigns=campaigns, seed=seed, zone_count=max(rows // 20, 100))
    generated = time.perf_counter() - started
    source = create_source(db, "Propeller", "zone={zoneid}")
    Campaign.update(source_id=source.id).execute()
    connection = create_spend_connection(
        db, "bench", "propellerads", source="Propeller", credentials={"api_token": TOKEN}, parameter="zone"
    )
    ids = [row[0] for row in db.execute_sql("SELECT id FROM campaign ORDER BY id").fetchall()]
    map_ids(db, connection.id, {f"9{campaign_id}": str(campaign_id) for campaign_id in ids})
    zone_days = db.execute_sql(SQL_ZONE_DAYS).fetchall()[:rows]
    rng = random.Random(seed)
    answer = [
        {
            "date_time": datetime.fromtimestamp(day * 86400, UTC).date().isoformat(),
            "campaign_id": int(f"9{campaign_id}"),
            "zone_id": zone,
            "spent": round(count * rng.uniform(0.001, 0.05), 4),
        }
        for campaign_id, zone, day, count in zone_days
    ]
    server.body = json.dumps({"items": answer}).encode()
    config = SpendConfig({"propellerads": server.base}, 5)
    runs = []
    for step in ("first", "again", "a tenth changed"):
        if step == "a tenth changed":
            for row in answer[::10]:
                row["spent"] = round(row["spent"] * 1.5 + 0.01, 4)
            server.body = json.dumps({"items": answer}).encode()
        began = time.perf_counter()
        run = sync_connection(db, connection.id, config, actor=CLI)
        seconds = time.perf_counter() - began
        runs.append(
            {
                "run": step,
                "seconds": round(seconds, 2),
                "state": run.state,
                "rows": run.rows,
                "written": run.written,
                "unchanged": run.unchanged,
                "removed": run.removed,
                "skipped": run.skipped,
                "error": run.error,
                "note": run.note,
            }
        )
    spend = round(sum(row["spent"] for row in answer), 2)
    cost = round(db.execute_sql(SQL_TOTAL_COST).fetchone()[0] or 0.0, 2)
    written = round(db.execute_sql(SQL_SET_SPEND).fetchone()[0] or 0.0, 2)
    return {
        "clicks": clicks,
        "zone_day_rows": len(answer),
        "generate_seconds": round(generated, 1),
        "runs": runs,
        "spend": spend,
        "spend_written": written,  # The spend of the rows not skipped: what the clicks' costs must add to.
        "click_costs": cost,
    }
