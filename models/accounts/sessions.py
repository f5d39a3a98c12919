"""Web panel sessions: opened at login with a new random id, found by the id's hash, sliding expiry,
ended at logout.

The id is 256 random bits (the cookie's value); only its SHA-256 is stored, as an API key's is
(apikeys.py): a fast hash is enough for a value nobody can guess. A new id at every login, never
one the browser brought, so a planted id (session fixation) never becomes a logged-in one. Each
session has its own CSRF token, which the panel puts in every form and checks on every write.
The expiry slides: a request moves it `hours` ahead, written at most once a TOUCH_EVERY_MS so a
page's requests do not each write.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass

from peewee import Database

from models.accounts.principal import Principal, user_principal
from models.store.database import STORE_ERRORS, write_tx
from models.store.sessions import SessionStore

logger = logging.getLogger(__name__)

TOUCH_EVERY_MS = 60_000
SESSION_ID_BYTES = 32  # 256 bits.


@dataclass(frozen=True)
class Session:
    id: str  # The cookie's value.
    user_id: int
    csrf_token: str
    expires_at: int  # Unix ms.
    principal: Principal


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def open_session(db: Database, user, hours: float, *, clock=time.time) -> Session:
    """A new session for `user` (a models.accounts.users.User whose password was just verified);
    expired sessions are swept in the same transaction."""
    now_ms = int(clock() * 1000)
    session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
    csrf_token = secrets.token_urlsafe(SESSION_ID_BYTES)
    expires_at = now_ms + int(hours * 3_600_000)
    with write_tx(db):
        store = SessionStore(db.connection())
        store.delete_expired_sessions(now_ms)
        store.insert_session(session_hash(session_id), user.id, csrf_token, now_ms, expires_at)
    principal = user_principal(user.id, user.name, user.role, user.hides_money, timezone=user.timezone)
    return Session(session_id, user.id, csrf_token, expires_at, principal)


def find_session(db: Database, session_id: str, hours: float, *, clock=time.time) -> Session | None:
    """The live session `session_id` names, its expiry moved on; None: unknown, expired, or its user
    disabled. A database too busy to move the expiry does not refuse the request."""
    if not session_id or len(session_id) > 100:
        return None
    id_hash = session_hash(session_id)
    store = SessionStore(db.connection())
    row = store.session(id_hash)
    if row is None:
        return None
    user_id, csrf_token, seen_at, expires_at, name, role, hides_money, is_disabled, timezone = row
    now_ms = int(clock() * 1000)
    if expires_at <= now_ms or is_disabled:
        return None
    if now_ms - seen_at >= TOUCH_EVERY_MS:
        expires_at = now_ms + int(hours * 3_600_000)
        try:
            with write_tx(db):
                store.touch_session(id_hash, now_ms, expires_at, now_ms - TOUCH_EVERY_MS + 1)
        except STORE_ERRORS as exc:
            logger.debug("Session of user %s: expiry not moved (%s)", user_id, exc)
    principal = user_principal(user_id, name, role, hides_money, timezone=timezone)
    return Session(session_id, user_id, csrf_token, expires_at, principal)


def end_session(db: Database, session_id: str) -> None:
    with write_tx(db):
        SessionStore(db.connection()).delete_session(session_hash(session_id))
