"""Who is asking: the Principal a request (by its API key) or a command acts as.

The admin API puts one on every request (apikeys.py `authenticate_api_key`); the services take one
as `actor` and the audit log names it. The rules of what a principal sees and edits are access.py's.
A value with no imports of ours: every service, the access rules and the audit log stand on it.

Two principals have no user: the install key (meta `api_key`, the report API's key since before
accounts; it stays an admin key with write scope) and the CLI (whoever can run `lanner` on the
server can read the database file anyway).
"""

from __future__ import annotations

from dataclasses import dataclass


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
