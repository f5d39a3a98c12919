"""Campaign sharing: give a user sight of a campaign (and, with may_edit, the right to change it).

Sharing with the campaign's owner or an admin is refused: they already have more than a share
gives, and a share that changes nothing would only confuse the list.
"""

from __future__ import annotations

import time

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.errors import AccountError
from models.accounts.principal import CLI, Principal
from models.accounts.users import get_user
from models.store.accounts import AccountStore
from models.store.database import write_tx


def _share_field(user_name: str, may_edit: bool) -> dict[str, str]:
    """A share as the audit log shows it: one field per user, so a changed may_edit keeps the name."""
    return {f"share:{user_name}": "edit" if may_edit else "view"}


def share_campaign(
    db: Database, campaign_ref: str | int, user_name: str, *, may_edit: bool = False, actor: Principal = CLI
) -> None:
    """Share a campaign (by id or alias) with a user; sharing again changes may_edit."""
    from models.admin.rows import get_campaign

    with write_tx(db):
        campaign = get_campaign(db, campaign_ref)
        user = get_user(db, user_name)
        if user.role == "admin":
            raise AccountError(f"{user.name!r} is an admin and sees every campaign already.")
        if campaign.owner_id == user.id:
            raise AccountError(f"{user.name!r} owns campaign {campaign.alias!r} already.")
        store = AccountStore(db.connection())
        before = store.share_of(campaign.id, user.id)
        store.share(campaign.id, user.id, may_edit, int(time.time() * 1000))
        old = None if before is None else _share_field(user.name, before)
        record_change(db, actor, "campaign", campaign.id, "share", old, _share_field(user.name, may_edit))


def unshare_campaign(
    db: Database, campaign_ref: str | int, user_name: str, *, actor: Principal = CLI
) -> None:
    from models.admin.rows import get_campaign

    with write_tx(db):
        campaign = get_campaign(db, campaign_ref)
        user = get_user(db, user_name)
        store = AccountStore(db.connection())
        before = store.share_of(campaign.id, user.id)
        if before is None or not store.unshare(campaign.id, user.id):
            raise AccountError(f"Campaign {campaign.alias!r} is not shared with {user.name!r}.")
        record_change(db, actor, "campaign", campaign.id, "unshare", _share_field(user.name, before), None)


def campaign_shares(db: Database, campaign_id: int) -> list[tuple[str, bool]]:
    """(user name, may_edit) of everyone the campaign is shared with."""
    return [
        (name, may_edit) for _, name, may_edit in AccountStore(db.connection()).campaign_shares(campaign_id)
    ]


def user_shares(db: Database, user_id: int) -> dict[int, bool]:
    """campaign id -> may_edit, of every campaign shared with the user."""
    return AccountStore(db.connection()).shared_with(user_id)
