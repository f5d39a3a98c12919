"""clicks: SQLite's statements (models/store/sqlite/clicks.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import clicks as sqlite


class ClickStore(sqlite.ClickStore):
    __slots__ = ()
    dialect = "postgres"
