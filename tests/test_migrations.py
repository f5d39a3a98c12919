"""Migrations on a database that already holds clicks: 0002 keeps them and backfills the cap counters."""

from __future__ import annotations

import importlib
from datetime import datetime, timezone

from models import db as database
from models import open_database
from models.migrate import SQL_CREATE_HISTORY, SQL_RECORD, migrate, migration_status

DAY_MS = 86_400_000


def test_0002_backfills_click_counters_from_existing_clicks(settings):
    open_database(settings.database_path, autocheckpoint=True)
    try:
        initial = importlib.import_module("models.migrations.0001_initial")
        with database.atomic():
            database.execute_sql(SQL_CREATE_HISTORY)
            initial.apply(database)
            database.execute_sql(SQL_RECORD, ("0001_initial", 0))
        midnight = int(datetime(2027, 1, 15, tzinfo=timezone.utc).timestamp() * 1000)
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
        assert migrate(database) == ["0002_routing", "0003_conversions", "0004_rollups"]
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
