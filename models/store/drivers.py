"""Which database drivers a process may load.

peewee imports psycopg (the `cluster` extra's PostgreSQL driver) as it is imported itself, whenever
the driver is installed: ~11 MB of resident memory and ~130 ms of start-up in every process, web
workers included. A process that talks to SQLite only hides the driver from it first.
"""

from __future__ import annotations

import sys

POSTGRES_SCHEMES = ("postgres://", "postgresql://")
POSTGRES_DRIVERS = ("psycopg", "psycopg2")


def uses_postgres(database_url: str) -> bool:
    return database_url.strip().startswith(POSTGRES_SCHEMES)


def hide_postgres_drivers(database_url: str) -> bool:
    """Make `import psycopg` fail in this process unless `database_url` is PostgreSQL's (or peewee, or
    a driver, is imported already: then it is too late and nothing changes). Whether they are hidden."""
    if uses_postgres(database_url) or "peewee" in sys.modules:
        return False
    for name in POSTGRES_DRIVERS:
        # A None entry: `import name` raises ImportError (the import system's documented way; typeshed
        # types sys.modules as modules only).
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    return sys.modules["psycopg"] is None


def allow_postgres_drivers() -> bool:
    """Undo hide_postgres_drivers for a command that names a PostgreSQL database itself (`lanner db
    copy`), while nothing has imported peewee yet (nothing has seen the driver hidden). Whether the
    driver may be imported now."""
    if "peewee" in sys.modules:
        return sys.modules.get("psycopg") is not None
    for name in POSTGRES_DRIVERS:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
    return True
