"""meta on SQLite: what differs from PostgreSQL (models/store/postgres/meta.py); the rest is
models/store/meta.py's."""

from __future__ import annotations

from models.store import meta as base


class MetaStore(base.MetaStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_BUMP_CONFIG_VERSION = (
        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'config_version'"
    )
    SQL_MOVE_PRUNED_BEFORE = (
        "INSERT INTO meta (key, value) VALUES ('pruned_before', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))"
    )
