"""Who is asking: the Principal a request (by its API key) or a command acts as.

The admin API puts one on every request (`authenticate_api_key`); the services take one as `actor`
and the audit log names it. The rules of what a principal sees and edits are access.py's
(`visible_campaign_ids` is re-exported here, the name the API calls).

Two principals have no user: the install key (meta `api_key`, the report API's key since before
accounts; it stays an admin key with write scope) and the CLI (whoever can run `lanner` on the
server can read the database file anyway).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass

from peewee import Database

from models.accounts.access import visible_campaign_ids  # The name the admin API imports from here.
from models.store.accounts import AccountStore
from models.store.database import STORE_ERRORS, write_tx
from models.store.meta import MetaStore

logger = logging.getLogger(__name__)

# A script polling the API every second would otherwise write on every request; a minute is as
# precise as "last used" needs to be to tell a live key from a forgotten one.
LAST_USED_EVERY_MS = 60_000


@dataclass(frozen=True)
class Principal:
    user_id: int | None  # None: the install key or the CLI.
    name: str
    role: str  # admin, buyer, viewer
    can_write: bool  # The key's scope allows writes and the role is not viewer.
    hides_money: bool  # Cost, revenue, profit and ROI are hidden from it.
    timezone: str = ""  # The user's IANA timezone (a panel session's); '' is the report default, UTC.

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


INSTALL_KEY = Principal(None, "install key", "admin", True, False)
CLI = Principal(None, "cli", "admin", True, False)


def user_principal(
    user_id: int, name: str, role: str, hides_money: bool, *, scope: str = "write", timezone: str = ""
) -> Principal:
    """A user acting with a key of `scope` (a session acts with write scope)."""
    can_write = scope == "write" and role != "viewer"
    return Principal(user_id, name, role, can_write, bool(hides_money), timezone or "")


def authenticate_api_key(db: Database, key: str, *, clock=time.time) -> Principal | None:
    """The principal `key` opens, or None: unknown, revoked, or its user disabled.

    The install key is compared in constant time. A user's key is found by its SHA-256 (apikeys.py):
    the lookup's timing depends on the hash, which an attacker cannot steer towards a stored one, so
    it leaks nothing about any key. Its last-used time moves at most once a LAST_USED_EVERY_MS; a
    database too busy for that write does not refuse the request.
    """
    from models.accounts.apikeys import key_hash

    if not key:
        return None
    conn = db.connection()
    install_key = MetaStore(conn).get("api_key") or ""
    if install_key and secrets.compare_digest(key.encode(), install_key.encode()):
        return INSTALL_KEY
    holder = AccountStore(conn).key_holder(key_hash(key))
    if holder is None:
        return None
    key_id, scope, is_revoked, last_used_at, user_id, name, role, hides_money, is_disabled = holder
    if is_revoked or is_disabled:
        return None
    now_ms = int(clock() * 1000)
    if last_used_at is None or now_ms - last_used_at >= LAST_USED_EVERY_MS:
        try:
            with write_tx(db):
                AccountStore(conn).touch_api_key(key_id, now_ms, now_ms - LAST_USED_EVERY_MS + 1)
        except STORE_ERRORS as exc:
            logger.debug("API key %s: last-used time not saved (%s)", key_id, exc)
    return user_principal(user_id, name, role, hides_money, scope=scope)


__all__ = [
    "CLI",
    "INSTALL_KEY",
    "LAST_USED_EVERY_MS",
    "Principal",
    "authenticate_api_key",
    "user_principal",
    "visible_campaign_ids",
]
