"""What every store module shares: the Store base and small helpers over a raw sqlite3 connection."""

from __future__ import annotations

import importlib
import sqlite3


def fetch_one(conn, sql: str, params: tuple = ()) -> tuple | None:
    """The first row, with the cursor closed: an open read snapshot would fail the next write."""
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchone()
    finally:
        cursor.close()


def float_sum(expression: str) -> str:
    """The sum of a money expression (DOUBLE): in SQLite a sum past the largest double is Infinity,
    which reports show as "not a finite number" (models/store/postgres/sums.py has PostgreSQL's)."""
    return f"SUM({expression})"


class Store:
    """The statements of one aggregate over one raw connection; its writes join the caller's transaction.

    A store is made from the connection it runs on, whatever its dialect: `ConversionStore(conn)` on a
    PostgreSQL connection is models/store/postgres/conversions.py's ConversionStore (pathlib's
    `Path()` choosing PosixPath works the same way), so the domain names one class per aggregate and
    never the dialect. A PostgreSQL store subclasses its SQLite one and replaces the statements whose
    meaning differs.
    """

    __slots__ = ("conn",)
    dialect = "sqlite"

    def __new__(cls, conn, *args, **kwargs):
        if cls.dialect == "sqlite" and not isinstance(conn, sqlite3.Connection):
            cls = postgres_sibling(cls)
        return object.__new__(cls)

    def __init__(self, conn) -> None:
        self.conn = conn


_SIBLINGS: dict[type, type] = {}


def postgres_sibling(cls: type) -> type:
    """The PostgreSQL class for a SQLite store: the same name in the same-named module of
    models/store/postgres/ (imported on first use: a SQLite process never loads psycopg)."""
    sibling = _SIBLINGS.get(cls)
    if sibling is None:
        module = importlib.import_module("models.store.postgres." + cls.__module__.rsplit(".", 1)[1])
        sibling = _SIBLINGS[cls] = getattr(module, cls.__name__)
    return sibling
