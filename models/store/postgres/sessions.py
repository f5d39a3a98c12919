"""sessions: SQLite's statements (models/store/sqlite/sessions.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import sessions as sqlite


class SessionStore(sqlite.SessionStore):
    __slots__ = ()
    dialect = "postgres"
