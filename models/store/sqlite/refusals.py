"""refusals on SQLite: what differs from PostgreSQL (models/store/postgres/refusals.py); the rest is
models/store/refusals.py's."""

from __future__ import annotations

from models.store import refusals as base


class RefusalStore(base.RefusalStore):
    __slots__ = ()
    dialect = "sqlite"
