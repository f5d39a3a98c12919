"""Logging in to the panel: the password check, and throttling of failed attempts per IP and per name.

An unknown name costs what a wrong password costs (a dummy hash is verified), so timing does not
tell which names exist; a disabled user is refused with the same sentence as a wrong password.
After MAX_FAILURES failures within WINDOW_MS from one IP, or for one name, logins from it (or for
it) are refused until the oldest of them ages out of the window: Retry-After says when. The
failures are kept in the database (migration 0009 says why not in memory). A success clears the
name's failures, not the IP's: one good password must not reset a guesser's count from that IP; it is
the user's last login (`last_login_at`, the users page shows it).
"""

from __future__ import annotations

import functools
import time

from peewee import Database

from models.accounts.passwords import PASSWORD_HASHER, verify_password
from models.accounts.users import User, find_user
from models.errors import LannerError
from models.store.accounts import AccountStore
from models.store.database import write_tx
from models.store.sessions import SessionStore

MAX_FAILURES = 5
WINDOW_MS = 15 * 60_000
WRONG_LOGIN = "The name or the password is wrong, or the account is disabled."


class LoginRefused(LannerError):
    """A login that failed; the message is one sentence for the user."""


class LoginThrottled(LannerError):
    """Too many failed logins: none is tried for `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        minutes = max(1, round(retry_after / 60))
        super().__init__(
            f"Too many failed logins; try again in {minutes} minute{'s' if minutes != 1 else ''}."
        )
        self.retry_after = retry_after


@functools.cache
def dummy_hash() -> str:
    """A hash to verify an unknown name's password against (made once per process)."""
    return PASSWORD_HASHER.hash("not anybody's password")


def _subjects(ip: str, name: str) -> tuple[str, str]:
    return f"ip:{ip}", f"user:{name.lower()[:64]}"


def _check_throttle(store: SessionStore, subjects: tuple[str, ...], now_ms: int) -> None:
    wait_ms = 0
    for subject in subjects:
        count, oldest = store.failures_since(subject, now_ms - WINDOW_MS)
        if count >= MAX_FAILURES and oldest is not None:  # MIN() of the failures counted.
            wait_ms = max(wait_ms, oldest + WINDOW_MS - now_ms)
    if wait_ms > 0:
        raise LoginThrottled(-(-wait_ms // 1000))


def log_in(db: Database, name: str, password: str, ip: str, *, clock=time.time) -> User:
    """The user `name` and `password` open; LoginThrottled before any check when there were too many
    failures, LoginRefused (one sentence for every reason) when they open nothing."""
    user = _checked(db, name, password, ip, int(clock() * 1000), is_login=True)
    if user is None:
        raise LoginRefused(WRONG_LOGIN)
    return user


def confirm_password(db: Database, name: str, password: str, ip: str, *, clock=time.time) -> bool:
    """Whether `password` is logged-in user `name`'s (the account page asks before a new one):
    throttled and counted as a login is, so a stolen session guesses it no faster than the login
    form would; LoginThrottled when there were too many failures. Not a login: no last-login time."""
    return _checked(db, name, password, ip, int(clock() * 1000), is_login=False) is not None


def _checked(db: Database, name: str, password: str, ip: str, now_ms: int, *, is_login: bool) -> User | None:
    subjects = _subjects(ip, name)
    _check_throttle(SessionStore(db.connection()), subjects, now_ms)
    user = find_user(db, name) if name else None
    if user is None or user.is_disabled:  # The same work as a wrong password, and the same answer.
        verify_password(User(0, "", "viewer", dummy_hash(), False, False, 0, 0), password, database=db)
        is_right = False
    else:
        is_right = verify_password(user, password, database=db)
    with write_tx(db):
        store = SessionStore(db.connection())
        if is_right:
            store.delete_failures(subjects[1])
            if is_login and user is not None:  # is_right: there is one.
                AccountStore(db.connection()).set_last_login(user.id, now_ms)
        else:
            store.delete_old_failures(now_ms - WINDOW_MS)
            for subject in subjects:
                store.insert_failure(subject, now_ms)
    return user if is_right else None
