"""meta: the key/value rows on PostgreSQL (models/store/meta.py holds what both share).

What differs: `value` is TEXT and PostgreSQL does not add 1 to text or store a number in it without
being told, so the counters are cast to BIGINT and back; SQLite's two-argument MAX is GREATEST, and the
upsert names the table's own column (`meta.value`) beside `excluded.value`.
"""

from __future__ import annotations

from models.store import meta as base


class MetaStore(base.MetaStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_BUMP_CONFIG_VERSION = (
        "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) WHERE key = 'config_version'"
    )
    SQL_MOVE_PRUNED_BEFORE = (
        "INSERT INTO meta (key, value) VALUES ('pruned_before', ?) ON CONFLICT (key) DO UPDATE SET value = "
        "CAST(GREATEST(CAST(meta.value AS BIGINT), CAST(excluded.value AS BIGINT)) AS TEXT)"
    )
