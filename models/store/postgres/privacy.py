"""privacy: SQLite's statements (models/store/sqlite/privacy.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import privacy as sqlite


class PrivacyStore(sqlite.PrivacyStore):
    __slots__ = ()
    dialect = "postgres"
