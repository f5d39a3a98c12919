"""reports: SQLite's statements (models/store/sqlite/reports.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import reports as sqlite


class ReportStore(sqlite.ReportStore):
    __slots__ = ()
    dialect = "postgres"
