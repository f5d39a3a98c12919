"""clicks: landing a batch of journal rows on PostgreSQL (models/store/clicks.py holds what both share).

What differs from SQLite and why:
- Both compute a missing visitor key in Python, models.store.functions.visitor_key, for the rows whose
  line carries none (the same function: the same key on both dialects); SQLite's generated clicks have it
  computed by the function registered on its connection (lanner_visitor_key), which PostgreSQL lacks.
- SQLite learns which rows were new from total_changes, undoing the batch to insert it row by row when
  one was a replay. PostgreSQL says it in one statement: the batch is copied into a staging table of
  the session (click_landing: temporary, emptied at every commit or rollback), then one INSERT takes
  it out (DELETE … RETURNING, so a second batch in the same transaction finds it empty), ON CONFLICT
  DO NOTHING drops the rows already in, and RETURNING names the subids that landed now. Each click
  lands exactly once however often its line is replayed, in the caller's transaction (the flusher's,
  with its position).
- PERF: the rows go in by binary COPY, whose rows psycopg formats in C (~3 µs a row of 57 columns).
  An array per column through unnest (one statement, no staging table) cost ~110 µs a row in psycopg's
  Python text-array quoting, ~20 in binary: most of the flusher's CPU. Binary COPY wants each value
  of its column's Python type, hence the casts.
- PostgreSQL's text cannot hold a NUL, which a visitor may send (`?sub1=%00`, a User-Agent) and SQLite
  keeps: here it lands as U+FFFD, as a postback's does (models/conversions/postbacks.py). Refused, one
  such line failed its whole batch, again at every flush: no click behind it landed (issue 32).
"""

from __future__ import annotations

from functools import cache

import psycopg
from peewee import FloatField, TextField

from models.store import clicks as base
from models.store.functions import visitor_key
from models.store.history import HistoryStore
from models.store.postgres.database import PostgresUnavailable, is_retryable
from models.tables.click import IP, JOURNAL_COLUMNS, SUBID, UA_HASH, Click

LANDED_COLUMNS = (*JOURNAL_COLUMNS, "visitor_key")
# A click column's PostgreSQL type: (its name in SQL, its name for binary COPY, the Python type it takes).
COLUMN_TYPES = {
    "TEXT": ("TEXT", "text", str),
    "REAL": ("DOUBLE PRECISION", "float8", float),
    "INTEGER": ("BIGINT", "int8", int),
}


def column_kind(column: str) -> str:
    """The kind of a click column, as the Peewee model declares it (schema.py's): a COLUMN_TYPES key."""
    field = Click._meta.fields[column]
    if isinstance(field, TextField):
        return "TEXT"
    return "REAL" if isinstance(field, FloatField) else "INTEGER"


def column_type(column: str) -> str:
    """The PostgreSQL type of a click column."""
    return COLUMN_TYPES[column_kind(column)][0]


@cache
def landing_sql() -> tuple[str, str, str]:
    """(create the session's staging table if need be, COPY into it, land its rows into click)."""
    columns = ", ".join(LANDED_COLUMNS)
    typed = ", ".join(f"{column} {column_type(column)}" for column in LANDED_COLUMNS)
    create = f"CREATE TEMPORARY TABLE IF NOT EXISTS click_landing ({typed}) ON COMMIT DELETE ROWS"
    copy = f"COPY click_landing ({columns}) FROM STDIN (FORMAT BINARY)"
    land = (
        f"WITH landing AS (DELETE FROM click_landing RETURNING {columns}) "
        f"INSERT INTO click ({columns}) SELECT {columns} FROM landing ON CONFLICT DO NOTHING RETURNING subid"
    )
    return create, copy, land


def without_nul(text: str) -> str:
    """`text` with each NUL as U+FFFD (PostgreSQL's text cannot hold a NUL)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


@cache
def text_positions() -> tuple[int, ...]:
    """The positions of LANDED_COLUMNS' text columns."""
    return tuple(n for n, column in enumerate(LANDED_COLUMNS) if column_kind(column) == "TEXT")


@cache
def copy_types() -> tuple[list[str], tuple[type, ...]]:
    """(binary COPY's type names, the Python types) of LANDED_COLUMNS."""
    kinds = [COLUMN_TYPES[column_kind(column)] for column in LANDED_COLUMNS]
    return [name for _, name, _ in kinds], tuple(cast for _, _, cast in kinds)


class ClickStore(base.ClickStore):
    __slots__ = ()
    dialect = "postgres"

    def insert(self, rows: list[list]) -> list[list]:
        """Insert a batch of journal rows (SQL_LAND_CLICK's); return the rows that were new. Inside a
        transaction: the staging table is emptied at every commit."""
        if not rows:
            return []
        if not self.conn.in_transaction:
            with self.conn.transaction():
                return self.insert(rows)
        create, copy, land = landing_sql()
        names, casts = copy_types()
        texts = text_positions()
        HistoryStore(self.conn).guard()  # Before any id is taken: the history's watermark stays closed.
        self.conn.execute(create)
        cursor = self.conn.cursor()
        try:
            with cursor.copy(copy) as copying:
                copying.set_types(names)
                for row in rows:
                    values = [
                        value if value is None or type(value) is cast else cast(value)
                        for value, cast in zip(row, casts, strict=True)
                    ]
                    if values[-1] is None:  # The line's own key (an anonymised address's), else this.
                        values[-1] = visitor_key(row[IP], row[UA_HASH])
                    for n in texts:  # PERF: ~1 µs a row; a NUL is rare, a replace rarer.
                        text = values[n]
                        if isinstance(text, str) and "\x00" in text:
                            values[n] = without_nul(text)
                    copying.write_row(values)
        except psycopg.Error as error:
            if is_retryable(error):
                raise PostgresUnavailable(error) from error
            raise
        finally:
            cursor.close()
        cursor = self.conn.execute(land)
        try:
            new = {subid for (subid,) in cursor.fetchall()}
        finally:
            cursor.close()
        if len(new) == len(rows):
            return rows
        landed = []
        for row in rows:  # A subid twice in one batch lands once: its first row.
            if row[SUBID] in new:
                new.discard(row[SUBID])
                landed.append(row)
        return landed
