"""sessions on SQLite: what differs from PostgreSQL (models/store/postgres/sessions.py); the rest is
models/store/sessions.py's."""

from __future__ import annotations

from models.store import sessions as base


class SessionStore(base.SessionStore):
    __slots__ = ()
    dialect = "sqlite"
