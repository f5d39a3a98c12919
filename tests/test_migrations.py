"""Migrations on a database that already holds clicks: 0002 keeps them and backfills the cap counters."""

from __future__ import annotations

import importlib
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from models.migrations.runner import migrate, migration_status
from models.store.database import db as database
from models.store.database import open_database
from models.store.sqlite.migrations import MigrationHistory

DAY_MS = 86_400_000


def test_0002_backfills_click_counters_from_existing_clicks(settings):
    open_database(settings.database_location, autocheckpoint=True)
    try:
        initial = importlib.import_module("models.migrations.0001_initial")
        with database.atomic():
            database.execute_sql(MigrationHistory.SQL_CREATE_HISTORY)
            initial.apply(database)
            database.execute_sql(MigrationHistory.SQL_RECORD, ("0001_initial", 0))
        midnight = int(datetime(2027, 1, 15, tzinfo=UTC).timestamp() * 1000)
        rows = [
            # (subid, created_at, stream_id, offer_id)
            ("a", midnight - 1, 1, 10),
            ("b", midnight, 1, 10),
            ("c", midnight + DAY_MS - 1, 1, 11),
            ("d", midnight + 5, 2, None),
            ("e", midnight + 6, None, None),
        ]
        for subid, created_at, stream_id, offer_id in rows:
            database.execute_sql(
                "INSERT INTO click (subid, created_at, campaign_id, stream_id, offer_id, ip, user_agent, "
                "ua_hash) VALUES (?, ?, 1, ?, ?, '192.0.2.1', 'UA', 1)",
                (subid, created_at, stream_id, offer_id),
            )
        assert migrate(database)[:3] == ["0002_routing", "0003_conversions", "0004_rollups"]
        counters = database.execute_sql(
            "SELECT scope, ref_id, day, clicks FROM click_counter ORDER BY scope, ref_id, day"
        ).fetchall()
        assert counters == [
            ("offer", 10, 20270114, 1),
            ("offer", 10, 20270115, 1),
            ("offer", 11, 20270115, 1),
            ("stream", 1, 20270114, 1),
            ("stream", 1, 20270115, 2),
            ("stream", 2, 20270115, 1),
        ]
        kept = database.execute_sql("SELECT subid, country, route FROM click ORDER BY subid").fetchall()
        assert kept == [(subid, "", "") for subid, *_ in rows]
        assert all(state.applied_at is not None for state in migration_status(database))
    finally:
        database.close()


def test_0005_fills_visitor_keys_in_deferred_steps_while_uniqueness_stays_exact(settings, clock, monkeypatch):
    from models.clicks.record import visitor_key
    from models.clicks.tracker import ClickTracker
    from models.clicks.visit import Visit
    from models.migrations.deferred import list_steps, run_chunk, run_deferred

    DROP_GRACE_MS = importlib.import_module("models.migrations.0005_visitor_key").DROP_GRACE_MS
    from workers.bench.generate import generate_clicks

    open_database(settings.database_location, autocheckpoint=True)
    trackers = []

    def tracker() -> ClickTracker:
        made = ClickTracker(
            database,
            spool_dir=settings.spool_dir,
            segment_bytes=settings.spool_segment_bytes,
            uniqueness_hours=24,
            debounce_seconds=0,
            clock=clock,
        )
        trackers.append(made)
        return made

    def indexes() -> set[str]:
        rows = database.execute_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'click'"
        )
        return {name for (name,) in rows.fetchall()}

    try:
        migrate(database, up_to="0004_rollups")
        now_ms = int(clock() * 1000)
        assert generate_clicks(database, 3000, 0.5, campaigns=2, seed=5, end_ms=now_ms) == 3000
        run_deferred(database, pause=0)  # 0004's rollup step: the database as the last release left it.
        # A visitor of the stored clicks: ip, UA and campaign of the newest click.
        ip, user_agent, ua, campaign_id = database.execute_sql(
            "SELECT ip, user_agent, ua_hash, campaign_id FROM click ORDER BY created_at DESC LIMIT 1"
        ).fetchone()

        assert migrate(database, up_to="0005_visitor_key") == ["0005_visitor_key"]
        steps = [(step.name, step.state, step.total_units) for step in list_steps(database)]
        assert steps == [
            ("rollup_backfill", "done", 0),
            ("visitor_key_backfill", "pending", 3000),
            ("visitor_key_index", "pending", 1),
            ("click_visitor_drop", "pending", 1),
        ]
        migrate(
            database
        )  # The rest of an upgrade from 0004 (trackers need 0012): 0005's steps still pending.
        early = tracker()
        assert not early.probe.by_key
        campaign = early.campaigns_by_id[campaign_id]

        def is_unique(worker: ClickTracker) -> bool:
            return worker.track(campaign, Visit(ip=ip, user_agent=user_agent)).is_unique_global

        assert is_unique(early) is False  # Its clicks have no key yet: the old index finds them.

        monkeypatch.setattr("models.migrations.deferred.CHUNK_IDS", 1000)
        third = run_chunk(database, "visitor_key_backfill")
        assert (third.state, third.done_units) == ("running", 1000)
        assert is_unique(early) is False and is_unique(tracker()) is False
        assert run_chunk(database, "visitor_key_backfill").state == "running"
        assert run_chunk(database, "visitor_key_backfill").state == "done"
        assert database.execute_sql("SELECT COUNT(*) FROM click WHERE visitor_key IS NULL").fetchone() == (0,)
        sample = database.execute_sql("SELECT ip, ua_hash, visitor_key FROM click LIMIT 50").fetchall()
        assert all(key == visitor_key(row_ip, row_ua) for row_ip, row_ua, key in sample)

        # A click landed by a flusher of the previous release after the migration: no key.
        database.execute_sql(
            "INSERT INTO click (subid, created_at, campaign_id, ip, user_agent, ua_hash) "
            "VALUES ('late', ?, ?, '198.51.100.9', 'late UA', 7)",
            (now_ms, campaign_id),
        )
        switched = run_chunk(database, "visitor_key_index", clock=clock)
        assert switched.state == "done"
        assert "click_visitor_key" in indexes() and "click_visitor" in indexes()
        assert database.execute_sql("SELECT visitor_key FROM click WHERE subid = 'late'").fetchone() == (
            visitor_key("198.51.100.9", 7),
        )
        clock.advance(1.5)
        early.refresh()  # The switch bumped config_version: a running worker moves to the new index.
        assert early.probe.by_key
        assert is_unique(early) is False and is_unique(tracker()) is False

        # The old index stays until no worker can still be probing it.
        assert run_deferred(database, pause=0) == []
        assert "click_visitor" in indexes()
        clock.advance(DROP_GRACE_MS / 1000)
        dropped = run_chunk(database, "click_visitor_drop", clock=clock)
        assert dropped.state == "done"
        assert "click_visitor" not in indexes()
        assert is_unique(early) is False
        newcomer = Visit(ip="203.0.113.250", user_agent="never seen")
        assert early.track(campaign, newcomer).is_unique_global is True
    finally:
        for made in trackers:
            made.close()
        database.close()


# SQLite's 0004 and 0005 on an empty file (PostgreSQL's baseline: the db tests below).
@pytest.mark.sqlite_only
def test_0005_on_a_new_database_needs_no_deferred_step(db):
    from models.migrations.deferred import pending_steps
    from models.store.hotpath import visitor_probe

    assert [step.name for step in pending_steps(db)] == ["rollup_backfill"]  # 0004's: instant when empty.
    assert visitor_probe(db.connection()).by_key
    names = {
        row[0] for row in db.execute_sql("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    }
    assert "click_visitor_key" in names and "click_visitor" not in names


def test_0011_fills_the_country_cube_from_the_detail_cube_and_reports_keep_their_numbers(settings):
    from test_reports import cube_differences, rows_of

    from models.migrations.deferred import run_deferred
    from models.reporting.reports import ReportQuery, run_report
    from models.reporting.rollups import RollupDelta, click_key, conversion_metrics, present_tables
    from workers.bench.generate import generate_clicks

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0010_user_timezone")
        generate_clicks(database, 2000, 6, campaigns=3, seed=8, end_ms=1_800_000_000_000)
        run_deferred(database, pause=0)
        # Sales as the previous release recorded them (its rollup tables only).
        delta = RollupDelta(present_tables(database.connection()))
        for click_id, subid, campaign_id, created_at in database.execute_sql(
            "SELECT id, subid, campaign_id, created_at FROM click LIMIT 150"
        ).fetchall():
            database.execute_sql(
                "INSERT INTO conversion (subid, status, original_status, payout, report_payout, currency, "
                "click_id, campaign_id, click_created_at, created_at, updated_at) "
                "VALUES (?, 'sale', 'sale', 2.5, 2.5, 'USD', ?, ?, ?, ?, ?)",
                (subid, click_id, campaign_id, created_at, created_at, created_at),
            )
            key = click_key(database.connection(), click_id)
            delta.add_conversion(key, conversion_metrics("sale", 2.5, 0.0))
        delta.apply(database.connection())
        queries = [
            ReportQuery(group_by=group_by, preset="all_time", timezone=zone)
            for group_by in (("country",), ("country", "offer"), ("day", "campaign", "country"))
            for zone in ("UTC", "Europe/Berlin")
        ]
        # The code is this release's, which would read the new cube: the numbers from raw clicks.
        before = [rows_of(run_report(database, replace(query, source="raw"))) for query in queries]

        assert migrate(database, up_to="0011_country_rollups") == ["0011_country_rollups"]
        assert all(rows == [] for rows in cube_differences(database).values())
        assert [rows_of(run_report(database, query)) for query in queries] == before
        assert run_report(database, queries[0]).sources == ["rollup_campaign_country_day"]
        assert run_report(database, queries[0]).total["sales"] == 150
    finally:
        database.close()


def test_0011_during_the_rollup_backfill_leaves_the_rest_to_it(settings, monkeypatch):
    """Clicks stored before the rollups existed: 0011 copies what 0004's backfill has added so far (a
    chunk), and the backfill adds the rest to the country cube too."""
    from test_reports import cube_differences, rows_of

    from models.migrations.deferred import run_chunk, run_deferred
    from models.reporting.reports import ReportQuery, run_report
    from workers.bench.generate import generate_clicks

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0003_conversions")
        generate_clicks(database, 1500, 3, campaigns=2, seed=2, end_ms=1_800_000_000_000)
        migrate(database, up_to="0004_rollups")
        monkeypatch.setattr("models.migrations.deferred.CHUNK_IDS", 600)
        assert run_chunk(database, "rollup_backfill").state == "running"  # A part, before 0011.
        migrate(database)
        assert all(rows == [] for rows in cube_differences(database).values())
        run_deferred(database, pause=0)
        assert all(rows == [] for rows in cube_differences(database).values())
        query = ReportQuery(group_by=("country", "offer"), preset="all_time")
        fast = run_report(database, query)
        assert fast.sources == ["rollup_campaign_country_day"] and fast.total["clicks"] == 1500
        raw = run_report(
            database, ReportQuery(group_by=("country", "offer"), preset="all_time", source="raw")
        )
        assert rows_of(fast) == rows_of(raw)
    finally:
        database.close()


def test_db_migrate_status_and_run_deferred_on_an_empty_database(backend, env, request):
    """What an install sees from `lanner db` on either backend: every migration applied once (on PostgreSQL
    as the baseline that stands for them), then nothing pending, the rollup backfill done."""
    import json

    from conftest import run_lanner

    from models.migrations.runner import migration_names

    if backend == "postgresql":  # The env's own database is migrated already: take an empty one.
        env = {**env, "LANNER_DATABASE_URL": request.getfixturevalue("postgres_url")}
    names = migration_names()
    before = json.loads(run_lanner(env, "db", "status", "--json").stdout)
    assert [(row["migration"], row["applied_at"]) for row in before] == [(name, "pending") for name in names]
    applied = run_lanner(env, "db", "migrate").stdout
    assert f"Applied {len(names)} migration(s): {', '.join(names)}" in applied
    assert "up to date" in run_lanner(env, "db", "migrate").stdout
    run_lanner(env, "db", "run-deferred")
    assert "No deferred steps pending." in run_lanner(env, "db", "run-deferred").stdout
    status = json.loads(run_lanner(env, "db", "status", "--json").stdout)
    assert [row["migration"] for row in status] == [*names, "rollup_backfill"]
    assert all(isinstance(row["applied_at"], int) for row in status[: len(names)])
    assert status[-1]["deferred"].startswith("done 100.0%")


def test_db_migrate_to_a_migration_inside_postgresqls_baseline_applies_and_names_the_whole_baseline(
    postgres_url, env
):
    from conftest import run_lanner

    from models.migrations.runner import migration_names
    from models.store.postgres.migrations import MigrationHistory as PostgresHistory

    env = {**env, "LANNER_DATABASE_URL": postgres_url}
    baseline = [name for name in migration_names() if name <= PostgresHistory.baseline_through]
    applied = run_lanner(env, "db", "migrate", "--to", "0004_rollups").stdout
    assert f"Applied {len(baseline)} migration(s): {', '.join(baseline)}" in applied
    later = [name for name in migration_names() if name not in baseline]  # Their apply_postgres steps.
    again = run_lanner(env, "db", "migrate").stdout
    assert (
        f"Applied {len(later)} migration(s): {', '.join(later)}" in again if later else "up to date" in again
    )


def test_0019_gives_every_existing_campaign_its_own_click_api_token(backend, env, request):
    from models.tables.campaign import Campaign
    from settings import load_settings
    from workers.bench.generate import generate_clicks

    if backend == "postgresql":  # The env's own database is migrated already: take an empty one.
        env = {**env, "LANNER_DATABASE_URL": request.getfixturevalue("postgres_url")}
    open_database(load_settings(env).database_location, autocheckpoint=True)
    try:
        from models.migrations.runner import migration_names

        names = migration_names()
        migrate(database, up_to=names[names.index("0019_campaign_tokens") - 1])
        generate_clicks(database, 30, 1, campaigns=3, seed=4)
        assert migrate(database, up_to="0019_campaign_tokens") == ["0019_campaign_tokens"]
        tokens = [campaign.token for campaign in Campaign.select().order_by(Campaign.id)]
        assert len(tokens) == 3 and len(set(tokens)) == 3
        assert all(len(token) == 32 and int(token, 16) >= 0 for token in tokens)
    finally:
        database.close()


def test_0020_starts_the_new_login_throttle_empty_and_it_counts_from_there(backend, env, request):
    from models.accounts.logins import LoginRefused, LoginThrottled, log_in
    from models.accounts.users import add_user
    from models.store.rows import fetch_one
    from settings import load_settings

    if backend == "postgresql":  # The env's own database is migrated already: take an empty one.
        env = {**env, "LANNER_DATABASE_URL": request.getfixturevalue("postgres_url")}
    open_database(load_settings(env).database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0019_campaign_tokens")
        add_user(database, "anna", "admin", "correct horse battery")
        # 0009's rows: a name locked from everywhere.
        for n in range(5):
            database.execute_sql(
                f"INSERT INTO login_failure (subject, failed_at) VALUES ({database.param}, {database.param})",
                ("user:anna", 1_800_000_000_000 + n),
            ).close()
        assert migrate(database, up_to="0020_login_lockout") == ["0020_login_lockout"]
        assert fetch_one(database.connection(), "SELECT COUNT(*) FROM login_failure")[0] == 0
        clock = lambda: 1_800_000_001.0  # noqa: E731
        assert log_in(database, "anna", "correct horse battery", "192.0.2.1", clock=clock).name == "anna"
        for _ in range(5):
            with pytest.raises(LoginRefused):
                log_in(database, "anna", "wrong password!", "192.0.2.1", clock=clock)
        with pytest.raises(LoginThrottled):
            log_in(database, "anna", "correct horse battery", "192.0.2.1", clock=clock)
        assert log_in(database, "anna", "correct horse battery", "192.0.2.2", clock=clock).name == "anna"
    finally:
        database.close()


def test_0036_keeps_every_rollup_and_counter_row_as_partial_0_and_reports_their_numbers(
    backend, env, request
):
    """The rows before 0036 become the partial 0 of their keys: the same sums, the same reports, and the
    tables' other indexes built again on SQLite (which rebuilds the tables)."""
    from test_reports import cube_differences, rows_of

    from models.migrations.deferred import run_deferred
    from models.migrations.runner import migration_names
    from models.reporting.reports import ReportQuery, run_report
    from settings import load_settings
    from workers.bench.generate import generate_clicks

    if backend == "postgresql":  # The env's own database is migrated already: take an empty one.
        env = {**env, "LANNER_DATABASE_URL": request.getfixturevalue("postgres_url")}
    open_database(load_settings(env).database_location, autocheckpoint=True)
    try:
        names = migration_names()
        migrate(database, up_to=names[names.index("0036_partial_rollups") - 1])
        generate_clicks(database, 400, 3, campaigns=2, seed=6, end_ms=1_800_000_000_000)
        run_deferred(database, pause=0)
        tables = ("click_counter", "rollup_hour", "rollup_day", "rollup_campaign_day")
        sums = {
            table: database.execute_sql(f"SELECT COUNT(*), SUM(clicks) FROM {table}").fetchone()
            for table in tables
        }
        queries = [
            ReportQuery(group_by=group_by, preset="all_time") for group_by in (("day", "offer"), ("os",))
        ]
        before = [rows_of(run_report(database, query)) for query in queries]
        assert sums["rollup_hour"][1] == 400 and all(before)

        assert migrate(database, up_to="0036_partial_rollups") == ["0036_partial_rollups"]
        for table in tables:
            assert (
                database.execute_sql(f"SELECT COUNT(*), SUM(clicks) FROM {table}").fetchone() == sums[table]
            )
            assert database.execute_sql(f"SELECT DISTINCT node FROM {table}").fetchall() == [(0,)]
        assert all(rows == [] for rows in cube_differences(database).values())
        assert [rows_of(run_report(database, query)) for query in queries] == before
        if backend == "sqlite":
            indexes = database.execute_sql("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
            assert {("rollup_hour_campaign_period",), ("rollup_day_campaign_period",)} <= set(indexes)
    finally:
        database.close()
