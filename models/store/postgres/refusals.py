"""refusals: SQLite's statements (models/store/sqlite/refusals.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import refusals as sqlite


class RefusalStore(sqlite.RefusalStore):
    __slots__ = ()
    dialect = "postgres"
