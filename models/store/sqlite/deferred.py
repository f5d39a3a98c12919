"""deferred on SQLite: what differs from PostgreSQL (models/store/postgres/deferred.py); the rest is
models/store/deferred.py's."""

from __future__ import annotations

from models.store import deferred as base


class DeferredStepStore(base.DeferredStepStore):
    __slots__ = ()
    dialect = "sqlite"
