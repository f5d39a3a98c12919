"""The click table's writes and the spool position they land with (`spool_position`).

A batch of journal lines lands in one transaction together with the journal position after them,
so a flush killed at any point and run again lands every click exactly once (the unique subid
drops a line that is already in). The record layout is models/clicks/record.py's.
"""

from __future__ import annotations

from models.clicks.record import CLICK_COLUMNS, IP, UA_HASH
from models.store.sqlite.rows import Store, fetch_one

# A row of CLICK_COLUMNS (the bench's generated clicks): SQLite computes the visitor key (migration 0005)
# from its ip and ua_hash.
SQL_INSERT_CLICK = "INSERT INTO click ({}, visitor_key) VALUES ({}, lanner_visitor_key(?{}, ?{})) ON CONFLICT DO NOTHING".format(
    ", ".join(CLICK_COLUMNS),
    ", ".join(f"?{n}" for n in range(1, len(CLICK_COLUMNS) + 1)),
    IP + 1,
    UA_HASH + 1,
)
# A journal line's row (models.clicks.record.decode_row): the columns, then the visitor key the line
# carries, NULL but for an anonymised IP's (its key is the full address's, not the stored one's).
# PERF: COALESCE evaluates lanner_visitor_key only for a NULL key.
SQL_LAND_CLICK = "INSERT INTO click ({}, visitor_key) VALUES ({}, COALESCE(?{}, lanner_visitor_key(?{}, ?{}))) ON CONFLICT DO NOTHING".format(
    ", ".join(CLICK_COLUMNS),
    ", ".join(f"?{n}" for n in range(1, len(CLICK_COLUMNS) + 1)),
    len(CLICK_COLUMNS) + 1,
    IP + 1,
    UA_HASH + 1,
)
# The same before migration 0005 (`lanner bench migration` builds such a database).
SQL_INSERT_CLICK_0004 = "INSERT INTO click ({}) VALUES ({}) ON CONFLICT DO NOTHING".format(
    ", ".join(CLICK_COLUMNS), ", ".join("?" * len(CLICK_COLUMNS))
)


class ClickStore(Store):
    """Landing clicks on one connection; writes join the caller's transaction."""

    SQL_POSITION = "SELECT segment, byte_offset FROM spool_position WHERE id = 1"
    SQL_UPDATED_AT = "SELECT updated_at FROM spool_position WHERE id = 1"
    SQL_SET_POSITION = "UPDATE spool_position SET segment = ?, byte_offset = ?, updated_at = ? WHERE id = 1"

    __slots__ = ()

    def position(self) -> tuple[int, int]:
        """(segment, byte offset): where in the journal the next unlanded line starts."""
        return tuple(fetch_one(self.conn, self.SQL_POSITION))

    def landed_at(self) -> int | None:
        """Unix ms of the last flush that moved the position."""
        row = fetch_one(self.conn, self.SQL_UPDATED_AT)
        return row[0] if row else None

    def set_position(self, segment: int, byte_offset: int, now_ms: int) -> None:
        self.conn.execute(self.SQL_SET_POSITION, (segment, byte_offset, now_ms)).close()

    def insert(self, rows: list[list]) -> list[list]:
        """Insert a batch of journal rows (SQL_LAND_CLICK's); return the rows that were new (only those
        may reach the cap counters).

        A replayed line (a restored spool, a copied segment) is already in the table: then the batch
        is undone and the rows inserted one by one to learn which of them landed now. Rare.
        """
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
