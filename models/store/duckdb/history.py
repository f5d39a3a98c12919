"""The columnar history's table and statements (DuckDB): its schema, the append of a chunk of clicks
in one transaction with the position it reaches, and the sums `lanner analytics verify` compares.

- `click`: one row a landed click, without ip and user agent (no report reads them); referrer_domain
  instead of the referrer (the reports' function, computed at copy). No primary key and no index: an
  ART index over 100 M ids is too big; each id is copied once because the position moves with it.
  Each appended chunk is sorted by (campaign_id, created_at), so DuckDB's zone maps skip row groups
  outside a campaign's range.
- `history_meta (key, value)`: `position`, the highest click id copied (moved in the same transaction
  as the rows: a kill at any instant neither loses nor duplicates one); `complete_from` (Unix ms,
  absent: 0), before which the file may lack clicks: made or filled again from a row store that
  `lanner prune` had emptied before then, it could not copy them.
- PERF: rows go in as a temporary CSV file read by read_csv with explicit types (~6 µs a click of
  six columns measured, ~2 µs per text column more); executemany was ~4 ms a row. `\\N` is NULL only
  in the integer columns (the text columns are NOT NULL in the row store: force_not_null).
- PERF: a list of ids is matched as `id IN (SELECT unnest(?))`, a hash join; `list_contains(?, id)`
  looked through the list for every row: 60 s against 0.15 s for 50,000 ids over a million rows.
"""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from pathlib import Path
from typing import Any

from models.store.history import ROW_COLUMNS
from models.tables.click import ROUTING_COLUMNS, SUB_ID_COLUMNS

# Each history column with its DuckDB type.
COLUMN_TYPES: dict[str, str] = {
    "id": "BIGINT",
    "created_at": "BIGINT",
    "campaign_id": "INTEGER",
    "stream_id": "INTEGER",
    "offer_id": "INTEGER",
    "lander_id": "INTEGER",
    "lp_clicked_at": "BIGINT",
    "domain": "VARCHAR",
    "referrer_domain": "VARCHAR",
    "source": "VARCHAR",
    "cost": "DOUBLE",
    "is_unique_global": "TINYINT",
    "is_unique_campaign": "TINYINT",
    "is_unique_stream": "TINYINT",
    "is_bot": "TINYINT",
    "visitor_key": "BIGINT",
    **dict.fromkeys(SUB_ID_COLUMNS, "VARCHAR"),
    **dict.fromkeys(ROUTING_COLUMNS, "VARCHAR"),
}
HISTORY_COLUMNS = tuple(COLUMN_TYPES)
assert HISTORY_COLUMNS == tuple("referrer_domain" if c == "referrer" else c for c in ROW_COLUMNS)
TEXT_COLUMNS = tuple(c for c, kind in COLUMN_TYPES.items() if kind == "VARCHAR")
NULL = "\\N"
HOUR_MS = 3_600_000

_COLUMNS_SQL = ", ".join(HISTORY_COLUMNS)
_CSV_TYPES = "{" + ", ".join(f"'{c}': '{t}'" for c, t in COLUMN_TYPES.items()) + "}"
_NOT_NULL = "[" + ", ".join(f"'{c}'" for c in TEXT_COLUMNS) + "]"


class ColumnarHistory:
    """The history's statements over one DuckDB connection (models/store/duckdb/connection.py opens it)."""

    SQL_SCHEMA = (
        "CREATE TABLE IF NOT EXISTS click ("
        + ", ".join(f"{column} {kind}" for column, kind in COLUMN_TYPES.items())
        + ")",
        "CREATE TABLE IF NOT EXISTS history_meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL)",
        "INSERT INTO history_meta (key, value) VALUES ('position', 0) ON CONFLICT (key) DO NOTHING",
    )
    SQL_POSITION = "SELECT value FROM history_meta WHERE key = 'position'"
    SQL_COMPLETE_FROM = "SELECT COALESCE(MAX(value), 0) FROM history_meta WHERE key = 'complete_from'"
    SQL_SET_COMPLETE_FROM = (
        "INSERT INTO history_meta (key, value) VALUES ('complete_from', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = greatest(history_meta.value, excluded.value)"
    )
    SQL_SET_POSITION = "UPDATE history_meta SET value = ? WHERE key = 'position'"
    SQL_DELETE = "DELETE FROM click WHERE id IN (SELECT unnest(CAST(? AS BIGINT[])))"
    SQL_DELETE_HOUR = "DELETE FROM click WHERE created_at >= ? AND created_at < ? AND id <= ?"
    SQL_INSERT = (
        f"INSERT INTO click ({_COLUMNS_SQL}) SELECT {_COLUMNS_SQL} FROM read_csv(?, header = false, "
        f"auto_detect = false, delim = ',', quote = '\"', escape = '\"', new_line = '\\n', "
        f"nullstr = '{NULL}', force_not_null = {_NOT_NULL}, columns = {_CSV_TYPES}) "
        "ORDER BY campaign_id, created_at"
    )
    SQL_COUNT = "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM click"
    # Per hour: clicks and their cost, of the clicks up to an id but those given.
    SQL_HOURS = (
        f"SELECT created_at - created_at % {HOUR_MS} AS hour, COUNT(*), COALESCE(SUM(cost), 0) FROM click "
        "WHERE id <= ? AND id NOT IN (SELECT unnest(CAST(? AS BIGINT[]))) GROUP BY hour"
    )

    __slots__ = ("conn", "scratch")

    def __init__(self, conn: Any, scratch: Path) -> None:
        """`scratch`: the directory of the temporary CSV files (the history's own: the same disk)."""
        self.conn = conn
        self.scratch = scratch

    def create(self) -> None:
        for statement in self.SQL_SCHEMA:
            self.conn.execute(statement)

    def position(self) -> int:
        return self.conn.execute(self.SQL_POSITION).fetchone()[0]

    def complete_from(self) -> int:
        """Unix ms before which the file may lack clicks (0: it lacks none)."""
        return self.conn.execute(self.SQL_COMPLETE_FROM).fetchone()[0]

    def mark_complete_from(self, cutoff_ms: int) -> None:
        """Record that clicks before `cutoff_ms` may be missing (it only moves forward)."""
        self.conn.execute(self.SQL_SET_COMPLETE_FROM, (cutoff_ms,))

    def count(self) -> tuple[int, int | None, int | None]:
        """(clicks, first created_at, last created_at)."""
        return self.conn.execute(self.SQL_COUNT).fetchone()

    def append(
        self,
        rows: list[tuple],
        position: int | None,
        replace: list[int] | None = None,
        hour: tuple[int, int] | None = None,
    ) -> None:
        """In one transaction: drop the clicks `replace` names (or, with `hour` (start, up to id), that
        hour's), insert `rows` (HISTORY_COLUMNS), and set the position."""
        scratch = None
        try:
            if rows:
                scratch = self._write_csv(rows)
            self.conn.execute("BEGIN TRANSACTION")
            try:
                if replace:
                    self.conn.execute(self.SQL_DELETE, (list(replace),))
                if hour is not None:
                    self.conn.execute(self.SQL_DELETE_HOUR, (hour[0], hour[0] + HOUR_MS, hour[1]))
                if scratch is not None:
                    self.conn.execute(self.SQL_INSERT, (str(scratch),))
                if position is not None:
                    self.conn.execute(self.SQL_SET_POSITION, (position,))
                self.conn.execute("COMMIT")
            except BaseException:
                # A failed COMMIT (a full disk) has ended the transaction already: raise its error.
                with contextlib.suppress(Exception):
                    self.conn.execute("ROLLBACK")
                raise
        finally:
            if scratch is not None:
                scratch.unlink(missing_ok=True)

    def _write_csv(self, rows: list[tuple]) -> Path:
        fd, name = tempfile.mkstemp(prefix="append-", suffix=".csv", dir=self.scratch)
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerows([NULL if value is None else value for value in row] for row in rows)
        return Path(name)

    def hours(self, up_to: int, leave_out: list[int]) -> list[tuple[int, int, float]]:
        """(hour, clicks, cost) of the clicks up to an id, but those in `leave_out`."""
        return self.conn.execute(self.SQL_HOURS, (up_to, list(leave_out))).fetchall()
