"""currency: SQLite's statements (models/store/sqlite/currency.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import currency as sqlite


class CurrencyStore(sqlite.CurrencyStore):
    __slots__ = ()
    dialect = "postgres"
