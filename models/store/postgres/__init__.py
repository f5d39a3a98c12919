"""PostgreSQL, the store of cluster mode: each aggregate's PostgreSQL sibling of the neutral store of
the same name in models/store/, the connection and its errors (database.py), the parameter style
(params.py), the money sum (sums.py), the baseline schema (schema.py) and the migration history
(migrations.py). Imported only for a PostgreSQL connection (a SQLite process never loads psycopg).
"""
