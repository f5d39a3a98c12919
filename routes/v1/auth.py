"""Who is asking: the API key in `X-Api-Key` or `Authorization: Bearer`, as a principal, and what it may see.

The key lookup is models/accounts/apikeys.py's (users' keys by hash, and the install key as an
admin's); what a principal may see and change is models/accounts/access.py's. `require_campaign`
is the one campaign check of every route: a campaign the principal may not see is a 404 (as one
that does not exist), one it may see but not change is a 403 on a write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import falcon

from models.accounts.access import creates_campaigns, editable_campaign_ids, visible_campaign_ids
from models.accounts.apikeys import authenticate_api_key
from models.accounts.principal import INSTALL_KEY, Principal

if TYPE_CHECKING:
    from peewee import Database

__all__ = [
    "INSTALL_KEY",
    "Authenticator",
    "Principal",
    "principal_for",
    "require_campaign",
    "visible_campaigns",
]

ROLES = ("admin", "buyer", "viewer")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def principal_for(db: Database, key: str) -> Principal | None:
    """The principal an API key stands for; None for a key nobody holds (or a revoked one)."""
    return authenticate_api_key(db, key)


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
        req.context.db = self.db
        return principal


def visible_campaigns(req: falcon.Request) -> frozenset[int] | None:
    """The campaign ids the principal may see; None for all of them (an admin)."""
    if "visible" not in req.context:
        visible = visible_campaign_ids(req.context.db, req.context.principal)
        req.context.visible = None if visible is None else frozenset(visible)
    return req.context.visible


def require_campaign(req: falcon.Request, campaign_id: int) -> None:
    """404 for a campaign the principal may not see, as for one that does not exist; 403 for a write
    to one it may see but not change (shared with it read-only)."""
    visible = visible_campaigns(req)
    if visible is not None and campaign_id not in visible:
        raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {campaign_id}.")
    if req.method in WRITE_METHODS:
        editable = editable_campaign_ids(req.context.db, req.context.principal)
        if editable is not None and campaign_id not in editable:
            raise falcon.HTTPForbidden(
                title="Read-only campaign",
                description=f"{req.context.principal.name} may see campaign {campaign_id} but not change it.",
            )


def require_creator(req: falcon.Request, what: str) -> None:
    """403 unless the principal may create campaigns and offers (admins and buyers with write)."""
    if not creates_campaigns(req.context.principal):
        raise falcon.HTTPForbidden(
            title="Not allowed", description=f"{req.context.principal.name} may not create {what}."
        )


def require_admin(req: falcon.Request, what: str) -> None:
    """403 unless the principal is an admin: install-wide settings (status maps) are theirs."""
    if req.context.principal.role != "admin":
        raise falcon.HTTPForbidden(title="Not allowed", description=f"Only an admin may change {what}.")
