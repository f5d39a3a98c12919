"""retention: SQLite's statements (models/store/sqlite/retention.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import retention as sqlite


class RetentionStore(sqlite.RetentionStore):
    __slots__ = ()
    dialect = "postgres"
