"""conversions on PostgreSQL: what differs from SQLite (models/store/sqlite/conversions.py);
the rest is models/store/conversions.py's.

- Concurrent postbacks for one click are serialised by locking the click's row (`FOR NO KEY UPDATE`
  in SQL_FIND_CLICK, the first statement of every postback's transaction). SQLite gets this from
  BEGIN IMMEDIATE, which takes the whole database; PostgreSQL's BEGIN takes nothing, so two identical
  postbacks would both find no conversion and both insert (the second failing on UNIQUE (subid, tid)),
  or both move one conversion from lead to sale and count it twice in the rollups. Under READ
  COMMITTED the second waits for the first to commit, and its next statements see the first's row: it
  is a duplicate, as on SQLite. The lock is the weak one an UPDATE of non-key columns takes
  (set_sub_id takes it anyway), so it blocks no insert or key-share lock on the click.
- A new row's id comes back through `RETURNING id`: psycopg has no `cursor.lastrowid`.
- A click's conversions sort by tid in byte order (`COLLATE "C"`), the order of SQLite's index, so
  the one without a tid ('') comes first under any database collation.
- Settling parked postbacks locks the log rows it takes (`FOR UPDATE OF p SKIP LOCKED`): a flush by
  hand while the worker's flusher settles (SQLite: one after the other) takes the rows the other has
  not, instead of applying the same postbacks again and overwriting their verdicts with "duplicate".
- SQLite's `INDEXED BY postback_log_parked` is dropped: PostgreSQL's planner uses the partial index
  for the literal `verdict = 'parked'` by itself.
"""

from __future__ import annotations

from models.store import conversions as base
from models.store.rows import fetch_single


class ConversionStore(base.ConversionStore):
    """The conversions of one PostgreSQL connection; writes join the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

    SQL_FIND_CLICK = base.ConversionStore.SQL_FIND_CLICK + " FOR NO KEY UPDATE"
    SQL_CONVERSIONS_OF_CLICK = base.SELECT_CONVERSION + ' WHERE subid = ? ORDER BY tid COLLATE "C" LIMIT 2'
    SQL_INSERT_CONVERSION = base.ConversionStore.SQL_INSERT_CONVERSION + "RETURNING id"

    def _inserted_id(self, sql: str, params: tuple) -> int:
        return fetch_single(self.conn, sql, params)[0]


class PostbackLogStore(base.PostbackLogStore):
    """The postback log of one PostgreSQL connection."""

    __slots__ = ()
    dialect = "postgres"

    SQL_COUNT_PARKED = "SELECT COUNT(*) FROM postback_log WHERE verdict = 'parked'"
    SQL_PARKED_ANY = "SELECT 1 FROM postback_log WHERE verdict = 'parked' LIMIT 1"
    SQL_PARKED_LANDED = """
SELECT p.id, p.params, p.received_at FROM postback_log AS p
JOIN click AS c ON c.subid = p.subid
WHERE p.verdict = 'parked' ORDER BY p.id LIMIT 500
FOR UPDATE OF p SKIP LOCKED
"""
