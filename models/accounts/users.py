"""Users: add, list, change, remove, with their role and "hide money" flag; the first admin.

A user's timezone is an IANA name (checked as a campaign's is) their periods, charts and times are
in; '' is the report default, UTC. Names are 1-64 ASCII letters, digits and `.`, `_`, `-`, `@` (an
e-mail address fits), unique without regard to case: `Anna` and `anna` are one user, kept as first
written. At least one enabled admin always remains: removing, disabling or demoting the last one is
refused.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import asdict, dataclass

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.errors import AccountConflict, AccountError, AccountNotFound
from models.accounts.passwords import hash_password
from models.accounts.principal import CLI, Principal
from models.choices import ROLES
from models.store.accounts import AccountStore
from models.store.database import write_tx

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
FIRST_ADMIN = "admin"


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    password_hash: str
    hides_money: bool
    is_disabled: bool
    created_at: int  # Unix ms.
    updated_at: int
    timezone: str = ""  # IANA name; '' is the report default (UTC).
    last_login_at: int | None = None  # The last panel login, Unix ms.

    @classmethod
    def from_row(cls, row: tuple | None) -> User:
        assert row is not None, "a user just written or found"
        id_, name, role, password_hash, hides_money, is_disabled, created_at, updated_at, tz, login = row
        return cls(
            id_,
            name,
            role,
            password_hash,
            bool(hides_money),
            bool(is_disabled),
            created_at,
            updated_at,
            tz,
            login,
        )

    def audited(self) -> dict:
        """The fields the audit log shows (never the hash; a login is no change)."""
        hidden = ("id", "password_hash", "last_login_at")
        return {key: value for key, value in asdict(self).items() if key not in hidden}


def _now() -> int:
    return int(time.time() * 1000)


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise AccountError(
            f"A user name must be 1-64 letters, digits, '.', '_', '-' or '@', starting with a letter "
            f"or digit, not {name!r}."
        )
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise AccountError(f"A role must be one of {', '.join(ROLES)}, not {role!r}.")
    return role


def check_timezone(name: str) -> str:
    """'' (the report default, UTC) or an IANA name, by the check a campaign's timezone passes."""
    from models.admin.errors import AdminError
    from models.admin.services import check_timezone as check_campaign_timezone

    if not name:
        return ""
    try:
        return check_campaign_timezone(name)
    except AdminError as exc:
        raise AccountError(str(exc)) from None


def find_user(db: Database, name: str) -> User | None:
    row = AccountStore(db.connection()).user_by_name(name)
    return User.from_row(row) if row else None


def get_user(db: Database, name: str) -> User:
    user = find_user(db, name)
    if user is None:
        raise AccountNotFound(f"There is no user {name!r}.")
    return user


def get_user_by_id(db: Database, user_id: int) -> User:
    row = AccountStore(db.connection()).user_by_id(user_id)
    if row is None:
        raise AccountNotFound(f"There is no user with id {user_id}.")
    return User.from_row(row)


def list_users(db: Database) -> list[User]:
    return [User.from_row(row) for row in AccountStore(db.connection()).users()]


def add_user(
    db: Database,
    name: str,
    role: str,
    password: str,
    *,
    hides_money: bool = False,
    timezone: str = "",
    actor: Principal = CLI,
) -> User:
    """A new, enabled user."""
    check_name(name)
    check_role(role)
    check_timezone(timezone)
    password_hash = hash_password(password)  # Outside the transaction: ~75 ms of CPU.
    with write_tx(db):
        store = AccountStore(db.connection())
        if (existing := store.user_by_name(name)) is not None:
            raise AccountConflict(f"A user named {existing[1]!r} exists already (names ignore case).")
        user_id = store.insert_user(name, role, password_hash, hides_money, timezone, _now())
        user = User.from_row(store.user_by_id(user_id))
        record_change(db, actor, "user", user.id, "create", None, user.audited())
    return user


def _refuse_losing_the_last_admin(store: AccountStore, user: User, what: str) -> None:
    if user.role == "admin" and not user.is_disabled and store.enabled_admins() <= 1:
        raise AccountError(
            f"{user.name!r} is the last enabled admin and cannot be {what}; add another admin first."
        )


def update_user(
    db: Database,
    name: str,
    *,
    role: str | None = None,
    hides_money: bool | None = None,
    is_disabled: bool | None = None,
    timezone: str | None = None,
    actor: Principal = CLI,
) -> User:
    """Change a user's role, money flag, disabled flag or timezone; None leaves one as it is."""
    if role is not None:
        check_role(role)
    if timezone is not None:
        check_timezone(timezone)
    with write_tx(db):
        store = AccountStore(db.connection())
        before = get_user(db, name)
        if (role not in (None, "admin")) or is_disabled:
            _refuse_losing_the_last_admin(store, before, "disabled" if is_disabled else "given another role")
        store.update_user(
            before.id,
            before.role if role is None else role,
            before.hides_money if hides_money is None else hides_money,
            before.is_disabled if is_disabled is None else is_disabled,
            before.timezone if timezone is None else timezone,
            _now(),
        )
        after = User.from_row(store.user_by_id(before.id))
        record_change(db, actor, "user", after.id, "update", before.audited(), after.audited())
    return after


def set_password(
    db: Database, name: str, password: str, *, actor: Principal = CLI, keep_session: str = ""
) -> User:
    """A new password; the user's panel sessions end (but `keep_session`, the id of the one that
    changed it): whoever knew the old password is logged out."""
    from models.accounts.sessions import session_hash
    from models.store.sessions import SessionStore

    password_hash = hash_password(password)
    with write_tx(db):
        user = get_user(db, name)
        AccountStore(db.connection()).set_password_hash(user.id, password_hash, _now())
        SessionStore(db.connection()).delete_user_sessions(
            user.id, session_hash(keep_session) if keep_session else ""
        )
        record_change(db, actor, "user", user.id, "passwd")
    return user


def remove_user(db: Database, name: str, *, actor: Principal = CLI) -> User:
    """Remove a user with their API keys and shares; the campaigns they owned become nobody's
    (admins only) and the audit log keeps their name."""
    with write_tx(db):
        store = AccountStore(db.connection())
        user = get_user(db, name)
        _refuse_losing_the_last_admin(store, user, "removed")
        store.delete_user(user.id)
        record_change(db, actor, "user", user.id, "remove", user.audited(), None)
    return user


def ensure_first_admin(db: Database) -> tuple[str, str] | None:
    """(name, password) of an admin created now because there was no user at all, else None.

    The password is random (16 URL-safe characters, 96 bits) and exists only in the return value:
    the caller prints it once.
    """
    if AccountStore(db.connection()).has_users():
        return None
    password = secrets.token_urlsafe(12)
    add_user(db, FIRST_ADMIN, "admin", password)
    return FIRST_ADMIN, password
