"""history on PostgreSQL: what differs from SQLite (models/store/sqlite/history.py); the rest is
models/store/history.py's.

Ids are not handed out in commit order here (several flushers, READ COMMITTED): inserters and
mutations take the history's advisory lock shared in their transaction (`guard`), the appender takes
it exclusive to read max(id) and set the target, so no id at or below the watermark is uncommitted.
"""

from __future__ import annotations

from models.store import history as base


class HistoryStore(base.HistoryStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_ROWS_OF = base._SELECT_ROWS + " WHERE id = ANY(CAST(? AS BIGINT[]))"
    SQL_CONVERSION_ROWS_OF = base._SELECT_CONVERSIONS + " WHERE id = ANY(CAST(? AS BIGINT[]))"
    SQL_LOCK = f"SELECT pg_advisory_xact_lock({base.HISTORY_LOCK})"
    SQL_GUARD = f"SELECT pg_advisory_xact_lock_shared({base.HISTORY_LOCK})"

    def rows_of(self, click_ids: list[int]) -> list[tuple]:
        if not click_ids:
            return []
        return self.conn.execute(self.SQL_ROWS_OF, (click_ids,)).fetchall()

    def conversion_rows_of(self, conversion_ids: list[int]) -> list[tuple]:
        if not conversion_ids:
            return []
        return self.conn.execute(self.SQL_CONVERSION_ROWS_OF, (conversion_ids,)).fetchall()

    def lock_watermark(self) -> None:
        self.conn.execute(self.SQL_LOCK).close()

    def guard(self) -> None:
        self.conn.execute(self.SQL_GUARD).close()
