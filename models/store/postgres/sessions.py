"""sessions: the statements of models/store/sessions.py mean the same on PostgreSQL."""

from __future__ import annotations

from models.store import sessions as base


class SessionStore(base.SessionStore):
    __slots__ = ()
    dialect = "postgres"
