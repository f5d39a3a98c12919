"""Who sees and who edits which campaign: the rules, in one place, for the API, the panel and the CLI.

- admin: sees and edits every campaign, including those owned by nobody (owner_id NULL).
- buyer: sees the campaigns they own and those shared with them; edits those they own and those
  shared with them with may_edit; creates campaigns (which they then own).
- viewer: sees the campaigns they own and those shared with them, and never writes. This is
  Binom's viewer (a read-only user who sees what is shared with them), not Keitaro's read-only
  role that sees everything: a viewer is usually someone outside the team (a client, an affiliate
  manager), so seeing everything must be something an admin grants campaign by campaign. A viewer
  can own a campaign only if an admin gives them one; owning it still gives no write.
- a principal without write (a read-scope key, a viewer) edits nothing, whatever its role.
- offers have no owner yet: admins and buyers with write create and change them (`creates_campaigns`).
  In the panel a buyer or viewer is shown the offers their visible campaigns use, and those no campaign
  uses yet (a buyer's new offer, before a stream sends to it): `visible_offer_ids`; the API lists the
  same, and answers 404 for any other, as for one that does not exist. The same offers are the only ones
  they may use (a new campaign's offer, a stream's offers and fallback): models/admin/services.py
  check_usable_offers, which the API and the panel's editor both go through.
- landers have an owner (`lander.owner_id`: the user who made it; NULL when the CLI or the install key
  did). An admin sees, uses and changes every lander; a buyer or viewer sees those they own and those
  the streams of their visible campaigns send to (`visible_lander_ids`), and may use in a stream only
  those (as offers); a buyer with write changes only the landers they own (`edits_lander`). Another's
  lander is a 404, as one that does not exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from peewee import Database

from models.admin.errors import AdminNotFound
from models.admin.rows import get_lander, get_offer, list_offers, offer_campaigns
from models.store.accounts import AccountStore

if TYPE_CHECKING:
    from models.accounts.principal import Principal
    from models.tables.lander import Lander
    from models.tables.offer import Offer


def visible_campaign_ids(db: Database, principal: Principal) -> set[int] | None:
    """The ids of the campaigns `principal` may see; None: every campaign."""
    if principal.role == "admin":
        return None
    if principal.user_id is None:
        return set()
    store = AccountStore(db.connection())
    return store.owned_campaigns(principal.user_id) | set(store.shared_with(principal.user_id))


def editable_campaign_ids(db: Database, principal: Principal) -> set[int] | None:
    """The ids of the campaigns `principal` may change; None: every campaign."""
    if not principal.can_write or principal.role == "viewer":
        return set()
    if principal.role == "admin":
        return None
    if principal.user_id is None:
        return set()
    store = AccountStore(db.connection())
    shared = store.shared_with(principal.user_id)
    return store.owned_campaigns(principal.user_id) | {cid for cid, may_edit in shared.items() if may_edit}


def sees_campaign(db: Database, principal: Principal, campaign_id: int) -> bool:
    visible = visible_campaign_ids(db, principal)
    return visible is None or campaign_id in visible


def edits_campaign(db: Database, principal: Principal, campaign_id: int) -> bool:
    editable = editable_campaign_ids(db, principal)
    return editable is None or campaign_id in editable


def uneditable_campaigns(db: Database, principal: Principal, campaign_ids) -> list[int]:
    """Those of `campaign_ids` `principal` may not change (a traffic source's cost needs all of them)."""
    editable = editable_campaign_ids(db, principal)
    return [] if editable is None else [i for i in campaign_ids if i not in editable]


def creates_campaigns(principal: Principal) -> bool:
    """Whether `principal` may create campaigns (and offers for them): admins and buyers, with write."""
    return principal.can_write and principal.role in ("admin", "buyer")


def visible_offer_ids(db: Database, principal: Principal) -> set[int] | None:
    """The offers the panel and the API list for `principal`; None: every offer (an admin)."""
    visible = visible_campaign_ids(db, principal)
    if visible is None:
        return None
    used = offer_campaigns()
    return {offer.id for offer in list_offers(db) if offer.id not in used or used[offer.id] & visible}


def visible_offers(db: Database, principal: Principal) -> list[Offer]:
    """The offers `principal` may see, by id."""
    visible = visible_offer_ids(db, principal)
    return [offer for offer in list_offers(db) if visible is None or offer.id in visible]


def visible_offer(db: Database, principal: Principal, offer_id: int) -> Offer:
    """An offer `principal` may see; AdminNotFound, as for one that does not exist, for one it may not."""
    offer = get_offer(offer_id)
    visible = visible_offer_ids(db, principal)
    if visible is not None and offer.id not in visible:
        raise AdminNotFound(f"There is no offer {offer_id}.")
    return offer


def visible_lander_ids(db: Database, principal: Principal) -> set[int] | None:
    """The landers `principal` sees (and may send a stream to); None: every lander (an admin)."""
    from models.tables.campaign import Stream
    from models.tables.lander import Lander, StreamLander

    visible = visible_campaign_ids(db, principal)
    if visible is None:
        return None
    owned = set()
    if principal.user_id is not None:
        owned = {row.id for row in Lander.select(Lander.id).where(Lander.owner_id == principal.user_id)}
    used = set()
    if visible:
        query = (
            StreamLander.select(StreamLander.lander_id)
            .join(Stream)
            .where(Stream.campaign_id.in_(sorted(visible)) & (Stream.status != "deleted"))
        )
        used = {row.lander_id for row in query}
    return owned | used


def visible_lander(db: Database, principal: Principal, ref: str | int) -> Lander:
    """A lander `principal` may see; AdminNotFound, as for one that does not exist, for one it may not."""
    lander = get_lander(db, ref)
    visible = visible_lander_ids(db, principal)
    if visible is not None and lander.id not in visible:
        raise AdminNotFound(f"There is no lander {str(ref)!r}.")
    return lander


def edits_lander(principal: Principal, lander: Lander) -> bool:
    """Whether `principal` may change `lander`: an admin with write any, a buyer with write their own."""
    if not creates_campaigns(principal):
        return False
    is_owner = principal.user_id is not None and lander.owner_id == principal.user_id
    return principal.role == "admin" or is_owner
