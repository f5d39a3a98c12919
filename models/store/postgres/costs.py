"""costs: SQLite's statements (models/store/sqlite/costs.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import costs as sqlite


class CostStore(sqlite.CostStore):
    __slots__ = ()
    dialect = "postgres"
