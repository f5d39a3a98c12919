"""Lanner's domain, one package per job: a click's path (clicks, routing, lookups), what follows it
(conversions, reporting), the services behind the CLI and the API (admin, ops), and the persistence
underneath (tables, store, migrations). Only the store writes SQL; the process's database handle and
its one write transaction are models/store/database.py's `db` and `write_tx`. Nothing is imported
here, so the light modules (choices, errors) cost a command nothing."""
