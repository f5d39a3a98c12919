"""A property: whatever the clicks, conversions and costs, and whatever the report's shape, a report read
from the columnar history (source history, and auto with the history) equals the row store's raw report,
exactly (with the sub id cube of its closed days built, or not). Each example is a fresh SQLite database
(a copy of the run's migrated one) with its history appended, then changed the ways the history has to
follow: cost spreads and LP clicks queue copied clicks again, new clicks land past its position, and
clicks it holds leave the row store (as LANNER_RAW_RETENTION deletes them, their cutoff recorded as
`lanner prune` records its own) with their conversions kept."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.costs import spread_cost
from models.reporting.currency import set_rates
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import ReportQuery, run_report
from models.reporting.subidcube import build_cube
from workers.bench.generate import generate_clicks

pytestmark = pytest.mark.long

END = datetime(2026, 11, 20, 17, 41, tzinfo=UTC)
END_MS = int(END.timestamp() * 1000)
DAY_MS = 86_400_000
RECEIVED = Received("GET", "127.0.0.1", "test")
DIMENSIONS = (
    "campaign",
    "offer",
    "stream",
    "network",
    "traffic_source",
    "lander",
    "country",
    "device",
    "os",
    "source",
    "language",
    "sub_id_1",
    "sub_id_2",
    "referrer_domain",
    "domain",
)
FILTERS = {
    "country": ("US", "DE", "GB", ""),
    "campaign": ("1",),  # Every example has campaign 1 (a filter naming no campaign is refused).
    "device": ("mobile", "desktop"),
    "sub_id_1": ("1", "2", "3", "7"),
    "offer": ("0", "1", "2", "5"),
}
ZONES = ("UTC", "Asia/Kolkata", "America/New_York", "Australia/Adelaide")


@st.composite
def report_shapes(draw) -> dict:
    groups = draw(st.lists(st.sampled_from(DIMENSIONS), min_size=0, max_size=2, unique=True))
    time_group = draw(st.sampled_from((None, "day", "hour")))
    group_by = tuple(([time_group] if time_group else []) + groups) or ("campaign",)
    filters = {}
    for name in draw(st.lists(st.sampled_from(tuple(FILTERS)), max_size=2, unique=True)):
        filters[name] = tuple(
            draw(st.lists(st.sampled_from(FILTERS[name]), min_size=1, max_size=3, unique=True))
        )
    shape: dict = dict(group_by=group_by, filters=filters, timezone=draw(st.sampled_from(ZONES)))
    if draw(st.booleans()):
        shape["preset"] = "all_time"
    else:  # Anywhere over the clicks' days, to the minute: edges inside hours, and whole hours and days.
        start = END - timedelta(minutes=draw(st.integers(0, 6 * 24 * 60)))
        length = timedelta(minutes=draw(st.integers(1, 6 * 24 * 60)))
        shape["since"] = start.strftime("%Y-%m-%dT%H:%M")
        shape["until"] = (start + length).strftime("%Y-%m-%dT%H:%M")
    return shape


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    clicks=st.integers(20, 400),
    days=st.integers(1, 5),
    campaigns=st.integers(1, 3),
    seed=st.integers(0, 1000),
    converted=st.floats(0, 0.5),
    rollups=st.booleans(),
    spread=st.one_of(st.none(), st.floats(0.01, 500)),
    landed_after=st.integers(0, 80),
    deleted=st.booleans(),
    cubed=st.sampled_from((None, "once", "again")),
    shapes=st.lists(report_shapes(), min_size=3, max_size=3),
    data=st.data(),
)
def test_history_reports_equal_raw_reports_whatever_the_data(
    tmp_path_factory,
    sqlite_template,
    clicks,
    days,
    campaigns,
    seed,
    converted,
    rollups,
    spread,
    landed_after,
    deleted,
    cubed,
    shapes,
    data,
):
    from models.store.database import db, open_database, write_tx
    from models.store.meta import MetaStore
    from models.store.retention import RetentionStore

    folder = tmp_path_factory.mktemp("property")
    shutil.copyfile(sqlite_template, folder / "lanner.db")
    open_database(folder / "lanner.db", autocheckpoint=True)
    try:
        generate_clicks(db, clicks, days, campaigns=campaigns, seed=seed, end_ms=END_MS - DAY_MS // 2)
        if rollups:
            run_deferred(db)
        set_rates(db, {"EUR": 1.08})
        recorder = ConversionRecorder(db, park_ms=3_600_000)
        subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
        for subid in subids[: int(len(subids) * converted)]:
            params = {
                "subid": subid,
                "status": data.draw(st.sampled_from(["lead", "sale", "rejected", "rebill", "trash"])),
                "payout": f"{data.draw(st.floats(0, 80)):.2f}",
                "currency": data.draw(st.sampled_from(["", "EUR", "JPY"])),
            }
            recorder.record(parse_postback(params), RECEIVED)
        files = HistoryFiles(folder / "history" / "clicks.duckdb")
        append_history(db, files)
        if cubed:  # The sub id cube of the closed days: the changes below must keep it exact.
            build_cube(files)
        if spread is not None:  # Queues the copied clicks it costs: the row store answers for them.
            spread_cost(db, 1, END_MS - days * DAY_MS, END_MS, spread)
        if landed_after:  # Past the history's position: the row store's tail.
            generate_clicks(db, landed_after, 1, campaigns=campaigns, seed=seed + 1, end_ms=END_MS)
        raw = [run_report(db, ReportQuery(source="raw", **shape)) for shape in shapes]
        if deleted:
            # As LANNER_RAW_RETENTION must: only clicks the history holds and owes no copy (appended
            # again first), the cutoff recorded so that no report reads the row store before it.
            append_history(db, files)
            cutoff = END_MS - DAY_MS // 2
            with write_tx(db):
                RetentionStore(db.connection()).delete_clicks_before(1, cutoff, 10**6)
                MetaStore(db.connection()).move_pruned_before(cutoff)
            if cubed == "again":  # The days the second append copied clicks into, built again.
                build_cube(files)
        for shape, expected in zip(shapes, raw, strict=True):
            for source in ("history", "auto"):
                report = run_report(db, ReportQuery(source=source, **shape), history=files)
                assert report.fallback is None
                assert rows_of(report) == rows_of(expected), (source, shape)
                assert report.total == pytest.approx(expected.total), (source, shape)
                assert report.unconverted == expected.unconverted, (source, shape)
    finally:
        db.close()
