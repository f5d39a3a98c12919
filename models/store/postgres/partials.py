"""partials on PostgreSQL: the fold locks the day's rows in the global order, then deletes exactly
the partials it locked and adds what it deleted onto partial 0.

- **The order.** `SELECT ... ORDER BY key, node FOR UPDATE` locks the rows as it returns them, sorted:
  the text columns by code point (COLLATE "C"), as Python's sort orders a flusher's rows
  (models/store/rows.py in_lock_order), and partial 0 before the others of its key. Flushers lock
  their own partial's rows in that order too, so a fold and a flusher may wait on each other's rows
  but never deadlock.
- **Only the rows locked.** A late click's flusher may make a new partial row of the day while the
  fold runs (READ COMMITTED: a later statement of the fold would see it once committed). The fold
  deletes by the locked rows' ctids (a locked row keeps its ctid: no one else can update it), and adds
  onto partial 0 what `DELETE ... RETURNING` gave back: a partial row made meanwhile stays as it is
  and is still summed by every reader.
- **Partial 0 made first.** A key with no partial 0 would have its row inserted by the fold after it
  holds the later keys' locks, against the order; `add_missing_zeros` inserts them beforehand, in key
  order, in a transaction of its own (rows of zeros: the sums do not move).
"""

from __future__ import annotations

from models.store import partials as base
from models.store.postgres.sums import float_sum


def _ordered(columns: tuple[str, ...]) -> str:
    return ", ".join(f'{c} COLLATE "C"' if c in base.TEXT_COLUMNS else c for c in columns)


class PartialStore(base.PartialStore):
    __slots__ = ()
    dialect = "postgres"

    # Every row of the day's keys that have a partial other than 0 (a day folded before and met by a
    # late click locks that key's rows only), in the global order.
    SQL_LOCK = {
        table: (
            f"SELECT ctid::text, node FROM {table} WHERE {base.IN_RANGE.format(column=folded.day_column)} "
            f"AND ({', '.join(folded.key)}) IN (SELECT {', '.join(folded.key)} FROM {table} "
            f"WHERE {base.IN_RANGE.format(column=folded.day_column)} AND node <> 0) "
            f"ORDER BY {_ordered(folded.key)}, node FOR UPDATE"
        )
        for table, folded in base.FOLDED.items()
    }
    SQL_MERGE = {
        table: (
            f"WITH gone AS (DELETE FROM {table} WHERE ctid = ANY(?::tid[]) "
            f"RETURNING {', '.join((*folded.key, *folded.metrics))}) "
            + folded.merge_sql("gone", "true", float_sum)
        )
        for table, folded in base.FOLDED.items()
    }
    SQL_ZEROS = {
        table: (
            f"INSERT INTO {table} ({', '.join(folded.key)}, {', '.join(folded.metrics)}, node) "
            f"SELECT {', '.join(folded.key)}, {', '.join(['0'] * len(folded.metrics))}, 0 FROM ("
            f"SELECT DISTINCT {', '.join(folded.key)} FROM {table} "
            f"WHERE {base.IN_RANGE.format(column=folded.day_column)} AND node <> 0) AS keys "
            f"ORDER BY {_ordered(folded.key)} ON CONFLICT DO NOTHING"
        )
        for table, folded in base.FOLDED.items()
    }

    def fold(self, table: str, start: int, end: int) -> int:
        locked = self.conn.execute(self.SQL_LOCK[table], (start, end, start, end)).fetchall()
        gone = [ctid for ctid, node in locked if node != 0]
        if gone:
            self.conn.execute(self.SQL_MERGE[table], (gone,)).close()
        return len(gone)

    def add_missing_zeros(self, table: str, start: int, end: int) -> None:
        self.conn.execute(self.SQL_ZEROS[table], (start, end)).close()
