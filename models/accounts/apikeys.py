"""API keys: many per install, each owned by a user, with a scope (read or write) and a label.

A key is `lnr_` + 32 random bytes (URL-safe base64), shown once when created; only its SHA-256 is
stored. A fast hash is enough here, unlike for passwords: a key has 256 bits of entropy, so a
stolen hash can only be attacked by trying keys at random, which no hash speed makes feasible,
while argon2 would cost ~75 ms of CPU on every API request. The first 12 characters are kept as
a prefix to tell keys apart in `lanner api key list`.

A key never has more rights than its user: a viewer's keys are read-only, and a key of a
disabled user, or of a removed one (its keys go with it), opens nothing (`authenticate_api_key`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.errors import AccountError, AccountNotFound
from models.accounts.principal import CLI, INSTALL_KEY, Principal, user_principal
from models.accounts.users import get_user
from models.choices import API_KEY_SCOPES
from models.store.accounts import AccountStore
from models.store.database import STORE_ERRORS, write_tx
from models.store.meta import MetaStore

logger = logging.getLogger(__name__)

KEY_PREFIX = "lnr_"
PREFIX_LENGTH = 12
MAX_LABEL_LENGTH = 200
# A script polling the API every second would otherwise write on every request; a minute is as
# precise as "last used" needs to be to tell a live key from a forgotten one.
LAST_USED_EVERY_MS = 60_000


@dataclass(frozen=True)
class ApiKey:
    id: int
    user_id: int
    user: str  # The owner's name.
    scope: str
    label: str
    prefix: str
    created_at: int  # Unix ms.
    last_used_at: int | None  # To the minute (LAST_USED_EVERY_MS).
    is_revoked: bool

    @classmethod
    def from_row(cls, row: tuple | None) -> ApiKey:
        assert row is not None, "an API key just written or found"
        return cls(*row[:8], bool(row[8]))  # type: ignore[call-arg]  # mypy cannot count a row's slice.

    def audited(self) -> dict:
        return {"user": self.user, "scope": self.scope, "label": self.label, "prefix": self.prefix}


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def create_api_key(
    db: Database, user_name: str, scope: str, *, label: str = "", actor: Principal = CLI
) -> tuple[ApiKey, str]:
    """A new key for the user: (its row, the key itself, which is not stored and never shown again)."""
    if scope not in API_KEY_SCOPES:
        raise AccountError(f"A key's scope must be one of {', '.join(API_KEY_SCOPES)}, not {scope!r}.")
    if len(label) > MAX_LABEL_LENGTH:
        raise AccountError(f"A key's label must be at most {MAX_LABEL_LENGTH} characters long.")
    key = new_key()
    with write_tx(db):
        user = get_user(db, user_name)
        if user.role == "viewer" and scope == "write":
            raise AccountError(f"{user.name!r} is a viewer, who never writes: give them a read key.")
        store = AccountStore(db.connection())
        key_id = store.insert_api_key(user.id, key_hash(key), key[:PREFIX_LENGTH], scope, label, _now())
        created = ApiKey.from_row(store.api_key(key_id))
        record_change(db, actor, "api_key", key_id, "create", None, created.audited())
    return created, key


def list_api_keys(db: Database) -> list[ApiKey]:
    return [ApiKey.from_row(row) for row in AccountStore(db.connection()).api_keys()]


def revoke_api_key(db: Database, key_id: int, *, actor: Principal = CLI) -> ApiKey:
    """Revoke a key: requests with it are refused from now on. Revoked keys stay listed."""
    with write_tx(db):
        store = AccountStore(db.connection())
        row = store.api_key(key_id)
        if row is None:
            raise AccountNotFound(f"There is no API key {key_id}.")
        if not store.revoke_api_key(key_id):
            raise AccountError(f"API key {key_id} is revoked already.")
        record_change(db, actor, "api_key", key_id, "revoke", {"revoked": False}, {"revoked": True})
    return ApiKey.from_row(store.api_key(key_id))


def _now() -> int:
    return int(time.time() * 1000)


def authenticate_api_key(db: Database, key: str, *, clock=time.time) -> Principal | None:
    """The principal `key` opens, or None: unknown, revoked, or its user disabled.

    The install key is compared in constant time. A user's key is found by its SHA-256 (`key_hash`):
    the lookup's timing depends on the hash, which an attacker cannot steer towards a stored one, so
    it leaks nothing about any key. Its last-used time moves at most once a LAST_USED_EVERY_MS; a
    database too busy for that write does not refuse the request.
    """
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
