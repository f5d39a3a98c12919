"""maintenance: SQLite's statements (models/store/sqlite/maintenance.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import maintenance as sqlite


class MaintenanceStore(sqlite.MaintenanceStore):
    __slots__ = ()
    dialect = "postgres"
