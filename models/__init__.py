"""Lanner's domain, one package per job: a click's path (clicks, routing, lookups), what follows it
(conversions, reporting), the services behind the CLI and the API (admin, ops), and the persistence
underneath (tables, store, migrations). `db` is the process's database handle."""

from models.store.sqlite.database import db, open_database

__all__ = ["db", "open_database"]
