"""SQLite, Lanner's embedded default: each aggregate's SQLite sibling of the neutral store of the same
name in models/store/ (in the manner of huey/storage.py's SqliteStorage), with the statements only
SQLite spells this way (INDEXED BY, PRAGMA, the functions registered on its connection).

The process's connection and pragmas (database.py), the money sum (sums.py), the migration history
(migrations.py). Reached only through models/store/'s neutral modules, never from the domain.
"""
