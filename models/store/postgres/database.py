"""PostgreSQL connections: one per thread (peewee's), in autocommit as SQLite's are used, and the
server's "not now" errors turned into the store's own.

Every statement outside `write_tx()` commits on its own, as it does on SQLite outside a transaction;
`write_tx()` is a plain BEGIN (PostgreSQL locks rows, not the database, so SQLite's IMMEDIATE has no
counterpart). A refusal that a later retry may get past (the server unreachable or shutting down, a
serialization failure or deadlock, a lock wait past lock_timeout, a full disk, too many connections, a
read-only standby) is raised as PostgresUnavailable, an OperationalError, so write_tx() makes it
StoreBusy and the edges that catch DRIVER_ERRORS answer it as they answer a locked SQLite file.

peewee maps psycopg's errors to its own only for statements run through it (execute_sql); the stores
run theirs on the raw connection, as they do on SQLite, where psycopg's own classes would reach the
caller: the cursor below catches them there. A read-only transaction is an InternalError by its
SQLSTATE class, for peewee too: only this calls it "not now". Lanner imports this module only when a
PostgreSQL database is opened (peewee itself imports psycopg whenever it is installed).

The stores' statements are written once in SQLite's spelling and run on both dialects where they mean
the same: LannerConnection takes `?` and `?N` parameters (translated once per statement by
models/store/postgres/params.py) and has sqlite3's `executemany`; values come back as sqlite3 gives
them (an integral SUM is an int, not a Decimal) and a Python bool is stored as 0/1, since the schema
keeps SQLite's integer flags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
from peewee import OperationalError, PostgresqlDatabase
from psycopg.adapt import Dumper, Loader

from models.errors import LannerError
from models.store.connecting import BUSY_TIMEOUT_MS, PostgresUnreachable
from models.store.postgres.params import qmark_to_pyformat

if TYPE_CHECKING:
    from peewee import _ConnectionState

DIALECT = "postgres"  # The package under models/store/ (models/store/database.py dialect_of).
# SQLSTATE classes and codes a retry may get past (PostgreSQL's appendix A, "Error Codes").
RETRYABLE_CLASSES = ("08", "53", "57")  # connection exception, insufficient resources, operator intervention
# Serialization failure, deadlock, a read-only transaction (a standby, or default_transaction_read_only),
# a row lock not granted within lock_timeout (SQLite's busy timeout).
RETRYABLE_CODES = ("40001", "40P01", "25006", "55P03")
LOCK_TIMEOUT_OPTION = f"-c lock_timeout={BUSY_TIMEOUT_MS}"  # ms, as SQLite's busy_timeout.


class PostgresUnavailable(OperationalError, LannerError):
    """PostgreSQL refused a statement for now; `cause` is psycopg's error. OperationalError first:
    peewee's error wrapper maps an unknown class by its first base."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(one_line(cause))
        self.cause = cause


def one_line(error: BaseException) -> str:
    """psycopg's message without its DETAIL/HINT lines: the sentence StoreBusy quotes."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def is_retryable(error: BaseException) -> bool:
    """Whether a psycopg error means "not now" rather than a bug in the statement."""
    state = getattr(error, "sqlstate", None)
    if state is None:  # No answer from the server at all: refused, lost, closed.
        return isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError))
    return state[:2] in RETRYABLE_CLASSES or state in RETRYABLE_CODES


class LannerCursor(psycopg.Cursor):
    """A cursor whose "not now" errors are PostgresUnavailable: every statement, raw or through peewee,
    BEGIN and COMMIT included, runs through one."""

    def close(self) -> None:
        # sqlite3 keeps rowcount after close; psycopg resets it to -1, which read as "changed nothing".
        rowcount = self._rowcount
        super().close()
        self._rowcount = rowcount

    def execute(self, query, params=None, **kwargs):
        try:
            # peewee passes () for "no values"; then psycopg would read a literal % as a placeholder.
            return super().execute(query, params or None, **kwargs)
        except psycopg.Error as error:
            if is_retryable(error):
                raise PostgresUnavailable(error) from error
            raise

    def executemany(self, query, params_seq, **kwargs):
        try:
            return super().executemany(query, params_seq, **kwargs)
        except psycopg.Error as error:
            if is_retryable(error):
                raise PostgresUnavailable(error) from error
            raise


class SqliteNumericLoader(Loader):
    """NUMERIC (what SUM and AVG of BIGINT return) as sqlite3 returns it: an int when integral, else a
    float."""

    def load(self, data) -> int | float:
        text = bytes(data)
        if text.isdigit() or (text[:1] == b"-" and text[1:].isdigit()):
            return int(text)
        return float(text)


class BoolAsIntDumper(Dumper):
    """True and False as the schema's 0/1 BIGINT flags (psycopg would send a boolean, which BIGINT
    refuses)."""

    oid = psycopg.postgres.types["int8"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


class LannerConnection(psycopg.Connection):
    """psycopg's connection with the stores' parameter style and sqlite3's executemany and in_transaction."""

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open or failed (what the flusher rolls back after a failed round)."""
        return self.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def execute(self, query, params=None, **kwargs):
        if isinstance(query, str):
            query, order = qmark_to_pyformat(query, params is not None and len(params) > 0)
            if order is not None:
                params = [params[index] for index in order]
        try:
            return super().execute(query, params or None, **kwargs)
        except psycopg.OperationalError as error:
            # A connection lost earlier is refused here, before any cursor: "not now" too.
            if self.closed:
                raise PostgresUnavailable(error) from error
            raise

    def executemany(self, query: str, params_seq):
        query, order = qmark_to_pyformat(query, True)
        if order is not None:
            params_seq = ([params[index] for index in order] for params in params_seq)
        cursor = self.cursor()
        cursor.executemany(query, params_seq)
        return cursor


class LannerPostgresqlDatabase(PostgresqlDatabase):
    """peewee's PostgresqlDatabase on psycopg 3, with LannerCursor and SQLite's transaction spelling."""

    dialect = DIALECT
    _state: _ConnectionState  # peewee's per-thread connection, set by Database.__init__ (not in its stubs).

    def _connect(self):
        try:
            # A lock wait gives up as SQLite's busy timeout does (models/store/sqlite/database.py): 55P03,
            # retryable, so a write held up behind a long one is StoreBusy, never a hang.
            conn = LannerConnection.connect(
                self.database, autocommit=True, cursor_factory=LannerCursor, options=LOCK_TIMEOUT_OPTION
            )
        except psycopg.Error as error:
            if is_retryable(error):
                raise PostgresUnavailable(error) from error
            raise
        conn.adapters.register_loader("numeric", SqliteNumericLoader)
        conn.adapters.register_dumper(bool, BoolAsIntDumper)
        return conn

    def connection(self):
        self._forget_lost_connection()
        return super().connection()

    def cursor(self, *args, **kwargs):
        self._forget_lost_connection()
        return super().cursor(*args, **kwargs)

    def _forget_lost_connection(self) -> None:
        """Once the server has cut this thread's connection (a restart, a failover, a network cut), the
        next use connects again instead of failing on it for good. Never inside a transaction: its
        statements must fail, not go on in another session; its rollback (outside) may reconnect."""
        conn = self._state.conn
        if conn is not None and conn.closed and not self._state.transactions:
            conn.close()
            self._state.reset()

    def begin(self, isolation_level=None):
        # write_tx() asks for SQLite's BEGIN IMMEDIATE; PostgreSQL's BEGIN already takes row locks on write.
        super().begin(None if isolation_level == "IMMEDIATE" else isolation_level)


def connect_postgres(url: str) -> LannerPostgresqlDatabase:
    """A connected PostgreSQL database at `url` (postgresql://…; models/store/database.py binds `db` to
    it)."""
    database = LannerPostgresqlDatabase(url, prefer_psycopg3=True)
    try:
        database.connect()
    except OperationalError as error:  # peewee's, wrapping PostgresUnavailable: no LannerError any more.
        raise PostgresUnreachable(
            f"Cannot connect to PostgreSQL ({one_line(error)}): "
            "is it running, and is LANNER_DATABASE_URL right?"
        ) from error
    return database
