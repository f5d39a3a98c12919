"""The state every `lanner` command shares: the settings, read once, and the database, opened on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from settings import Settings, load_settings

if TYPE_CHECKING:
    from peewee import Database


class Context:
    def __init__(self) -> None:
        try:
            self.settings: Settings = load_settings()
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        self._db: Database | None = None

    @property
    def db(self) -> Database:
        """The database, opened on first use; commands that touch data refuse an unmigrated one."""
        if self._db is None:
            from models.migrations.runner import require_current_schema
            from models.store.database import open_database

            self._db = open_database(self.settings.database_location, autocheckpoint=True)
            require_current_schema(self._db, self.settings.database_shown)
        return self._db


pass_context = click.make_pass_decorator(Context, ensure=True)


def refuse_on_postgres(settings: Settings, what: str) -> None:
    """Stop a command that only means something for a SQLite file, in one sentence."""
    if settings.uses_postgres:
        raise click.ClickException(f"This install's database is PostgreSQL: this command {what}.")
