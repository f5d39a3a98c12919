"""conversions: SQLite's statements (models/store/sqlite/conversions.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import conversions as sqlite


class ConversionStore(sqlite.ConversionStore):
    __slots__ = ()
    dialect = "postgres"


class PostbackLogStore(sqlite.PostbackLogStore):
    __slots__ = ()
    dialect = "postgres"
