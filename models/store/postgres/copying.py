"""Writing a copied database into PostgreSQL for `lanner db copy` (models/ops/db_copy.py).

What differs from SQLite's copying store (models/store/sqlite/copying.py, which it reads with):
- The catalog is information_schema's, not sqlite_master and PRAGMA table_info.
- Only the target is written: a batch goes in with COPY … FROM STDIN (psycopg's write_row: one
  stream per batch, several times faster than INSERTs), in the caller's transaction together with
  the table's row of `copy_progress`, so a copy killed anywhere and run again neither repeats nor
  skips a row. `copy_progress` (table, source, last key as JSON text, rows copied, whether done) is
  this command's own: created when a copy starts, dropped once the copy is verified.
- PostgreSQL's TEXT cannot hold a NUL character, which SQLite's can (a sub_id from `%00` in a query
  string): a batch that holds one is written again with the NULs removed, and their number returned.
- Ids keep their values (identity columns BY DEFAULT take them), so each identity's sequence is moved
  past the largest id at the end: the next row PostgreSQL numbers does not collide.
- An advisory lock keeps two copies from writing into one database at once.
- The copied tables are analysed at the end, so the first reports on them are planned with statistics.
"""

from __future__ import annotations

import psycopg

from models.store import copying as base
from models.store.copying import TableShape, names, quoted
from models.store.rows import fetch_one, fetch_single

LOCK_KEY = 0x6C616E6E6572  # "lanner" in ASCII: the advisory lock of `lanner db copy`.


class CopyStore(base.CopyStore):
    __slots__ = ()
    dialect = "postgres"

    SQL_TABLES = (
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    )
    SQL_COLUMNS = (
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position"
    )
    SQL_KEY = """
SELECT k.column_name FROM information_schema.table_constraints AS c
JOIN information_schema.key_column_usage AS k
    ON k.constraint_schema = c.constraint_schema AND k.constraint_name = c.constraint_name
WHERE c.table_schema = current_schema() AND c.table_name = ? AND c.constraint_type = 'PRIMARY KEY'
ORDER BY k.ordinal_position
"""
    SQL_REFERENCES = """
SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint
WHERE contype = 'f' AND connamespace = current_schema()::regnamespace
"""
    SQL_IDENTITIES = (
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    )
    SQL_TRY_LOCK = "SELECT pg_try_advisory_lock(?)"
    SQL_UNLOCK = "SELECT pg_advisory_unlock(?)"
    SQL_HAS_PROGRESS = "SELECT to_regclass('copy_progress') IS NOT NULL"
    SQL_CREATE_PROGRESS = """
CREATE TABLE copy_progress (
    table_name TEXT NOT NULL PRIMARY KEY,
    source TEXT NOT NULL,
    last_key TEXT,
    rows_copied BIGINT NOT NULL DEFAULT 0,
    is_done BIGINT NOT NULL DEFAULT 0
)"""
    SQL_ADD_PROGRESS = "INSERT INTO copy_progress (table_name, source) VALUES (?, ?)"
    SQL_PROGRESS = "SELECT table_name, source, last_key, rows_copied, is_done FROM copy_progress"
    SQL_SAVE_PROGRESS = (
        "UPDATE copy_progress SET last_key = ?, rows_copied = rows_copied + ?, is_done = ? "
        "WHERE table_name = ?"
    )
    SQL_DROP_PROGRESS = "DROP TABLE copy_progress"
    SQL_CLEAR = "DELETE FROM {table}"
    SQL_COPY_IN = "COPY {table} ({columns}) FROM STDIN"
    SQL_SAVEPOINT = "SAVEPOINT copy_batch"
    SQL_ROLLBACK_SAVEPOINT = "ROLLBACK TO SAVEPOINT copy_batch"
    SQL_RELEASE_SAVEPOINT = "RELEASE SAVEPOINT copy_batch"
    SQL_ANALYZE = "ANALYZE {table}"
    SQL_MOVE_SEQUENCE = (
        "SELECT setval(pg_get_serial_sequence(?, ?), COALESCE(MAX({column}), 0) + 1, false) FROM {table}"
    )

    def _all(self, sql: str, params: tuple = ()) -> list[tuple]:
        cursor = self.conn.execute(sql, params)
        try:
            return cursor.fetchall()
        finally:
            cursor.close()

    def tables(self) -> dict[str, TableShape]:
        return {name: self.shape(name) for (name,) in self._all(self.SQL_TABLES)}

    def shape(self, table: str) -> TableShape:
        columns = tuple(row[0] for row in self._all(self.SQL_COLUMNS, (table,)))
        return TableShape(table, columns, tuple(row[0] for row in self._all(self.SQL_KEY, (table,))))

    def references(self) -> list[tuple[str, str]]:
        return [tuple(row) for row in self._all(self.SQL_REFERENCES)]

    def try_lock(self) -> bool:
        return bool(fetch_single(self.conn, self.SQL_TRY_LOCK, (LOCK_KEY,))[0])

    def unlock(self) -> None:
        fetch_one(self.conn, self.SQL_UNLOCK, (LOCK_KEY,))

    def has_progress(self) -> bool:
        return bool(fetch_single(self.conn, self.SQL_HAS_PROGRESS)[0])

    def start_progress(self, tables: list[str], source: str) -> None:
        self.conn.execute(self.SQL_CREATE_PROGRESS).close()
        self.conn.executemany(self.SQL_ADD_PROGRESS, [(table, source) for table in tables]).close()

    def progress(self) -> dict[str, tuple[str, str | None, int, bool]]:
        return {row[0]: (row[1], row[2], row[3], bool(row[4])) for row in self._all(self.SQL_PROGRESS)}

    def save_progress(self, table: str, last_key: str | None, rows: int, is_done: bool) -> None:
        self.conn.execute(self.SQL_SAVE_PROGRESS, (last_key, rows, int(is_done), table)).close()

    def drop_progress(self) -> None:
        self.conn.execute(self.SQL_DROP_PROGRESS).close()

    def clear(self, table: str) -> None:
        self.conn.execute(self.SQL_CLEAR.format(table=quoted(table))).close()

    def write_rows(self, table: TableShape, rows: list[tuple]) -> int:
        """With COPY; a batch holding a NUL character is written again without them (the module's
        docstring)."""
        sql = self.SQL_COPY_IN.format(table=quoted(table.name), columns=names(table.columns))
        self.conn.execute(self.SQL_SAVEPOINT).close()
        try:
            self._copy(sql, rows)
        except (
            psycopg.DataError
        ):  # psycopg's own "text fields cannot contain NUL", or a value PostgreSQL refused.
            self.conn.execute(self.SQL_ROLLBACK_SAVEPOINT).close()
            cleaned = sum(1 for row in rows for value in row if isinstance(value, str) and "\x00" in value)
            if not cleaned:
                raise
            self._copy(sql, [tuple(without_nul(value) for value in row) for row in rows])
        else:
            cleaned = 0
        self.conn.execute(self.SQL_RELEASE_SAVEPOINT).close()
        return cleaned

    def _copy(self, sql: str, rows: list[tuple]) -> None:
        with self.conn.cursor() as cursor:
            with cursor.copy(sql) as copy:
                for row in rows:
                    copy.write_row(row)

    def move_sequences(self, tables: list[str]) -> None:
        for table, column in self._all(self.SQL_IDENTITIES):
            if table in tables:
                sql = self.SQL_MOVE_SEQUENCE.format(column=quoted(column), table=quoted(table))
                fetch_one(self.conn, sql, (table, column))

    def analyze(self, tables: list[str]) -> None:
        for table in tables:
            self.conn.execute(self.SQL_ANALYZE.format(table=quoted(table))).close()


def without_nul(value):
    return value.replace("\x00", "") if isinstance(value, str) else value
