"""copying on SQLite: what differs from PostgreSQL (models/store/postgres/copying.py); the rest is
models/store/copying.py's."""

from __future__ import annotations

from models.store import copying as base
from models.store.copying import TableShape


class CopyStore(base.CopyStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_TABLES = (
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    )
    SQL_COLUMNS = "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid"

    def tables(self) -> dict[str, TableShape]:
        """Every table of the database by name (SQLite's own sqlite_* tables left out)."""
        cursor = self.conn.execute(self.SQL_TABLES)
        try:
            table_names = [row[0] for row in cursor.fetchall()]
        finally:
            cursor.close()
        return {name: self.shape(name) for name in table_names}

    def shape(self, table: str) -> TableShape:
        cursor = self.conn.execute(self.SQL_COLUMNS, (table,))
        try:
            rows = cursor.fetchall()
        finally:
            cursor.close()
        key = tuple(name for name, position in sorted((r for r in rows if r[1]), key=lambda r: r[1]))
        return TableShape(table, tuple(row[0] for row in rows), key)  # () without a declared key.
