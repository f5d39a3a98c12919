"""rollups: SQLite's statements (models/store/sqlite/rollups.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import rollups as sqlite


class RollupStore(sqlite.RollupStore):
    __slots__ = ()
    dialect = "postgres"
