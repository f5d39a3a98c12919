"""accounts: SQLite's statements (models/store/sqlite/accounts.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import accounts as sqlite


class AccountStore(sqlite.AccountStore):
    __slots__ = ()
    dialect = "postgres"
