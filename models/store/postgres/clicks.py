"""clicks: landing a batch of journal rows on PostgreSQL (models/store/sqlite/clicks.py is the model).

What differs from SQLite and why:
- SQLite computes a missing visitor key in the INSERT with its registered lanner_visitor_key; PostgreSQL
  has no such function, so the key is models.clicks.record.visitor_key computed here, in Python, for
  the rows whose line carries none (the same function: the same key on both dialects).
- SQLite learns which rows were new from total_changes, undoing the batch to insert it row by row when
  one was a replay. PostgreSQL says it in one statement: the batch goes in as one array per column
  (unnest: a 2000-row batch of 56 columns would pass PostgreSQL's 65535 parameters as a VALUES list),
  ON CONFLICT DO NOTHING drops the rows already in, and RETURNING names the subids that landed now.
  One round trip, and each click lands exactly once however often its line is replayed.
- The arrays go in psycopg's binary format (`%b`, so the statement is a psycopg SQL object that the
  connection's `?` translation leaves alone): PERF: psycopg quotes a text-format array element by
  element in Python (~110 µs a row of 56 columns, most of the flusher's CPU); the binary dumpers cost
  ~16. Binary wants one Python type per array, hence each value cast to its column's type first.
"""

from __future__ import annotations

from functools import cache

from peewee import FloatField, TextField
from psycopg.sql import SQL

from models.clicks.record import CLICK_COLUMNS, IP, SUBID, UA_HASH, visitor_key
from models.store.sqlite import clicks as sqlite
from models.tables.click import Click


def column_type(column: str) -> str:
    """The PostgreSQL type of a click column, as the Peewee model declares it (schema.py's)."""
    field = Click._meta.fields[column]
    if isinstance(field, TextField):
        return "TEXT"
    return "DOUBLE PRECISION" if isinstance(field, FloatField) else "BIGINT"


# The Python type each PostgreSQL type's binary array is built from.
PYTHON_TYPES = {"TEXT": str, "DOUBLE PRECISION": float, "BIGINT": int}
LANDED_COLUMNS = (*CLICK_COLUMNS, "visitor_key")


@cache
def land_click_sql() -> SQL:
    """SQL_LAND_CLICK's PostgreSQL twin: one typed binary array per column of LANDED_COLUMNS."""
    arrays = ", ".join(f"CAST(%b AS {column_type(column)}[])" for column in LANDED_COLUMNS)
    return SQL(
        f"INSERT INTO click ({', '.join(LANDED_COLUMNS)}) SELECT * FROM unnest({arrays}) "
        "ON CONFLICT DO NOTHING RETURNING subid"
    )


@cache
def column_casts() -> tuple[type, ...]:
    """The Python type of each column of LANDED_COLUMNS, for its binary array."""
    return tuple(PYTHON_TYPES[column_type(column)] for column in LANDED_COLUMNS)


def typed(values: list, cast: type) -> list:
    """`values` as one Python type (None kept): a journal line's int in a REAL column, a bool flag."""
    return [value if value is None or type(value) is cast else cast(value) for value in values]


class ClickStore(sqlite.ClickStore):
    __slots__ = ()
    dialect = "postgres"

    def insert(self, rows: list[list]) -> list[list]:
        """Insert a batch of journal rows (SQL_LAND_CLICK's); return the rows that were new."""
        if not rows:
            return []
        arrays = [list(values) for values in zip(*rows)]
        # The line's own key (an anonymised address's), else the stored address's.
        arrays[-1] = [
            key if key is not None else visitor_key(ip, ua_hash)
            for key, ip, ua_hash in zip(arrays[-1], arrays[IP], arrays[UA_HASH])
        ]
        arrays = [typed(values, cast) for values, cast in zip(arrays, column_casts())]
        cursor = self.conn.execute(land_click_sql(), arrays)
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
