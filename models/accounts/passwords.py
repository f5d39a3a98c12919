"""Passwords: the length rule, argon2id hashing, and verification that rehashes when the
parameters changed.

Parameters: argon2id, 19 MiB of memory, 2 passes, 1 lane (OWASP's Password Storage Cheat Sheet's
first argon2id configuration; RFC 9106 recommends argon2id too). ~75 ms a verification on the
reference 2-core box. Why not argon2-cffi's default (RFC 9106's low-memory option, 64 MiB, 3
passes, 4 lanes: ~300 ms here): logins are checked by the admin worker, one process at idle CPU
priority on a small VPS; 4 lanes would take both cores from the click workers for a login, and
64 MiB per concurrent login is more than that worker's whole footprint. Login throttling (the
panel's) keeps guessing online slow; these parameters make an offline guess of a stolen hash cost
~19 MiB and ~75 ms of one core each. When they change, `verify_password` rehashes on the next
successful login.
"""

from __future__ import annotations

import logging

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from models.accounts.errors import AccountError
from models.store.accounts import AccountStore
from models.store.database import STORE_ERRORS, db, write_tx

logger = logging.getLogger(__name__)

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024  # Hashing is linear in the length: no megabyte passwords.
PASSWORD_HASHER = PasswordHasher(time_cost=2, memory_cost=19_456, parallelism=1, hash_len=32, salt_len=16)


def check_password(password: str) -> str:
    """The password if it may be used; one sentence if not."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"A password must be at least {MIN_PASSWORD_LENGTH} characters long.")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise AccountError(f"A password must be at most {MAX_PASSWORD_LENGTH} characters long.")
    return password


def hash_password(password: str) -> str:
    """The argon2id hash (PHC string: algorithm, parameters, salt, hash) of a checked password."""
    return PASSWORD_HASHER.hash(check_password(password))


def verify_password(user, password: str, *, database=db) -> bool:
    """Whether `password` is `user`'s (a models.accounts.users.User); a disabled user's never is.

    A hash made with other parameters than PASSWORD_HASHER's is replaced by a new one on success
    (only if the stored hash is still the one verified); a database too busy for that write costs
    the rehash, not the login.
    """
    if user.is_disabled or len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        PASSWORD_HASHER.verify(user.password_hash, password)
    except (VerificationError, InvalidHashError):
        return False
    if PASSWORD_HASHER.check_needs_rehash(user.password_hash):
        try:
            with write_tx(database):
                AccountStore(database.connection()).replace_password_hash(
                    user.id, user.password_hash, PASSWORD_HASHER.hash(password)
                )
        except STORE_ERRORS as exc:
            logger.warning("User %s: password verified but not rehashed (%s)", user.id, exc)
    return True
