"""counters on SQLite: what differs from PostgreSQL (models/store/postgres/counters.py); the rest is
models/store/counters.py's."""

from __future__ import annotations

from models.store import counters as base


class CounterStore(base.CounterStore):
    __slots__ = ()
    dialect = "sqlite"
