"""What every store module shares: the Store base, the dispatch to a dialect's sibling, and small
helpers over a raw connection.

Each aggregate has a neutral base here (models/store/<aggregate>.py: the statements that mean the
same in both dialects, and the behaviour) and two siblings of the same name, models/store/sqlite/
<aggregate>.py and models/store/postgres/<aggregate>.py, with what each dialect spells its own way
(huey's BaseSqlStorage with SqliteStorage and PostgresStorage are the model). Neither sibling imports
the other.
"""

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


def fetch_single(conn, sql: str, params: tuple = ()) -> tuple:
    """The row of a statement that always returns one (an aggregate without GROUP BY, a bare SELECT of
    expressions, a PRAGMA that reports, INSERT ... RETURNING, a row this transaction has just made
    sure of), with the cursor closed."""
    row = fetch_one(conn, sql, params)
    assert row is not None, f"No row from {sql!r}"
    return row


def in_lock_order(rows, key_width: int) -> list:
    """`rows` sorted by their first `key_width` values (the upsert's conflict key), NULL first.

    Every writer that upserts several shared rows in one transaction (the flushers of all nodes, a
    postback) passes them through this, table by table in one fixed order: all of them then take
    their row locks in one global order, so two can wait on each other's rows but never deadlock.
    """
    return sorted(rows, key=lambda row: tuple(_ordered(value) for value in row[:key_width]))


def _ordered(value) -> tuple:
    """NULL before any value of the column (which holds one type), never compared with one."""
    return (False, 0) if value is None else (True, value)


def dialect_of_connection(conn) -> str:
    """The package of models/store/ whose statements run on a raw connection: 'sqlite' or 'postgres'."""
    return "sqlite" if isinstance(conn, sqlite3.Connection) else "postgres"


class Dialectal:
    """A neutral class whose dialect siblings (the same name in the same-named module of sqlite/ and
    postgres/) hold what each dialect spells its own way.

    The base declares what every sibling must define: a statement as an annotation without a value
    (`SQL_ENTRIES: str`), a method with @abstractmethod. A sibling that leaves one out fails when its
    module is imported, naming what it lacks.
    """

    __slots__ = ()
    dialect: str | None = None  # None on the neutral base; 'sqlite' or 'postgres' on a sibling.

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.dialect is None:
            return
        declared = {name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {})}
        missing = sorted(name for name in declared if name.isupper() and not hasattr(cls, name))
        missing += sorted(
            name for name in dir(cls) if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
        )
        if missing:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__} does not define {', '.join(missing)}")

    @classmethod
    def sibling_for(cls, conn) -> type:
        """This class's sibling for the connection's dialect (imported on first use: a SQLite
        process never loads psycopg); one dict lookup once known."""
        try:
            return _SIBLINGS[cls, type(conn)]
        except KeyError:
            pass
        if cls.dialect is not None:  # A sibling already: it is its own.
            return cls
        dialect = dialect_of_connection(conn)
        module = importlib.import_module(f"models.store.{dialect}.{cls.__module__.rsplit('.', 1)[1]}")
        sibling = getattr(module, cls.__name__)
        if not issubclass(sibling, cls) or sibling.dialect != dialect:
            raise TypeError(f"{module.__name__}.{cls.__name__} is no {dialect} sibling of {cls.__qualname__}")
        _SIBLINGS[cls, type(conn)] = sibling
        return sibling


_SIBLINGS: dict[tuple[type, type], type] = {}


class Store(Dialectal):
    """The statements of one aggregate over one raw connection; its writes join the caller's transaction.

    A store is made from the connection it runs on, whatever its dialect: `ConversionStore(conn)` with
    models/store/conversions.py's class on a PostgreSQL connection is models/store/postgres/
    conversions.py's ConversionStore (pathlib's `Path()` choosing PosixPath works the same way), so the
    domain names the neutral class of each aggregate and never a dialect.
    """

    __slots__ = ("conn",)

    def __new__(cls, conn, *args, **kwargs):
        if cls.dialect is None:
            cls = _SIBLINGS.get((cls, type(conn))) or cls.sibling_for(conn)
        return object.__new__(cls)

    def __init__(self, conn) -> None:
        self.conn = conn
