"""One migrated PostgreSQL database per test process, put back to the migrated state between tests.

A database per test (CREATE DATABASE … TEMPLATE, then DROP) cost ~0.28 s of CPU a test on the
two-core box, nearly all of it in the server copying and deleting the template's ~1,000 files
(9.4 MB, mostly the system catalogs), while a test on SQLite costs ~7 ms in all. Over the ~770 tests
that run on PostgreSQL that was about a seventh of the suite's CPU. Emptying the tables and writing
back what the migrations left costs a few milliseconds.

The reset is exact for data: every table of the template's schemas is emptied and refilled with the
rows the migrations left (with triggers off, so nothing is derived twice), every sequence is set back
to its template value, and every other session on the database is cut first (a test's leftover
process cannot write into the next test). A test that changed the schema (a table, column, index,
function, trigger or constraint made, altered or dropped) gets a fresh copy of the template instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

# Everything a test could change about the schema, as one digest over the catalogs.
# Sessions' temporary schemas (pg_temp_N) come and go with sessions: not the test's schema.
SCHEMA_DIGEST = """
WITH own AS (
    SELECT oid FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
    AND nspname NOT LIKE 'pg\\_temp\\_%' AND nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
)
SELECT md5(string_agg(line, ',' ORDER BY line)) FROM (
    SELECT 'n' || oid || nspname AS line FROM pg_namespace WHERE oid IN (SELECT oid FROM own)
    UNION ALL
    SELECT 'r' || oid || relname || relkind::text FROM pg_class WHERE relnamespace IN (SELECT oid FROM own)
    UNION ALL
    SELECT 'a' || a.attrelid || a.attname || a.atttypid || a.attnotnull || a.atthasdef || a.attisdropped
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace IN (SELECT oid FROM own) AND a.attnum > 0
    UNION ALL
    SELECT 'p' || oid || proname FROM pg_proc WHERE pronamespace IN (SELECT oid FROM own)
    UNION ALL
    SELECT 't' || oid || tgname || tgenabled::text FROM pg_trigger
    UNION ALL
    SELECT 'c' || oid || conname FROM pg_constraint WHERE connamespace IN (SELECT oid FROM own)
    UNION ALL
    SELECT 's' || array_to_string(setconfig, ';') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
) AS schema_lines
"""
TABLES = """
SELECT schemaname, tablename FROM pg_tables
WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2
"""
SEQUENCES = """
SELECT schemaname, sequencename FROM pg_sequences
WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2
"""


@dataclass
class MigratedState:
    """What the template holds after the migrations: its schema's digest, its rows, its sequences."""

    digest: str
    tables: list[str]  # Quoted, schema-qualified names.
    rows: dict[str, bytes]  # COPY … (FORMAT binary) of each table that has rows.
    sequences: list[tuple[str, int, bool]]  # (name, last_value, is_called).

    @classmethod
    def read(cls, url: str) -> MigratedState:
        with psycopg.connect(url, autocommit=True) as conn:
            (digest,) = conn.execute(SCHEMA_DIGEST).fetchone()
            tables = [sql.Identifier(*name).as_string(conn) for name in conn.execute(TABLES).fetchall()]
            rows = {}
            for table in tables:
                if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                    data = bytearray()
                    with conn.cursor().copy(f"COPY {table} TO STDOUT (FORMAT binary)") as copy:
                        for chunk in copy:
                            data += chunk
                    rows[table] = bytes(data)
            sequences = []
            for name in conn.execute(SEQUENCES).fetchall():
                sequence = sql.Identifier(*name).as_string(conn)
                last, called = conn.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone()
                sequences.append((sequence, last, called))
        return cls(digest, tables, rows, sequences)


class ReusableDatabase:
    """A copy of `template` on `server`, handed to one test at a time.

    The reset's session stays open between tests: a new session and its cold catalog caches were
    most of a reset's ~30 ms of CPU (the same digest costs ~2.5 ms on a warm session). It is a
    client on the test's database while the test runs, idle outside a transaction; a test that must
    be alone on it (`lanner restore` on PostgreSQL refuses beside other clients) is marked
    `alone_on_database`, and its fixture closes the session (release) before the test starts.

    The test process's own store session (conftest's `store`) is kept between tests too: a new one,
    and migrate()'s statements on its cold caches, cost ~7 ms of CPU a test. The store hands it in
    at the end of a test (keep) and takes it back at the start of the next (take); the reset spares
    it by its backend pid, every other session still being cut, and the store puts its state back
    (conftest's SQL_SESSION_RESET) before a test uses it. release() closes it with the reset's own."""

    def __init__(self, server, template: str) -> None:
        self.server, self.template = server, template
        self.state = MigratedState.read(server.url(template))
        self.name = server.create_database(template)
        self._conn: psycopg.Connection | None = None
        self._kept: tuple[object, psycopg.Connection] | None = None  # (the store's handle, its session)
        # The tables emptied and the sequences set in one round trip: a setval a round trip (32) made
        # the refill ~4.4 ms of CPU (server and client), this ~2.4.
        # Triggers (foreign keys among them) off: tables empty in any order, rows come back as the
        # template has them, nothing derived twice.
        setvals = ", ".join(
            f"setval('{sequence.replace(chr(39), chr(39) * 2)}'::regclass, {int(last)}, {bool(called)})"
            for sequence, last, called in self.state.sequences
        )
        self._wipe = " ".join(
            [
                "SET LOCAL session_replication_role = replica;",
                *(f"DELETE FROM {table};" for table in self.state.tables),
                *([f"SELECT {setvals};"] if setvals else []),
            ]
        )

    @property
    def url(self) -> str:
        return self.server.url(self.name)

    def reset(self) -> None:
        """Back to the template's state; a fresh copy if the schema changed."""
        try:
            is_same_schema = self._reset_through(self._session())
        except psycopg.OperationalError:
            # The kept session was ended between tests (a test that terminates backends, a forced
            # drop): a new one does the reset.
            self.release()
            is_same_schema = self._reset_through(self._session())
        if is_same_schema:
            return
        self.release()
        self.server.drop_database(self.name)
        self.name = self.server.create_database(self.template)

    def release(self) -> None:
        """Close the kept sessions, the reset's and the store's: nothing of this process's stays on the
        database until the next reset."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._kept is not None:
            self._kept[1].close()
            self._kept = None

    def keep(self, handle: object, conn: psycopg.Connection) -> None:
        """Hold the store's session `conn` (idle, outside a transaction) and the handle it belongs to
        until the next test's store takes them."""
        if self._kept is not None:
            self._kept[1].close()
        self._kept = (handle, conn)

    def take(self) -> tuple[object, psycopg.Connection] | None:
        """The store's session kept since the last test, if it is still on this database."""
        kept, self._kept = self._kept, None
        return kept

    def _session(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True)
        return self._conn

    def _reset_through(self, conn) -> bool:
        """Refill the tables if the schema is the template's; whether it was."""
        self._cut_other_sessions(conn)
        (digest,) = conn.execute(SCHEMA_DIGEST).fetchone()
        if digest != self.state.digest:
            return False
        self._refill(conn)
        return True

    def _cut_other_sessions(self, conn) -> None:
        others = (
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND pid <> %s"
        )
        kept = self._kept[1].info.backend_pid if self._kept is not None else 0
        deadline = time.monotonic() + 30
        while pids := [pid for (pid,) in conn.execute(others, (kept,)).fetchall()]:
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            assert time.monotonic() < deadline, f"sessions {pids} outlived pg_terminate_backend"
            time.sleep(0.01)

    def _refill(self, conn) -> None:
        with conn.transaction():
            conn.execute(self._wipe)
            for table, data in self.state.rows.items():
                with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy:
                    copy.write(data)

    def drop(self) -> None:
        self.release()
        self.server.drop_database(self.name)
