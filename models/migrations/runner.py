"""Apply numbered migrations, each together with its history row in one transaction.

SQLite applies each migration's `apply(db)`. PostgreSQL starts from a baseline that stands for the
migrations up to its `baseline_through` (models/store/postgres/schema.py), applied with all their
history rows in one transaction, then each later migration's `apply_postgres(db)`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from peewee import Database

import models.migrations as migrations_package
from models.errors import LannerError
from models.store.database import dialect_of, write_tx
from models.store.migrations import MigrationHistory, migration_history


@dataclass(frozen=True)
class MigrationState:
    name: str
    applied_at: int | None  # Unix milliseconds; None while pending.


class MigrationError(LannerError):
    """A migration cannot be applied on this database's dialect."""


def migration_names() -> list[str]:
    return sorted(
        info.name for info in pkgutil.iter_modules(migrations_package.__path__) if info.name[:4].isdigit()
    )


def required_version() -> str:
    """The newest migration the code needs; web workers refuse an older database."""
    return migration_names()[-1]


def history_of(db: Database) -> MigrationHistory:
    """The migration history store of `db`'s dialect (models/store/<dialect>/migrations.py)."""
    return migration_history(db)


def migration_status(db: Database) -> list[MigrationState]:
    applied = history_of(db).applied()
    return [MigrationState(name, applied.get(name)) for name in migration_names()]


def pending_migrations(db: Database) -> list[str]:
    applied = history_of(db).applied()
    return [name for name in migration_names() if name not in applied]


def _plan(db: Database, history, pending: list[str]) -> Iterator[tuple[list[str], Callable[[], None]]]:
    """The pending migrations as (names, step) pairs, each step one transaction."""
    through = history.baseline_through
    if through is not None and pending and pending[0] <= through:
        covered = [name for name in pending if name <= through]
        if covered != [name for name in migration_names() if name <= through]:
            raise MigrationError(
                f"The database has part of the baseline's migrations ({', '.join(covered)} missing): "
                "migrate an empty database instead."
            )
        yield covered, lambda: history.create_baseline(int(time.time() * 1000))
        pending = pending[len(covered) :]
    for name in pending:
        module = importlib.import_module(f"{migrations_package.__name__}.{name}")
        step = getattr(module, history.step_function, None)
        if step is None:
            raise MigrationError(f"Migration {name} has no {dialect_of(db)} step ({history.step_function}).")
        yield [name], functools.partial(step, db)


def migrate(
    db: Database, on_applied: Callable[[str], None] | None = None, *, up_to: str | None = None
) -> list[str]:
    """Apply every pending migration in order (or up to and including `up_to`); return their names.

    On PostgreSQL `up_to` inside the baseline applies the whole baseline: it is one step."""
    if up_to is not None and up_to not in migration_names():
        raise ValueError(f"No migration is named {up_to!r}.")
    history = history_of(db)
    done = []
    for names, step in _plan(db, history, pending_migrations(db)):
        if up_to is not None and names[0] > up_to:
            break
        with write_tx(db):
            step()
            applied_at = int(time.time() * 1000)
            for name in names:
                history.record(name, applied_at)
        done += names
        if on_applied:
            for name in names:
                on_applied(name)
    return done


class SchemaOutdated(LannerError, RuntimeError):
    """The database is older than this code; `lanner db migrate` fixes it."""


def require_current_schema(db: Database, path: object) -> None:
    """Refuse a database older than the code, with the fix in the message: the one schema check of
    every process (web and admin workers, `lanner worker`, `lanner serve`, the CLI's commands)."""
    if not schema_is_current(db):
        raise SchemaOutdated(f"The database {path} needs migrating: run `lanner db migrate`.")


def schema_is_current(db: Database) -> bool:
    try:
        return history_of(db).is_applied(required_version())
    except Exception:  # No history table yet: never migrated.
        return False
