"""Lanner's domain, one package per job: a click's path (clicks, routing, lookups), what follows it
(conversions, reporting), the services behind the CLI and the API (admin, ops), and the persistence
underneath (tables, store, migrations). The process's database handle is
models/store/sqlite/database.py's `db`. Nothing is imported here, so the light modules (choices,
errors) cost a command nothing."""
