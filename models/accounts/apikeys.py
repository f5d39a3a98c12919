"""API keys: many per install, each owned by a user, with a scope (read or write) and a label.

A key is `lnr_` + 32 random bytes (URL-safe base64), shown once when created; only its SHA-256 is
stored. A fast hash is enough here, unlike for passwords: a key has 256 bits of entropy, so a
stolen hash can only be attacked by trying keys at random, which no hash speed makes feasible,
while argon2 would cost ~75 ms of CPU on every API request. The first 12 characters are kept as
a prefix to tell keys apart in `lanner api key list`.

A key never has more rights than its user: a viewer's keys are read-only, and a key of a
disabled user, or of a removed one (its keys go with it), opens nothing (principal.py).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.errors import AccountError, AccountNotFound
from models.accounts.principal import CLI, Principal
from models.accounts.users import get_user
from models.choices import API_KEY_SCOPES
from models.store.database import write_tx
from models.store.sqlite.accounts import AccountStore

KEY_PREFIX = "lnr_"
PREFIX_LENGTH = 12
MAX_LABEL_LENGTH = 200


@dataclass(frozen=True)
class ApiKey:
    id: int
    user_id: int
    user: str  # The owner's name.
    scope: str
    label: str
    prefix: str
    created_at: int  # Unix ms.
    last_used_at: int | None  # To the minute (principal.LAST_USED_EVERY_MS).
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
