"""The process's database handle, `db`: a Peewee DatabaseProxy bound by `open_database`.

Every process (web worker, admin worker, `lanner worker`, a CLI command) opens its own, after
fork; the tables (models/tables/) are bound to the proxy, never to a database made at import time.
The dialect comes from LANNER_DATABASE_URL (settings.py): SQLite today (models/store/sqlite/).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from peewee import Database, DatabaseProxy, OperationalError

db = DatabaseProxy()

# What the database refuses a statement with while it is locked past its busy timeout, full, or its
# disk fails: the edges catch this (a 503, a retried round), never a driver's own classes.
STORE_ERRORS: tuple[type[Exception], ...] = (OperationalError, sqlite3.OperationalError)
# ...and what may be left to undo after one (an I/O error leaves SQLite's transaction state unsure).
STORE_ROLLBACK_ERRORS: tuple[type[Exception], ...] = (OperationalError, sqlite3.Error)


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
