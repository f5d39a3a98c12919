"""Reports: rollups give exactly what raw rows give, for every metric and grouping; ranges in local time."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from models.admin.services import create_campaign, update_campaign
from models.clicks.record import new_subid, ua_hash
from models.conversions.admin import map_status
from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import ROLLUP_BACKFILL, rollups_ready, run_deferred
from models.reporting.costs import spread_cost
from models.reporting.currency import set_rates
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import FALLBACK_NOTE, ReportError, ReportQuery, plan_pieces, run_report
from models.tables.click import Click
from workers.bench.generate import generate_clicks

# The module's fixture builds one database: its tests run in one process.
pytestmark = pytest.mark.xdist_group("reports")

# Over 20 days, ~6 an hour: 5 to 7 in each of the 25 hours of New York's fall-back day. 6,000
# only made every report's rows twice as many (the module 43.7 -> 34.2 CPU-s).
CLICKS = 3000
END_MS = int(datetime(2026, 11, 20, 17, 41, tzinfo=UTC).timestamp() * 1000)
RECEIVED = Received("GET", "127.0.0.1", "test")
GROUPINGS = [
    ("campaign",),
    ("stream",),
    ("offer",),
    ("source",),
    ("country",),
    ("device",),
    ("os",),
    ("browser",),
    ("language",),
    ("day",),
    ("hour",),
    ("day", "campaign"),
    ("campaign", "offer", "country", "device", "os"),
    ("country", "offer"),  # The panel's report builder, from the country cube.
    ("day", "country"),
    ("hour", "campaign", "country"),
    ("sub_id_1",),
    ("referrer_domain",),
]
RANGES = [
    dict(preset="all_time"),
    dict(since="2026-11-03", until="2026-11-15"),
    dict(since="2026-11-02T10:17", until="2026-11-19T05:45"),
    dict(since="2026-11-01T00:00", until="2026-11-01T23:30"),  # New York's fall-back day.
]


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


@pytest.fixture(scope="module")
def history_files(tmp_path_factory) -> HistoryFiles:
    """The module database's columnar history: copied before the fixture's re-map and cost spreads,
    whose clicks are then queued for a copy again (a report reads those from the row store)."""
    return HistoryFiles(tmp_path_factory.mktemp("history") / "clicks.duckdb")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, history_files):
    """A database with random clicks over 20 days, conversions in every status and in four currencies
    (EUR with a rate, GBP whose rate comes half-way, JPY with none), costs in two, and a re-map."""
    from models.migrations.runner import migrate
    from models.store.database import db, open_database

    path = tmp_path_factory.mktemp("reports") / "lanner.db"
    open_database(path, autocheckpoint=True)
    migrate(db)
    generate_clicks(db, CLICKS, 20, campaigns=4, seed=11, end_ms=END_MS)
    set_rates(db, {"EUR": 1.08})
    update_campaign(db, 1, cost_model="cpa", cost_value=1.5, cost_currency="EUR")
    update_campaign(db, 2, cost_model="revshare", cost_value=40)
    run_deferred(db)  # The rollups go live for conversions now; the rest of the data lands live.
    rng = random.Random(5)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for n, subid in enumerate(rng.sample(subids, 700)):
        first = rng.choice(["lead", "sale", "approved", "hold", "mystery", "rebill"])
        params = {
            "subid": subid,
            "status": first,
            "payout": f"{rng.uniform(1, 50):.2f}",
            "tid": "t1",
            "currency": rng.choice(["", "USD", "EUR", "GBP", "JPY"]),
        }
        recorder.record(parse_postback(params), RECEIVED)
        if rng.random() < 0.5:
            then = rng.choice(["sale", "rejected", "trash", "lead"])
            recorder.record(parse_postback({**params, "status": then, "payout": "7.25"}), RECEIVED)
        if n == 350:
            set_rates(db, {"GBP": 1.27})  # Converts the GBP conversions so far, moving their rollups.
    append_history(db, history_files)
    map_status(db, "mystery", "sale")
    spread_cost(db, 3, END_MS - 5 * 86_400_000, END_MS, 123.45)
    spread_cost(db, 4, END_MS - 3 * 86_400_000, END_MS, 10.0, currency="EUR")
    yield db
    db.close()


@pytest.fixture(scope="module")
def raw_report(tracked):
    """The raw report of a shape over the module's database, made once for the module: it is the
    answer the rollups, the history and auto must each give, and no test writes that database. The
    rollup, history and auto tests ask ~650 raw reports of ~280 shapes (most of the module's CPU)."""
    made = {}

    def report(**shape):
        key = repr(sorted(shape.items()))
        if key not in made:
            made[key] = run_report(tracked, ReportQuery(source="raw", **shape))
        return made[key]

    return report


@pytest.mark.parametrize("group_by", GROUPINGS, ids="-".join)
@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_rollup_reports_equal_raw_reports(tracked, raw_report, group_by, zone):
    for date_range in RANGES:
        query = ReportQuery(group_by=group_by, timezone=zone, **date_range)
        fast = run_report(tracked, query)
        raw = raw_report(group_by=group_by, timezone=zone, filters={}, **date_range)
        assert raw.sources == ["raw"]
        assert rows_of(fast) == rows_of(raw), (group_by, zone, date_range)
        assert fast.total == pytest.approx(raw.total)
        assert fast.unconverted == raw.unconverted
    all_time = run_report(tracked, ReportQuery(group_by=group_by, preset="all_time")).sources
    if set(group_by) <= {"campaign", "stream", "offer"}:
        assert all_time == ["rollup_campaign_day"]  # The small cube.
    elif set(group_by) <= {"campaign", "stream", "offer", "country"}:
        assert all_time == ["rollup_campaign_country_day"]
    elif set(group_by) <= {"campaign", "offer", "country", "device", "os", "stream", "source", "browser"}:
        assert all_time == ["rollup_day"]


HISTORY_GROUPINGS = [*GROUPINGS, ("lander",), ("domain",), ("sub_id_7",), ("day", "referrer_domain")]


def assert_history_equals_raw(db, raw_report, history_files, group_by, zone, filters=None) -> None:
    for date_range in RANGES:
        shape = dict(group_by=group_by, timezone=zone, filters=filters or {}, **date_range)
        columnar = run_report(db, ReportQuery(source="history", **shape), history=history_files)
        raw = raw_report(**shape)
        assert columnar.sources == ["history"]
        assert rows_of(columnar) == rows_of(raw), (group_by, zone, date_range)
        assert columnar.total == pytest.approx(raw.total)
        assert columnar.unconverted == raw.unconverted


@pytest.mark.parametrize("group_by", HISTORY_GROUPINGS, ids="-".join)
@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_history_reports_equal_raw_reports(tracked, raw_report, history_files, group_by, zone):
    """The fixture's cost spreads are queued (read from the row store); the rest from DuckDB."""
    from models.store.history import HistoryStore

    assert HistoryStore(tracked.connection()).pending() > 0
    assert_history_equals_raw(tracked, raw_report, history_files, group_by, zone)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_history_filters_agree_with_raw(tracked, raw_report, history_files, zone):
    for filters in (
        {"country": ("US", "DE", "")},
        {"campaign": ("2", "4"), "country": ("US", "GB")},
        {"device": ("mobile",), "os": ("iOS",)},
        {"sub_id_1": ("1", "2", "3")},
        {"network": ("0",)},
    ):
        for group_by in (("offer",), ("day", "country"), ("referrer_domain",)):
            assert_history_equals_raw(tracked, raw_report, history_files, group_by, zone, filters)


AUTO_GROUPINGS = [*GROUPINGS, ("lander",), ("sub_id_7", "country"), ("day", "referrer_domain")]


@pytest.mark.parametrize("group_by", AUTO_GROUPINGS, ids="-".join)
@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_auto_reports_with_the_history_equal_raw_reports(tracked, raw_report, history_files, group_by, zone):
    """auto reads the history for whatever the rollups cannot answer (and the detail cube's reports
    over weeks), and says nothing of counting every click then."""
    for date_range in RANGES:
        shape = dict(group_by=group_by, timezone=zone, filters={}, **date_range)
        auto = run_report(tracked, ReportQuery(**shape), history=history_files)
        raw = raw_report(**shape)
        assert rows_of(auto) == rows_of(raw), (group_by, zone, date_range)
        assert auto.total == pytest.approx(raw.total)
        assert auto.unconverted == raw.unconverted
        assert auto.raw_reason is None and auto.fallback is None
        assert "raw" not in auto.sources or len(auto.sources) > 1  # Edges inside an hour only.
        if run_report(tracked, ReportQuery(**shape)).raw_reason:  # Without it: every click of the range.
            assert "history" in auto.sources, (group_by, zone, date_range)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("missing", "There is no click history"),
        ("garbage", "cannot be read"),
        ("empty", "is behind the row store"),
        ("locked", "Another process is appending"),
    ],
)
def test_auto_reports_count_the_row_store_when_the_history_cannot_answer(tracked, tmp_path, damage, reason):
    """Exact all the same, and saying why it took the slow way."""
    import fcntl
    import os

    from models.store.duckdb.connection import open_history
    from models.store.duckdb.history import ColumnarHistory

    files = HistoryFiles(tmp_path / "clicks.duckdb", read_wait=0.2)
    if damage == "garbage":
        files.path.write_bytes(os.urandom(3) * 100_000)
    if damage in ("empty", "locked"):  # A file with nothing copied: the row store trusts it with more.
        with open_history(files.path, write=True, memory_limit="64MB") as conn:
            ColumnarHistory(conn, tmp_path).create()
    lock = os.open(tmp_path / "history.lock", os.O_RDWR | os.O_CREAT)
    if damage == "locked":
        fcntl.flock(lock, fcntl.LOCK_EX)  # As an appender writing a chunk that never ends.
    try:
        for group_by in (("sub_id_1",), ("day", "country", "os")):
            shape = dict(group_by=group_by, since="2026-11-02T10:17", until="2026-11-19T05:45")
            auto = run_report(tracked, ReportQuery(**shape), history=files)
            raw = run_report(tracked, ReportQuery(source="raw", **shape))
            assert rows_of(auto) == rows_of(raw)
            assert "history" not in auto.sources
            if group_by == ("sub_id_1",):
                assert auto.sources == ["raw"] and auto.raw_reason == "the rollups do not keep sub_id_1"
                assert reason in auto.fallback
                assert [note for note in auto.notes if "did not answer" in note] == [
                    f"{FALLBACK_NOTE} {auto.fallback}"
                ]
            else:  # The rollups answer it without the history: nothing slow to explain.
                assert auto.fallback is None and auto.raw_reason is None
    finally:
        os.close(lock)


def test_the_data_exercises_every_metric(tracked):
    total = run_report(tracked, ReportQuery(preset="all_time")).total
    for metric in (
        "clicks",
        "unique_clicks",
        "leads",
        "sales",
        "rejected",
        "trash",
        "rebills",
        "revenue",
        "revenue_pending",
        "cost",
    ):
        assert total[metric] > 0, metric
    assert total["clicks"] == CLICKS
    assert total["cost"] == pytest.approx(123.45 + 10.8 + sum_conversion_costs(tracked), abs=0.01)
    report = run_report(tracked, ReportQuery(preset="all_time"))
    # Revenue is in USD: what was received in USD, EUR and GBP, converted; JPY waits for a rate.
    expected = tracked.execute_sql(
        "SELECT SUM(report_payout), SUM(currency = 'EUR'), SUM(currency = 'GBP') FROM conversion "
        "WHERE status IN ('sale', 'rebill')"
    ).fetchone()
    assert total["revenue"] == pytest.approx(expected[0]) and expected[1] > 0 and expected[2] > 0
    waiting = tracked.execute_sql(
        "SELECT COUNT(*), SUM(payout) FROM conversion WHERE currency = 'JPY' AND status IN ('lead', 'sale', "
        "'rebill')"
    ).fetchone()
    assert report.unconverted == [
        {"currency": "JPY", "conversions": waiting[0], "payout": pytest.approx(waiting[1])}
    ]
    unexpected = "SELECT COUNT(*) FROM conversion WHERE report_payout IS NULL AND currency != 'JPY'"
    assert tracked.execute_sql(unexpected).fetchone()[0] == 0


def sum_conversion_costs(db) -> float:
    return db.execute_sql("SELECT SUM(cost) FROM conversion").fetchone()[0]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Asia/Kolkata"])
def test_filters_agree_between_rollups_and_raw(tracked, raw_report, zone):
    for filters, cube in (
        ({"country": ("US", "DE", "")}, "rollup_campaign_country_day"),
        ({"campaign": ("1", "3")}, "rollup_campaign_day"),
        ({"campaign": ("2", "4"), "country": ("US", "GB")}, "rollup_campaign_country_day"),
        ({"device": ("mobile",), "os": ("iOS",)}, "rollup_day"),
        ({"country": ("DE",), "device": ("desktop",)}, "rollup_day"),
    ):
        for group_by in (("offer",), ("country",), ("day", "country")):
            for date_range in RANGES[:3]:
                fast = run_report(
                    tracked, ReportQuery(group_by=group_by, filters=filters, timezone=zone, **date_range)
                )
                raw = raw_report(group_by=group_by, filters=filters, timezone=zone, **date_range)
                assert rows_of(fast) == rows_of(raw), (filters, group_by, date_range)
        sources = run_report(tracked, ReportQuery(group_by=("offer",), filters=filters, preset="all_time"))
        assert sources.sources == [cube]


def cube_differences(db) -> dict[str, list]:
    """Per smaller rollup table, its rows that differ from a GROUP BY of the detail table of its width."""
    from models.store.rollups import RollupStore
    from models.tables.dimensions import CUBES

    metrics = RollupStore(db.connection()).present_metrics()  # A migration test's database may lack 0016's.
    differences = {}
    for name, (dimensions, tables) in CUBES.items():
        if name == "detail":
            continue
        for granularity, table in tables.items():
            key = ", ".join(("period", *dimensions))
            # NUMERIC: PostgreSQL rounds no double to 6 places (SQLite takes either).
            sums = ", ".join(f"ROUND(CAST(SUM({metric}) AS NUMERIC), 6)" for metric in metrics)
            detail = f"SELECT {key}, {sums} FROM rollup_{granularity} GROUP BY {key}"
            kept = f"SELECT {key}, {sums} FROM {table} GROUP BY {key}"  # Its nodes' partials summed (0036).
            missing = db.execute_sql(f"{detail} EXCEPT {kept}").fetchall()
            extra = db.execute_sql(f"{kept} EXCEPT {detail}").fetchall()
            differences[table] = missing + extra + [("empty",)] * (not db.execute_sql(kept).fetchone())
    return differences


def test_the_smaller_cubes_are_the_detail_cube_summed(tracked):
    """Landed clicks, conversions in every status and their changes, a re-map, rates and cost spreads:
    every writer moved each cube by the same amounts (the fixture did all of these)."""
    assert cube_differences(tracked) == {
        table: []
        for table in (
            "rollup_campaign_hour",
            "rollup_campaign_day",
            "rollup_campaign_country_hour",
            "rollup_campaign_country_day",
        )
    }


@pytest.mark.parametrize("source", ["auto", "raw", "history"])
def test_a_time_group_after_another_group_keys_and_sorts_rows_in_the_query_order(
    tracked, history_files, source
):
    """group_by ("campaign", "day"): each row's campaign and day are its own (the day was first in the
    sums' keys, which labelled a row's day as its campaign, or failed), sorted campaign first."""
    day_first = run_report(tracked, ReportQuery(group_by=("day", "campaign"), preset="all_time"))
    query = ReportQuery(group_by=("campaign", "day"), preset="all_time", source=source)
    report = run_report(tracked, query, history=history_files if source == "history" else None)
    assert sorted(rows_of(report), key=lambda row: (row["day"], row["campaign"])) == rows_of(day_first)
    days = [row["day"] for row in day_first.rows]
    order = [(row["campaign"], days.index(row["day"])) for row in report.rows]
    assert order == sorted(order) and len(order) > 4


def test_pieces_read_raw_rows_only_inside_an_hour():
    hour, day = 3_600_000, 86_400_000
    start, end = 10 * day + 90 * 60_000, 15 * day + 2 * hour + 60_000
    assert plan_pieces(start, end, use_days=True) == [
        ("raw", start, 10 * day + 2 * hour),
        ("rollup_hour", 10 * day + 2 * hour, 11 * day),
        ("rollup_day", 11 * day, 15 * day),
        ("rollup_hour", 15 * day, 15 * day + 2 * hour),
        ("raw", 15 * day + 2 * hour, end),
    ]
    assert plan_pieces(start, end, use_days=False)[1] == (
        "rollup_hour",
        10 * day + 2 * hour,
        15 * day + 2 * hour,
    )
    assert plan_pieces(5, 70, use_days=True) == [("raw", 5, 70)]


def test_days_are_local_days_across_dst(db):
    campaign = create_campaign(db, "Tz", "tz", offer_url="https://o.example/?s={subid}")
    # New York, 2026-11-01 is 25 hours long (fall back at 02:00 EDT -> 01:00 EST).
    moments = [
        "2026-11-01T03:59:59+00:00",  # 2026-10-31 23:59:59 EDT
        "2026-11-01T04:00:00+00:00",  # 2026-11-01 00:00 EDT
        "2026-11-02T04:59:59+00:00",  # 2026-11-01 23:59:59 EST
        "2026-11-02T05:00:00+00:00",  # 2026-11-02 00:00 EST
    ]
    for moment in moments:
        created = int(datetime.fromisoformat(moment).timestamp() * 1000)
        Click.create(
            subid=new_subid(created),
            created_at=created,
            campaign_id=campaign.id,
            ip="192.0.2.1",
            user_agent="ua",
            ua_hash=ua_hash("ua"),
        )
    run_deferred(db)  # No click was there at migration: the backfill is empty, the rollups go live.
    from models.reporting.rollups import RollupDelta

    delta = RollupDelta()  # These rows were put in directly, so add them as the flusher would.
    delta.add_clicks(
        [
            [r[0], r[1], r[2], None, None, "", "", 0, "", "", "", 0.0, 0, 0, 0, 0, *[""] * 30, *[""] * 9]
            for r in db.execute_sql("SELECT subid, created_at, campaign_id FROM click").fetchall()
        ]
    )
    delta.apply(db.connection())
    for source in ("auto", "raw"):
        report = run_report(
            db, ReportQuery(group_by=("day",), timezone="America/New_York", preset="all_time", source=source)
        )
        assert [(row["day"], row["clicks"]) for row in report.rows] == [
            ("2026-10-31", 1),
            ("2026-11-01", 2),
            ("2026-11-02", 1),
        ]
    one_day = run_report(db, ReportQuery(since="2026-11-01", until="2026-11-01", timezone="America/New_York"))
    assert one_day.total["clicks"] == 2
    assert one_day.end_ms - one_day.start_ms == 25 * 3_600_000


def test_rollups_are_used_only_once_the_backfill_is_done(db):
    # As 0004 leaves a SQLite database (PostgreSQL's baseline has nothing to backfill: done at once).
    db.connection().execute(
        "UPDATE deferred_step SET state = 'pending', finished_at = NULL WHERE name = ?", (ROLLUP_BACKFILL,)
    )
    assert not rollups_ready(db.connection())
    db.connection().execute("UPDATE deferred_step SET target = 0 WHERE name = ?", (ROLLUP_BACKFILL,))
    run_deferred(db)
    assert rollups_ready(db.connection())


def test_a_backfill_over_stored_clicks_and_conversions_equals_raw(db, tmp_path):
    """Clicks and conversions stored before the rollups existed are added by the deferred step, in chunks."""
    import models.migrations.deferred as deferred

    generate_clicks(db, 3000, 5, campaigns=3, seed=3, end_ms=END_MS)
    recorder = ConversionRecorder(db, park_ms=1000)
    for subid in [row[0] for row in db.execute_sql("SELECT subid FROM click LIMIT 200").fetchall()]:
        recorder.record(parse_postback({"subid": subid, "status": "sale", "payout": "3"}), RECEIVED)
    # As if all of it had been stored by the previous release: no rollups, backfill pending.
    from models.tables.dimensions import TABLES

    for table, _, _ in TABLES:
        db.execute_sql(f"DELETE FROM {table}")
    db.execute_sql("UPDATE meta SET value = 'backfill' WHERE key = 'rollup_conversions'")
    db.execute_sql(
        "UPDATE deferred_step SET state = 'pending', position = 0, done_units = 0, "
        "target = (SELECT MAX(id) FROM click), total_units = (SELECT COUNT(*) FROM click)"
    )
    original_chunk = deferred.CHUNK_IDS
    deferred.CHUNK_IDS = 700  # Several chunks, as on a big database.
    try:
        progress = []
        run_deferred(db, on_progress=lambda step: progress.append(step.done_units), pause=0)
    finally:
        deferred.CHUNK_IDS = original_chunk
    assert progress == [700, 1400, 2100, 2800, 3000]
    for group_by in (("campaign",), ("day", "country")):
        fast = run_report(db, ReportQuery(group_by=group_by, preset="all_time"))
        raw = run_report(db, ReportQuery(group_by=group_by, preset="all_time", source="raw"))
        assert "raw" not in fast.sources
        assert rows_of(fast) == rows_of(raw)
    assert run_report(db, ReportQuery(preset="all_time")).total["sales"] == 200


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (ReportQuery(group_by=("planet",)), "Cannot group"),
        (ReportQuery(group_by=("day", "hour")), "not both"),
        (ReportQuery(filters={"campaign": ("x",)}), "takes ids"),
        (ReportQuery(preset="someday"), "Unknown date preset"),
        (ReportQuery(preset="today", since="2026-01-01"), "not both"),
        (ReportQuery(since="2026-02-01", until="2026-01-01"), "empty"),
    ],
)
def test_bad_report_queries_are_refused_with_a_sentence(db, query, message):
    with pytest.raises(ReportError, match=message):
        run_report(db, query)


def test_every_rollup_writer_moves_the_smaller_cubes_with_the_detail_cube(db, settings, make_tracker, clock):
    """Checked after each: the flusher, generated clicks, a postback and its correction, a re-map, a cost
    spread, a currency relabel and a rate, pruning and address anonymizing (the last two leave them)."""
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.ops.privacy import anonymize_stored_clicks
    from models.ops.retention import prune_clicks
    from models.reporting.currency import relabel_report_currency

    def check(after: str) -> None:
        differences = cube_differences(db)
        assert all(rows == [] for rows in differences.values()), (after, differences)

    now_ms = int(clock() * 1000)
    generate_clicks(db, 600, 40, campaigns=2, seed=4, end_ms=now_ms - 3_600_000)
    run_deferred(db)
    check("generated clicks and the backfill")
    tracker = make_tracker(debounce_seconds=0)
    update_campaign(db, 1, cost_model="cpc", cost_value=0.02)
    tracker.refresh()
    campaign = tracker.campaign(tracker.campaigns_by_id[1].alias)
    for n in range(20):
        tracker.track(campaign, Visit(ip=f"198.51.100.{n}", user_agent=f"Mozilla/5.0 (X11) Firefox/{n}"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    check("the flusher")
    recorder = ConversionRecorder(db, park_ms=1000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id DESC LIMIT 9").fetchall()]
    for n, subid in enumerate(subids):
        params = {"subid": subid, "status": "lead", "payout": "4.5", "currency": ("EUR", "USD", "GBP")[n % 3]}
        recorder.record(parse_postback(params), RECEIVED)
    check("new conversions")
    recorder.record(parse_postback({"subid": subids[0], "status": "sale", "payout": "9"}), RECEIVED)
    recorder.record(parse_postback({"subid": subids[1], "status": "hold", "payout": "2"}), RECEIVED)
    check("a changed conversion")
    map_status(db, "hold", "rejected")
    check("a status re-map")
    spread_cost(db, 1, now_ms - 10 * 86_400_000, now_ms + 60_000, 77.7)
    check("a cost spread")
    assert relabel_report_currency(db, "EUR") > 0
    check("a relabel of the report currency")
    set_rates(db, {"GBP": 1.17})
    check("a rate")
    assert prune_clicks(db, 30 * 86_400_000, global_uniqueness_hours=24, now_ms=now_ms) > 0
    check("pruning")
    assert anonymize_stored_clicks(db) > 0
    check("anonymizing stored addresses")


# Referrers that urlsplit() reads in every way it can: case, ports, user info, IPv6 and broken
# brackets, no "//", tabs and line breaks inside, leading blanks, NFKC-suspect hosts, www. alone.
TRICKY_REFERRERS = [
    "",
    "https://www.Example.COM/path?q=1",
    "http://example.com:8080/",
    "//cdn.example.org/x",
    "HTTPS://WWW.EXAMPLE.COM",
    "ftp://user:pw@files.example.net/a",
    "example.com/no-scheme",
    "https://user@www.host.example@evil.example/",
    "\t https://spaced.example/",
    "https://ex\tam\nple.com/",
    "https://[2001:db8::1]:443/",
    "https://[fe80::1%25eTh0]/",
    "https://[broken/",
    "https://broken]/",
    "https://[1.2.3.4]/",
    "https://[v1.fe]/",
    "https://[vz]/",
    "android-app://com.google.android.gm/",
    "https://www./",
    "https://www.",
    "https:/one-slash.example/a/b",
    "mailto:someone@example.com",
    "https://example.com?x=/y",
    "https://example.com#frag/z",
    "https://ünïcode.example/",
    "https://exam\u2100ple.com/",
    "ht?tp://x/y",
    "https://www.WWW.example/",
    "https://a:b/c",
    "https://Café.example:80/",
    "1http://digit.example/",
    "/\t/tabbed.example/",
    "https:",
    "//",
    "?//q/",
]


def test_referrer_domains_group_and_filter_as_referrer_domain_says(db):
    from collections import Counter

    from models.store.reports import referrer_domain
    from models.tables.conversion import Conversion

    campaign = create_campaign(db, "Ref", "ref", offer_url="https://o.example/?s={subid}")
    created = END_MS - 3_600_000
    for n, referrer in enumerate(TRICKY_REFERRERS * 2):
        Click.create(
            subid=new_subid(created + n),
            created_at=created + n,
            campaign_id=campaign.id,
            ip="192.0.2.1",
            user_agent="ua",
            ua_hash=ua_hash("ua"),
            referrer=referrer,
        )
    expected = Counter(referrer_domain(referrer) for referrer in TRICKY_REFERRERS * 2)
    # A sale in a currency with no rate, on every click: the unconverted note filters by domain too.
    for click_id, subid, created_at in Click.select(Click.id, Click.subid, Click.created_at).tuples():
        Conversion.create(
            subid=subid,
            status="sale",
            original_status="sale",
            payout=2.5,
            currency="XAU",
            click_id=click_id,
            campaign_id=campaign.id,
            click_created_at=created_at,
            created_at=created_at,
            updated_at=created_at,
        )
    report = run_report(db, ReportQuery(group_by=("referrer_domain",), preset="all_time"), now=END_MS / 1000)
    assert {row["referrer_domain"]: row["clicks"] for row in report.rows} == expected
    assert [row["referrer_domain"] for row in report.rows] == sorted(expected)
    for domain in ("example.com", "", "2001:db8::1", "café.example"):
        filtered = ReportQuery(filters={"referrer_domain": (domain,)}, preset="all_time")
        filtered_report = run_report(db, filtered, now=END_MS / 1000)
        assert filtered_report.total["clicks"] == expected[domain], domain
        assert filtered_report.unconverted == [
            {"currency": "XAU", "conversions": expected[domain], "payout": 2.5 * expected[domain]}
        ]
    by_day = ReportQuery(
        group_by=("day", "referrer_domain"), filters={"referrer_domain": ("example.com",)}, preset="all_time"
    )
    assert [
        (row["referrer_domain"], row["clicks"]) for row in run_report(db, by_day, now=END_MS / 1000).rows
    ] == [("example.com", expected["example.com"])]
