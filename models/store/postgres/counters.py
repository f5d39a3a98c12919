"""counters: the cap counters on PostgreSQL (models/store/sqlite/counters.py is the model).

What differs: an upsert's DO UPDATE names the updated table's column as `click_counter.clicks`
(PostgreSQL finds a bare `clicks` ambiguous beside `excluded.clicks`; SQLite takes it as the table's).
"""

from __future__ import annotations

from models.store.sqlite import counters as sqlite


class CounterStore(sqlite.CounterStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_ADD = """
INSERT INTO click_counter (scope, ref_id, day, clicks) VALUES (?, ?, ?, ?)
ON CONFLICT (scope, ref_id, day) DO UPDATE SET clicks = click_counter.clicks + excluded.clicks
"""
