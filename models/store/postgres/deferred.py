"""deferred on PostgreSQL: SQLite's statements mean the same.

deferred_step keeps SQLite's implicit `rowid` as a real column (models/store/postgres/schema.py), so
`ORDER BY rowid` runs the steps in the order the migrations registered them on both dialects.
"""

from __future__ import annotations

from models.store import deferred as base


class DeferredStepStore(base.DeferredStepStore):
    __slots__ = ()
    dialect = "postgres"
