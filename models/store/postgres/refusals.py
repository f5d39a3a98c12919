"""refusals: SQLite's statement (models/store/sqlite/refusals.py) means the same on PostgreSQL: its
parameters are numbered (`?N`, which the connection translates; it does not translate `:name`) and
its DO UPDATE qualifies the stored row's columns, as PostgreSQL requires.
"""

from __future__ import annotations

from models.store.sqlite import refusals as sqlite


class RefusalStore(sqlite.RefusalStore):
    __slots__ = ()
    dialect = "postgres"
