"""The database's statements, behind one connection per process.

A neutral module per aggregate (audit.py, clicks.py, ...: the statements that mean the same in both
dialects, and the behaviour) with its siblings in sqlite/ and postgres/ (what each dialect spells its
own way; neither imports the other). The domain imports only the neutral modules: `AuditStore(conn)`
is the sibling for the connection's dialect (rows.py). database.py opens the process's database;
migrations.py, the dialect's migration history; functions.py, the Python functions the statements
compute with; files.py and spill.py, SQLite files the domain uses whatever the main database is.
"""
