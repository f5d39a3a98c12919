"""bandit on SQLite: the statements of models/store/bandit.py mean the same on both dialects."""

from __future__ import annotations

from models.store import bandit as base


class BanditStore(base.BanditStore):
    __slots__ = ()
    dialect = "sqlite"
