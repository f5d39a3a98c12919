"""conversions: SQLite's statements (models/store/sqlite/conversions.py) on PostgreSQL.

What differs (so far: the parked postbacks the spool flusher settles and `lanner status` counts): no
`INDEXED BY` (PostgreSQL has no index hints; its planner picks postback_log_parked, a partial index).
"""

from __future__ import annotations

from models.store.sqlite import conversions as sqlite


class ConversionStore(sqlite.ConversionStore):
    __slots__ = ()
    dialect = "postgres"


class PostbackLogStore(sqlite.PostbackLogStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_COUNT_PARKED = "SELECT COUNT(*) FROM postback_log WHERE verdict = 'parked'"
    SQL_PARKED_ANY = "SELECT 1 FROM postback_log WHERE verdict = 'parked' LIMIT 1"
    SQL_PARKED_LANDED = """
SELECT p.id, p.params, p.received_at FROM postback_log AS p
JOIN click AS c ON c.subid = p.subid
WHERE p.verdict = 'parked' ORDER BY p.id LIMIT 500
"""
