"""meta: SQLite's statements (models/store/sqlite/meta.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import meta as sqlite


class MetaStore(sqlite.MetaStore):
    __slots__ = ()
    dialect = "postgres"
