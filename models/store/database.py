"""The process's database handle, `db`, and the one way to write: `write_tx()`.

Every process (web worker, admin worker, `lanner worker`, a CLI command) opens its own, after
fork; the tables (models/tables/) are bound to the proxy, never to a database made at import time.
The dialect comes from LANNER_DATABASE_URL (settings.py): SQLite today (models/store/sqlite/).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from peewee import Database, DatabaseProxy, OperationalError

from models.errors import LannerError

db = DatabaseProxy()


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
# must answer for either (a postback's 503, the flusher's retried round) catch this tuple.
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

    def __exit__(self, kind, exc, traceback) -> bool:
        try:
            self._tx.__exit__(kind, exc, traceback)
        except DRIVER_ERRORS as failure:
            # SQLite rolls back by itself after "database or disk is full"; peewee's own rollback then
            # fails with "cannot rollback", which must hide neither a refused COMMIT nor the body's error.
            if exc is None:
                raise StoreBusy(first_driver_error(failure)) from failure
            if isinstance(exc, DRIVER_ERRORS):
                raise StoreBusy(exc) from exc
            raise exc
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


def open_database(path: Path, *, autocheckpoint: bool = False) -> Database:
    """Bind `db` to the SQLite file at `path` and connect (closing this thread's connection to the
    one bound before). `autocheckpoint` is for CLI bulk work only."""
    from models.store.sqlite.database import connect_sqlite

    previous = db.obj
    if previous is not None and not previous.is_closed():
        previous.close()
    database = connect_sqlite(path, autocheckpoint=autocheckpoint)
    db.initialize(database)
    return db
