"""The measuring scripts' samples on SQLite (models/store/samples.py: spelled alike)."""

from __future__ import annotations

from models.store import samples as base


class SampleStore(base.SampleStore):
    __slots__ = ()
    dialect = "sqlite"
