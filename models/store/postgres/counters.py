"""counters: the statements of models/store/counters.py mean the same on PostgreSQL (its
upsert names the stored row's column, `click_counter.clicks`, as PostgreSQL requires)."""

from __future__ import annotations

from models.store import counters as base


class CounterStore(base.CounterStore):
    __slots__ = ()
    dialect = "postgres"
