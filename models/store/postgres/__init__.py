"""PostgreSQL, the store of cluster mode: the connection and its errors (database.py), the baseline
schema (schema.py) and the migration history (migrations.py). The stores of models/store/sqlite/
get their siblings here one aggregate at a time; until they do, settings.py refuses postgresql:// URLs.
"""
