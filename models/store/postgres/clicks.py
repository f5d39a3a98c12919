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
"""

from __future__ import annotations

from functools import cache

from peewee import FloatField, TextField

from models.clicks.record import CLICK_COLUMNS, IP, SUBID, UA_HASH, visitor_key
from models.store.sqlite import clicks as sqlite
from models.tables.click import Click


def column_type(column: str) -> str:
    """The PostgreSQL type of a click column, as the Peewee model declares it (schema.py's)."""
    field = Click._meta.fields[column]
    if isinstance(field, TextField):
        return "TEXT"
    return "DOUBLE PRECISION" if isinstance(field, FloatField) else "BIGINT"


@cache
def land_click_sql() -> str:
    """SQL_LAND_CLICK's PostgreSQL twin: one typed array per column of CLICK_COLUMNS, then the keys."""
    columns = (*CLICK_COLUMNS, "visitor_key")
    arrays = ", ".join(f"CAST(? AS {column_type(column)}[])" for column in columns)
    return (
        f"INSERT INTO click ({', '.join(columns)}) SELECT * FROM unnest({arrays}) "
        "ON CONFLICT DO NOTHING RETURNING subid"
    )


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
