"""The process's database handle, `db`, and the one way to write: `write_tx()`.

Every process (web worker, admin worker, `lanner worker`, a CLI command) opens its own, after
fork; the tables (models/tables/) are bound to the proxy, never to a database made at import time.
The dialect comes from LANNER_DATABASE_URL (settings.py): SQLite (models/store/sqlite/), or PostgreSQL
(models/store/postgres/, cluster mode); the domain reaches either only through this module and the
neutral stores of models/store/.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal, cast

from peewee import Database, DatabaseProxy, OperationalError

from models.errors import LannerError
from models.store.connecting import BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS
from models.store.connecting import PostgresUnreachable as PostgresUnreachable

# peewee's proxy, bound by open_database(); the tables are bound to it. It forwards every attribute to
# the Database bound, so the domain holds it as one (`proxy` is for binding it).
proxy = DatabaseProxy()
db = cast(Database, proxy)


class StoreBusy(LannerError):
    """The database refused a write for now: locked past its busy timeout, full, or its disk failing.

    Nothing was written (the transaction rolled back); the same write can be tried again later.
    `cause` is the driver's own error.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"The database cannot take this write now ({cause}); try again in a moment.")
        self.cause = cause


# What a statement outside a write transaction (a read on the raw connection) may be refused with
# while the database is locked or its disk fails; write_tx turns these into StoreBusy. The edges that
# must answer for either (a postback's 503, the flusher's retried round) catch this tuple. PostgreSQL's
# refusals arrive as peewee's OperationalError too (models/store/postgres/database.py raises its
# PostgresUnavailable, a subclass), so psycopg is not imported where SQLite is used.
DRIVER_ERRORS: tuple[type[Exception], ...] = (OperationalError, sqlite3.OperationalError)
STORE_ERRORS: tuple[type[Exception], ...] = (StoreBusy, *DRIVER_ERRORS)
# ...and what may be left to undo after one (an I/O error leaves SQLite's transaction state unsure).
STORE_ROLLBACK_ERRORS: tuple[type[Exception], ...] = (OperationalError, sqlite3.Error)


class WriteTransaction:
    """One write transaction that holds the write lock from its first statement (SQLite's BEGIN
    IMMEDIATE: no deadlock-prone upgrade from a read lock), as a context manager. Nested, a savepoint."""

    __slots__ = ("_tx",)

    def __init__(self, database: Database) -> None:
        self._tx = database.atomic("IMMEDIATE")

    def __enter__(self):
        try:
            return self._tx.__enter__()
        except DRIVER_ERRORS as exc:
            raise StoreBusy(exc) from exc

    def __exit__(self, kind, exc, traceback) -> Literal[False]:
        try:
            self._tx.__exit__(kind, exc, traceback)
        except DRIVER_ERRORS as failure:
            # SQLite rolls back by itself after "database or disk is full"; peewee's own rollback then
            # fails with "cannot rollback", which must hide neither a refused COMMIT nor the body's error.
            if exc is None:
                raise StoreBusy(first_driver_error(failure)) from failure
            if isinstance(exc, DRIVER_ERRORS):
                raise StoreBusy(exc) from exc
            # Any other error of the body goes on as it is (returning False below lets it through).
        if isinstance(exc, DRIVER_ERRORS):
            raise StoreBusy(exc) from exc
        return False


def first_driver_error(error: BaseException) -> BaseException:
    """The driver error that started a chain of them (a COMMIT refused, then its rollback)."""
    while isinstance(error.__context__, DRIVER_ERRORS):
        error = error.__context__
    return error


def write_tx(database: Database = db) -> WriteTransaction:
    """The transaction every write runs in (`with write_tx(): ...`); raises StoreBusy when refused."""
    return WriteTransaction(database)


# What a read transaction must ask for to see one snapshot: SQLite's deferred BEGIN already does (in WAL
# mode a reader keeps the state of its first read); PostgreSQL's default READ COMMITTED gives every
# statement a snapshot of its own, REPEATABLE READ one for the whole transaction.
SNAPSHOT_LEVELS = {"sqlite": None, "postgres": "REPEATABLE READ"}


def read_tx(database: Database = db):
    """A read transaction whose statements all see the same committed state (`with read_tx(db): ...`):
    what the tracker's configuration and its counters with the spool position are read in."""
    level = SNAPSHOT_LEVELS[dialect_of(database)]
    return database.atomic(level) if level else database.atomic()


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def connect(location: Path | str, *, autocheckpoint: bool = False) -> Database:
    """A connected database at `location`, bound to nothing: a SQLite file's path (or its sqlite:///
    URL), or a postgresql:// URL (its dialect's package imported only then). `autocheckpoint` is for
    CLI bulk work on SQLite only."""
    if isinstance(location, str) and location.startswith(POSTGRES_SCHEMES):
        from models.store.postgres.database import connect_postgres

        return connect_postgres(location)
    from models.store.sqlite.database import connect_sqlite

    return connect_sqlite(sqlite_path(location), autocheckpoint=autocheckpoint)


def open_database(location: Path | str, *, autocheckpoint: bool = False) -> Database:
    """Bind `db` to the database at `location` and connect (closing this thread's connection to the
    one bound before): as connect()."""
    previous = proxy.obj
    if previous is not None and not previous.is_closed():
        previous.close()
    proxy.initialize(connect(location, autocheckpoint=autocheckpoint))
    return db


def sqlite_path(location: Path | str) -> Path:
    """The file of a SQLite location: a path, or playhouse.db_url's sqlite:///PATH (sqlite:////abs)."""
    if isinstance(location, str) and location.startswith("sqlite:///"):
        return Path(location[len("sqlite:///") :])
    return Path(location)


def dialect_of(database: Database) -> str:
    """Which package of models/store/ holds the statements for `database`: 'sqlite' or 'postgres'."""
    return getattr(database, "dialect", "sqlite")  # A SqliteDatabase made outside connect_sqlite has none.
