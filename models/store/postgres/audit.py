"""audit: SQLite's statements (models/store/sqlite/audit.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import audit as sqlite


class AuditStore(sqlite.AuditStore):
    __slots__ = ()
    dialect = "postgres"
