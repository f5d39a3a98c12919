"""Who is asking: the API key in `X-Api-Key` or `Authorization: Bearer`, as a principal, and what it may see.

Two seams the accounts work plugs into: `principal_for(db, key)` (the one key lookup) and
`visible_campaigns(req)` (the one campaign check). Until accounts exist the install's API key
(`lanner api key show`) is the only key, and an admin's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import falcon

from models.conversions.postbacks import keys_match, read_secret

if TYPE_CHECKING:
    from peewee import Database

ROLES = ("admin", "buyer", "viewer")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Principal:
    user_id: int | None  # None: the install key.
    name: str
    role: str  # admin, buyer or viewer
    can_write: bool
    hides_money: bool


INSTALL_KEY = Principal(user_id=None, name="install key", role="admin", can_write=True, hides_money=False)


def principal_for(db: Database, key: str) -> Principal | None:
    """The principal an API key stands for; None for a key nobody holds."""
    if keys_match(key, read_secret(db, "api_key")):
        return INSTALL_KEY
    return None


def sent_key(req: falcon.Request) -> str:
    authorization = req.get_header("Authorization") or ""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return req.get_header("X-Api-Key") or ""


class Authenticator:
    """Sets `req.context.principal` for a request with a known key; 401 without one, 403 for a write
    the principal may not make."""

    def __init__(self, db: Database, find_principal: Callable[[Database, str], Principal | None]) -> None:
        self.db = db
        self.find_principal = find_principal

    def __call__(self, req: falcon.Request) -> Principal:
        key = sent_key(req)
        if not key:
            raise falcon.HTTPUnauthorized(
                title="No API key",
                description="Send the API key in X-Api-Key or Authorization: Bearer.",
                challenges=["Bearer"],
            )
        principal = self.find_principal(self.db, key)
        if principal is None:
            raise falcon.HTTPUnauthorized(
                title="Wrong API key", description="The API key is not known.", challenges=["Bearer"]
            )
        if req.method in WRITE_METHODS and not principal.can_write:
            raise falcon.HTTPForbidden(
                title="Read-only key", description=f"{principal.name} may not make changes."
            )
        req.context.principal = principal
        return principal


def visible_campaigns(req: falcon.Request) -> frozenset[int] | None:
    """The campaign ids the principal may see and change; None for all of them.

    Every role sees every campaign until accounts say otherwise (the accounts work's
    visible_campaign_ids(db, principal) goes here)."""
    return None


def require_campaign(req: falcon.Request, campaign_id: int) -> None:
    """404 for a campaign the principal may not see, as for one that does not exist."""
    visible = visible_campaigns(req)
    if visible is not None and campaign_id not in visible:
        raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {campaign_id}.")
