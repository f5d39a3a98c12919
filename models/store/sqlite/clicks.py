"""clicks on SQLite: what differs from PostgreSQL (models/store/postgres/clicks.py); the rest is
models/store/clicks.py's.

A landed line's missing visitor key is computed in Python before the INSERT, as on PostgreSQL (the
bench's generated clicks still have SQLite compute theirs, with the function registered on its
connection as lanner_visitor_key: models/store/sqlite/database.py); SQLite learns which rows were new
from total_changes.
"""

from __future__ import annotations

from models.store import clicks as base
from models.store.functions import visitor_key
from models.tables.click import CLICK_COLUMNS, IP, JOURNAL_COLUMNS, UA_HASH

# A row of CLICK_COLUMNS (the bench's generated clicks): SQLite computes the visitor key (migration 0005)
# from its ip and ua_hash.
SQL_INSERT_CLICK = (
    "INSERT INTO click ({}, visitor_key) VALUES ({}, lanner_visitor_key(?{}, ?{})) ON CONFLICT DO NOTHING"
).format(
    ", ".join(CLICK_COLUMNS),
    ", ".join(f"?{n}" for n in range(1, len(CLICK_COLUMNS) + 1)),
    IP + 1,
    UA_HASH + 1,
)
# A journal line's row (models.clicks.record.decode_row): the columns, then the visitor key, which
# `ClickStore.insert` computes for a line that carries none (all but an anonymised IP's, whose key is the
# full address's, not the stored one's).
SQL_LAND_CLICK = "INSERT INTO click ({}, visitor_key) VALUES ({}) ON CONFLICT DO NOTHING".format(
    ", ".join(JOURNAL_COLUMNS), ", ".join("?" * (len(JOURNAL_COLUMNS) + 1))
)


class ClickStore(base.ClickStore):
    __slots__ = ()
    dialect = "sqlite"

    def insert(self, rows: list[list]) -> list[list]:
        """Insert a batch of journal rows (SQL_LAND_CLICK's); return the rows that were new (only those
        may reach the cap counters).

        A replayed line (a restored spool, a copied segment) is already in the table: then the batch
        is undone and the rows inserted one by one to learn which of them landed now. Rare.
        """
        # PERF: the key in Python, the same function lanner_visitor_key calls: as SQLite's callback it
        # cost a call into Python from C a row, the GIL taken and given back around it.
        for row in rows:
            if row[-1] is None:
                row[-1] = visitor_key(row[IP], row[UA_HASH])
        connection = self.conn
        connection.execute("SAVEPOINT click_batch").close()
        before = connection.total_changes
        connection.executemany(SQL_LAND_CLICK, rows).close()
        if connection.total_changes - before == len(rows):
            connection.execute("RELEASE click_batch").close()
            return rows
        connection.execute("ROLLBACK TO click_batch").close()
        connection.execute("RELEASE click_batch").close()
        landed = []
        for row in rows:
            before = connection.total_changes
            connection.execute(SQL_LAND_CLICK, row).close()
            if connection.total_changes > before:
                landed.append(row)
        return landed
