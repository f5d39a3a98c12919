"""Show-once values across a POST/redirect/GET: a write with something to show once (a new API key,
which no one can see again) puts it in a flash cookie and answers 303; the GET it redirects to takes
it and clears the cookie, so a reload shows nothing and creates nothing.

The value is encrypted and authenticated with keys derived from the session's id, which only the
browser holds (the database keeps its hash, models/accounts/sessions.py): the cookie is nothing
without the session, no row holds the value, and no URL or log line carries it. It names the page it
is for and expires after FLASH_SECONDS. A copy of the cookie sent again within that time, with the
session, would show it again; whoever holds the session can create a key anyway.

The standard library has no authenticated cipher (and `cryptography` is no dependency), so the
construction is HMAC-SHA256 as a PRF in counter mode for the keystream, then HMAC-SHA256 over the
nonce and ciphertext with a second derived key (encrypt-then-MAC).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import falcon

from models.accounts.sessions import Session
from routes.panel.session import COOKIE_CLEARED, PanelSessions

FLASH_COOKIE = "lanner_flash"
FLASH_SECONDS = 120
NONCE_BYTES = 16
TAG_BYTES = 32
# Browsers keep cookies of up to 4096 bytes, name and attributes included.
MAX_COOKIE_CHARS = 3800


def _keys(session: Session) -> tuple[bytes, bytes]:
    secret = session.id.encode()
    return (
        hmac.new(secret, b"lanner panel flash: encryption", hashlib.sha256).digest(),
        hmac.new(secret, b"lanner panel flash: authentication", hashlib.sha256).digest(),
    )


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    blocks = (
        hmac.new(key, nonce + n.to_bytes(8, "big"), hashlib.sha256).digest() for n in range(length // 32 + 1)
    )
    return b"".join(blocks)[:length]


def seal(session: Session, path: str, data: dict[str, Any], *, now: float) -> str:
    """`data` for `path`, as the cookie's value."""
    plain = json.dumps({"path": path, "expires": int(now) + FLASH_SECONDS, "data": data}).encode()
    encryption, authentication = _keys(session)
    nonce = secrets.token_bytes(NONCE_BYTES)
    cipher = bytes(a ^ b for a, b in zip(plain, _keystream(encryption, nonce, len(plain)), strict=True))
    tag = hmac.new(authentication, nonce + cipher, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(nonce + cipher + tag).decode().rstrip("=")


def unseal(session: Session, path: str, value: str, *, now: float) -> dict[str, Any] | None:
    """The data sealed for `path` in this session and not expired; None for anything else."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        return None
    if len(raw) < NONCE_BYTES + TAG_BYTES:
        return None
    nonce, cipher, tag = raw[:NONCE_BYTES], raw[NONCE_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
    encryption, authentication = _keys(session)
    if not hmac.compare_digest(tag, hmac.new(authentication, nonce + cipher, hashlib.sha256).digest()):
        return None
    stream = _keystream(encryption, nonce, len(cipher))
    sealed = json.loads(bytes(a ^ b for a, b in zip(cipher, stream, strict=True)))
    if sealed["path"] != path or sealed["expires"] < now:
        return None
    return sealed["data"]


class Flash:
    """Puts a show-once value on the way to a page and takes it there (with the sessions' clock)."""

    def __init__(self, sessions: PanelSessions) -> None:
        self.sessions = sessions

    def now(self) -> float:
        return (self.sessions.clock or time.time)()

    def put(
        self, req: falcon.Request, resp: falcon.Response, session: Session, path: str, data: dict
    ) -> bool:
        """Keep `data` for the next GET of `path` and redirect there (303); False, with nothing done, when
        it is too big for a cookie (the caller answers the page itself then)."""
        value = seal(session, path, data, now=self.now())
        if len(value) > MAX_COOKIE_CHARS:
            return False
        resp.set_cookie(
            FLASH_COOKIE,
            value,
            max_age=FLASH_SECONDS,
            path=path,
            secure=self.sessions.is_https(req),
            http_only=True,
            same_site="Lax",
        )
        resp.status = falcon.HTTP_303
        resp.location = path
        return True

    def take(self, req: falcon.Request, resp: falcon.Response, session: Session) -> dict[str, Any] | None:
        """The value kept for this page, once: the answer clears the cookie."""
        values = req.get_cookie_values(FLASH_COOKIE)
        if not values:
            return None
        resp.set_cookie(
            FLASH_COOKIE,
            "",
            expires=COOKIE_CLEARED,
            path=req.path,
            secure=self.sessions.is_https(req),
            http_only=True,
            same_site="Lax",
        )
        for value in values[:3]:
            data = unseal(session, req.path, value, now=self.now())
            if data is not None:
                return data
        return None
