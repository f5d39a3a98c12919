"""conversions on SQLite: what differs from PostgreSQL (models/store/postgres/conversions.py); the rest is
models/store/conversions.py's."""

from __future__ import annotations

from models.store import conversions as base


class ConversionStore(base.ConversionStore):
    __slots__ = ()
    dialect = "sqlite"
    # By tid: the one recorded without a tid ('') first, straight from the (subid, tid) index.
    SQL_CONVERSIONS_OF_CLICK = base.SELECT_CONVERSION + " WHERE subid = ? ORDER BY tid LIMIT 2"

    def _inserted_id(self, sql: str, params: tuple) -> int:
        """Run an INSERT; the new row's id."""
        return self.conn.execute(sql, params).lastrowid


class PostbackLogStore(base.PostbackLogStore):
    __slots__ = ()
    dialect = "sqlite"
    # The partial index (verdict = 'parked') needs the literal: a bound parameter would scan the log.
    SQL_COUNT_PARKED = (
        "SELECT COUNT(*) FROM postback_log INDEXED BY postback_log_parked WHERE verdict = 'parked'"
    )
    SQL_PARKED_ANY = (
        "SELECT 1 FROM postback_log INDEXED BY postback_log_parked WHERE verdict = 'parked' LIMIT 1"
    )
    SQL_PARKED_LANDED = """
SELECT p.id, p.params, p.received_at FROM postback_log AS p INDEXED BY postback_log_parked
JOIN click AS c ON c.subid = p.subid
WHERE p.verdict = 'parked' ORDER BY p.id LIMIT 500
"""
