"""`lanner bench reports`: how long the reports a buyer opens take on a big database.

Runs each report of REPORTS `repeat` times against a data directory (normally the click bench's
prefilled one), after adding conversions to a share of its clicks through the real postback path
and finishing the rollup backfill, and prints the median and the slowest run of each, with the
sources the report read (rollup_day, rollup_hour, raw). In process, on the database file: the
time is the query's, not HTTP's.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from peewee import Database

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.reporting.reports import ReportQuery, run_report

REPORTS: tuple[tuple[str, ReportQuery], ...] = (
    ("campaigns, last 30 days", ReportQuery(group_by=("campaign",), preset="last_30_days")),
    (
        "campaigns, last 30 days, Berlin",
        ReportQuery(group_by=("campaign",), preset="last_30_days", timezone="Europe/Berlin"),
    ),
    ("day x campaign, last 30 days", ReportQuery(group_by=("day", "campaign"), preset="last_30_days")),
    (
        "offers of campaign 1, yesterday",
        ReportQuery(group_by=("offer",), preset="yesterday", filters={"campaign": ("1",)}),
    ),
    (
        "all history, 5 levels",
        ReportQuery(group_by=("campaign", "offer", "country", "device", "os"), preset="all_time"),
    ),
    ("all history, by country", ReportQuery(group_by=("country",), preset="all_time")),
    (
        "sub_id_1 of campaign 1, last 7 days (raw)",
        ReportQuery(group_by=("sub_id_1",), preset="last_7_days", filters={"campaign": ("1",)}),
    ),
)


@dataclass
class ReportTiming:
    name: str
    median_ms: float
    max_ms: float
    rows: int
    clicks: int
    sources: str


def add_conversions(
    db: Database, share: float, *, seed: int = 7, on_progress: Callable[[int], None] | None = None
) -> int:
    """Give `share` of the clicks a conversion (lead, some then sale or rejected) via the postback path."""
    have = db.execute_sql("SELECT COUNT(*) FROM conversion").fetchone()[0]
    # From the oldest click the row store still holds: with a retention window the ids below it are
    # gone, and sampling from 1 would convert far fewer clicks than asked.
    clicks, first_id, last_id = db.execute_sql("SELECT COUNT(*), MIN(id), MAX(id) FROM click").fetchone()
    wanted = int(clicks * share) - have
    if wanted <= 0 or not last_id:
        return 0
    rng = random.Random(seed)
    recorder = ConversionRecorder(db, park_ms=60_000)
    received = Received("GET", "127.0.0.1", "bench")
    ids = rng.sample(range(first_id, last_id + 1), min(wanted, last_id - first_id + 1))
    done = 0
    for chunk_start in range(0, len(ids), 2000):
        chunk = ids[chunk_start : chunk_start + 2000]
        marks = ",".join("?" * len(chunk))
        subids = [row[0] for row in db.execute_sql(f"SELECT subid FROM click WHERE id IN ({marks})", chunk)]
        for subid in subids:
            params = {
                "subid": subid,
                "status": "lead",
                "payout": f"{rng.choice((5, 10, 25, 40))}",
                "tid": "b1",
            }
            recorder.record(parse_postback(params), received)
            roll = rng.random()
            if roll < 0.5:
                recorder.record(parse_postback({**params, "status": "sale"}), received)
            elif roll < 0.7:
                recorder.record(parse_postback({**params, "status": "rejected"}), received)
        done += len(subids)
        if on_progress:
            on_progress(len(subids))
    return done


def time_reports(
    db: Database, repeat: int, *, on_report: Callable[[ReportTiming], None] | None = None
) -> list[ReportTiming]:
    timings = []
    for name, query in REPORTS:
        elapsed = []
        for _ in range(repeat):
            started = time.perf_counter()
            report = run_report(db, query)
            elapsed.append((time.perf_counter() - started) * 1000)
        timing = ReportTiming(
            name=name,
            median_ms=round(statistics.median(elapsed), 1),
            max_ms=round(max(elapsed), 1),
            rows=len(report.rows),
            clicks=report.total["clicks"],
            sources="+".join(report.sources),
        )
        timings.append(timing)
        if on_report:
            on_report(timing)
    return timings


def timings_json(timings: list[ReportTiming]) -> list[dict]:
    return [asdict(timing) for timing in timings]


def row_count(db: Database, table: str) -> int:
    """Rows in `table` (click or conversion), for the bench's summary line."""
    if table not in ("click", "conversion"):
        raise ValueError(f"row_count counts click or conversion rows, not {table!r}.")
    return db.execute_sql(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
