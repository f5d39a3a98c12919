"""Logging in to the panel: the password check, and the throttle on failed attempts.

An unknown name costs what a wrong password costs (a dummy hash is verified), so timing does not
tell which names exist; a disabled user is refused with the same sentence as a wrong password.

The throttle follows OWASP's Authentication Cheat Sheet, "Account Lockout" (cheatsheetseries.owasp.org/
cheatsheets/Authentication_Cheat_Sheet.html#account-lockout): a threshold, an observation window and a
lockout duration, the duration exponential rather than fixed, and the care that a lockout cannot be used
to lock other users out. Its keys are those of OWASP's "Slow Down Online Guessing Attacks with Device
Cookies" (owasp.org/www-community/Slow_Down_Online_Guessing_Attacks_with_Device_Cookies): a trusted
client is locked out on its own, and only untrusted clients share a lockout of the account. Here a
trusted client is an address the user has logged in from (a success writes it; KNOWN_ADDRESSES per
user, for KNOWN_FOR_MS), standing for the device cookie: weaker than one (whoever shares the user's
address, behind one NAT, shares its trust and its pair's backoff), but nothing for the browser to keep.
Failures are counted over WINDOW_MS three ways:

- per (address, name): PAIR_FREE failures wait for nothing (typing mistakes); after them an attempt
  waits PAIR_WAIT_MS after the newest failure, doubled with each further one, at most MAX_WAIT_MS.
  Failures from other addresses never count here, so a stranger elsewhere cannot lock a user out.
- per address, any names: after ADDRESS_LIMIT failures the address is refused until the oldest of them
  ages out, so one address cannot spray many names. A name that logged in from it before is exempt
  (its pair's backoff still holds).
- per name, from addresses it never logged in from: after NAME_LIMIT failures the name is refused to
  every such address until the oldest ages out, so a guess spread over many addresses is slowed as
  one from a single address is, while the right password from a known address still logs in.

An address is an IPv4 address or an IPv6 /64 (one host commonly holds a whole /64). Names are keyed as
typed (lower-cased, NAME_KEY_LENGTH characters), whether a user has them or not, so a lockout does not
tell which names exist. Retry-After is the longest wait that applies. The failures are kept in the
database, not in memory: there are several worker processes, and the admin worker is recycled (0009).

Storage is bounded per address: a failure writes one row, a refused attempt writes nothing, and rows
older than WINDOW_MS are deleted at each failure, so an address holds at most ADDRESS_LIMIT rows for
names it never logged in as, and its pairs' backoff for the few that did. `login_address` is written
only by a right password and keeps KNOWN_ADDRESSES rows per user. A success deletes its own pair's
failures, not the address's for other names nor the name's from other addresses: one good password must
not reset a guesser's count. It is the user's last login (`last_login_at`, the users page shows it).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import time

from peewee import Database

from models.accounts.passwords import PASSWORD_HASHER, verify_password
from models.accounts.users import User, find_user
from models.errors import LannerError
from models.store.accounts import AccountStore
from models.store.database import write_tx
from models.store.sessions import SessionStore

logger = logging.getLogger(__name__)

WINDOW_MS = 60 * 60_000  # The observation window: older failures count for nothing and are deleted.
PAIR_FREE = 5
PAIR_WAIT_MS = 30_000
MAX_WAIT_MS = 15 * 60_000
ADDRESS_LIMIT = 20
NAME_LIMIT = 10
KNOWN_ADDRESSES = 10
KNOWN_FOR_MS = 90 * 86_400_000
NAME_KEY_LENGTH = 64
IPV6_PREFIX = 64
WRONG_LOGIN = "The name or the password is wrong, or the account is disabled."


class LoginRefused(LannerError):
    """A login that failed; the message is one sentence for the user."""


class LoginThrottled(LannerError):
    """Too many failed logins: none is tried for `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        if retry_after < 90:
            wait = f"{retry_after} second{'s' if retry_after != 1 else ''}"
        else:
            minutes = round(retry_after / 60)
            wait = f"{minutes} minutes"
        super().__init__(f"Too many failed logins; try again in {wait}.")
        self.retry_after = retry_after


@functools.cache
def dummy_hash() -> str:
    """A hash to verify an unknown name's password against (made once per process)."""
    return PASSWORD_HASHER.hash("not anybody's password")


def address_key(ip: str) -> str:
    """The address failures are counted by: an IPv4 address, an IPv6 address's /64 (an IPv4-mapped one
    as its IPv4), or whatever else the client address was, cut short."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))
    return str(address)


def name_key(name: str) -> str:
    return name.lower()[:NAME_KEY_LENGTH]


def pair_wait_ms(failures: int) -> int:
    """How long after the newest of `failures` failures of one (address, name) the next attempt waits."""
    if failures < PAIR_FREE:
        return 0
    return min(MAX_WAIT_MS, PAIR_WAIT_MS << min(failures - PAIR_FREE, 32))


def _wait_ms(store: SessionStore, address: str, name: str, is_known_address: bool, now_ms: int) -> int:
    """How long an attempt of `name` from `address` must wait (0: try it now)."""
    since = now_ms - WINDOW_MS
    waits = [0]
    count, newest = store.pair_failures(address, name, since)
    if newest is not None:  # MAX() of the failures counted, when there were any.
        waits.append(newest + pair_wait_ms(count) - now_ms)
    if not is_known_address:
        limiting = store.nth_address_failure(address, since, ADDRESS_LIMIT)
        if limiting is not None:
            waits.append(limiting + WINDOW_MS - now_ms)
        limiting = store.nth_unknown_address_failure(name, since, NAME_LIMIT)
        if limiting is not None:
            waits.append(limiting + WINDOW_MS - now_ms)
    return max(waits)


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
    form would; LoginThrottled when there were too many failures. Not a login: no last-login time,
    and the address is not remembered."""
    return _checked(db, name, password, ip, int(clock() * 1000), is_login=False) is not None


def _checked(db: Database, name: str, password: str, ip: str, now_ms: int, *, is_login: bool) -> User | None:
    address, key = address_key(ip), name_key(name)
    store = SessionStore(db.connection())
    # Asked for every name, a user's or not: the same statements whatever the name.
    is_known = store.is_known_address(name, address, now_ms - KNOWN_FOR_MS)
    wait_ms = _wait_ms(store, address, key, is_known, now_ms)
    if wait_ms > 0:
        raise LoginThrottled(-(-wait_ms // 1000))
    user = find_user(db, name) if name else None
    if user is None or user.is_disabled:  # The same work as a wrong password, and the same answer.
        verify_password(User(0, "", "viewer", dummy_hash(), False, False, 0, 0), password, database=db)
        is_right = False
    else:
        is_right = verify_password(user, password, database=db)
    with write_tx(db):
        store = SessionStore(db.connection())
        if is_right:
            store.delete_pair_failures(address, key)
            if is_login and user is not None:  # is_right: there is one.
                AccountStore(db.connection()).set_last_login(user.id, now_ms)
                store.remember_address(user.id, address, now_ms, KNOWN_ADDRESSES, now_ms - KNOWN_FOR_MS)
        else:
            store.delete_old_failures(now_ms - WINDOW_MS)
            store.insert_failure(address, key, is_known, now_ms)
            # OWASP: log lockouts. A user's name only (the log is no place a stranger writes to at will),
            # at the failure that reached the limit: the attempts after it are refused unwritten.
            if (
                user is not None
                and not is_known
                and store.nth_unknown_address_failure(key, now_ms - WINDOW_MS, NAME_LIMIT) is not None
            ):
                logger.warning(
                    "login: %d failed logins as %r from addresses it never logged in from within %d "
                    "minutes; such addresses are refused for it until the oldest ages out",
                    NAME_LIMIT,
                    user.name,
                    WINDOW_MS // 60_000,
                )
    return user if is_right else None
