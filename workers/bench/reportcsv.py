"""Bench: a report of a million rows streamed as CSV with bounded memory (docs/PERFORMANCE.md).

`python -m workers.bench.reportcsv --rows 1000000` (LANNER_* as for `lanner`, on a fresh data
directory) writes that many clicks, each with its own sub_id_1, straight into the columnar history
(the bench harness may; the row store is told the history holds them), then, in a fresh process,
streams the sub_id_1 report through the CSV writer the API uses and prints the rows, the seconds, and
the peak RSS after the first 20,000 rows and at the end: the growth is what the rows cost held.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from peewee import Database

from models.reporting.history import HistoryFiles
from models.store.database import write_tx
from models.store.duckdb.connection import open_history
from models.store.duckdb.history import HISTORY_COLUMNS, ColumnarHistory
from models.store.history import HistoryStore

WARM_ROWS = 20_000
SQL_FILL = (
    "INSERT INTO click (id, created_at, campaign_id, stream_id, offer_id, cost, is_unique_global, "
    "is_unique_campaign, is_unique_stream, is_bot, country, sub_id_1, subid) "
    "SELECT i, ? - (i % 86400) * 1000, 1, 0, 0, 0.01, 1, 1, 1, 0, 'US', 'zone-' || i, 'bench' || i "
    "FROM range(1, ? + 1) AS t(i)"
)
SQL_POSITION = "UPDATE history_meta SET value = ? WHERE key = 'position'"
assert {"id", "created_at", "sub_id_1", "country", "subid"} <= set(HISTORY_COLUMNS)


def fill_history(db: Database, files: HistoryFiles, rows: int) -> None:
    """`rows` clicks of one campaign over the last day, straight into the history; the row store's
    position moved past them so reports trust the history with them."""
    now_ms = int(time.time() * 1000)
    files.path.parent.mkdir(parents=True, exist_ok=True)
    with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
        ColumnarHistory(conn, files.path.parent).create()
        conn.execute(SQL_FILL, [now_ms, rows])
        conn.execute(SQL_POSITION, [rows])
    with write_tx(db):
        HistoryStore(db.connection()).set_position(rows)


STREAM = """
import resource, sys, time
WARM_ROWS = int(sys.argv[1])
from models.reporting.history import HistoryFiles
from models.reporting.reports import ReportQuery
from models.reporting.reportstream import stream_report
from models.store.database import open_database
from routes.api import csv_chunks
from settings import load_settings

settings = load_settings()
db = open_database(settings.database_location)
began = time.monotonic()
query = ReportQuery(group_by=("sub_id_1",), preset="all_time")
stream = stream_report(db, query, history=HistoryFiles.of(settings))
rows = warm = 0
def counted():
    global rows, warm
    for row in stream.rows:
        rows += 1
        if rows == WARM_ROWS:
            warm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        yield row
written = sum(len(chunk) for chunk in csv_chunks(counted(), stream.columns))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(rows, written, warm, peak, round(time.monotonic() - began, 2), stream.streamed)
"""


def measure(env: dict[str, str] | None = None, warm: int = WARM_ROWS) -> dict[str, float]:
    """Stream the sub_id_1 report in a fresh process: rows, CSV bytes, peak RSS (KB) after `warm`
    rows and at the end, seconds, whether DuckDB summed it."""
    child = subprocess.run(
        [sys.executable, "-c", STREAM, str(warm)],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if child.returncode:
        raise RuntimeError(child.stderr)
    rows, written, warm, peak, seconds, streamed = child.stdout.splitlines()[-1].split()
    return {
        "rows": int(rows),
        "csv_bytes": int(written),
        "rss_warm_kb": int(warm),
        "rss_peak_kb": int(peak),
        "seconds": float(seconds),
        "streamed": streamed == "True",
    }


def main() -> None:
    from models.store.database import open_database
    from settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    settings = load_settings()
    db = open_database(settings.database_location)
    fill_history(db, HistoryFiles.of(settings), args.rows)
    db.close()
    print(json.dumps(measure(dict(os.environ)), indent=2))


if __name__ == "__main__":
    main()
