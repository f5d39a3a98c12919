"""The rows a user names, found by name, alias or id, and listed in a sentence: reads only.

Below the services that change them (services.py, landers.py, sources.py, conversions/networks.py)
and below the access rules (models/accounts/access.py) that filter them, so both import it and
neither imports the other's module for a lookup.
"""

from __future__ import annotations

from peewee import Database

from models.admin.errors import AdminNotFound
from models.tables.campaign import Campaign, Stream, StreamOffer
from models.tables.lander import Lander
from models.tables.offer import Offer


def listed(noun: str, items: list, shown: int = 5) -> str:
    """`campaigns a, b and 3 more`: the first few of a list, in a sentence."""
    head = ", ".join(str(item) for item in items[:shown])
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return f"{noun}{'s' if len(items) > 1 else ''} {head}{more}"


def is_row_id(text: str) -> bool:
    """Whether `text` can name a row by id: isdigit() alone takes `²`, and an id past 64 bits is no
    row's (SQLite cannot bind it)."""
    return text.isascii() and text.isdigit() and int(text) < 2**63


def find_by_name_or_id(model, field, ref: str | int, what: str, *, key=str):
    """The row of `model` whose `field` is `key(ref)` (a name, an alias), else the one with id `ref`: a
    name wins over another row's id. AdminNotFound ("There is no <what> 'ref'.") for neither."""
    text = str(ref).strip()
    row = model.get_or_none(field == key(text))
    if row is None and is_row_id(text):
        row = model.get_or_none(model.id == int(text))
    if row is None:
        raise AdminNotFound(f"There is no {what} {text!r}.")
    return row


def get_campaign(db: Database, ref: str | int) -> Campaign:
    """A campaign by id or alias."""
    ref = str(ref)
    is_id = is_row_id(ref)
    query = Campaign.select().where((Campaign.alias == ref) | (Campaign.id == (int(ref) if is_id else -1)))
    # An all-digit alias may be another campaign's id: the alias wins. Chosen here, not by which row the
    # database returns first (SQLite's OR plan gives the alias's, PostgreSQL's bitmap scan the lower id).
    matches = list(query)
    campaign = next((match for match in matches if match.alias == ref), matches[0] if matches else None)
    if campaign is None:
        raise AdminNotFound(f"There is no campaign {ref!r}.")
    return campaign


def get_offer(offer_id: int) -> Offer:
    offer = Offer.get_or_none(Offer.id == offer_id)
    if offer is None:
        raise AdminNotFound(f"There is no offer {offer_id}.")
    return offer


def get_stream(db: Database, stream_id: int) -> Stream:
    stream = Stream.get_or_none((Stream.id == stream_id) & (Stream.status != "deleted"))
    if stream is None:
        raise AdminNotFound(f"There is no stream {stream_id}.")
    return stream


def get_lander(db: Database, ref: str | int) -> Lander:
    """A lander by name or id (a name wins over another lander's id, as a source's does)."""
    return find_by_name_or_id(Lander, Lander.name, ref, "lander")


def list_offers(db: Database) -> list[Offer]:
    return list(Offer.select().order_by(Offer.id))


def offer_campaigns() -> dict[int, set[int]]:
    """Offer id -> the campaigns whose streams (not removed ones) send to it or fall back to it."""
    used: dict[int, set[int]] = {}
    links = (
        StreamOffer.select(StreamOffer.offer, Stream.campaign)
        .join(Stream)
        .where((StreamOffer.status == "active") & (Stream.status != "deleted"))
        .tuples()
    )
    fallbacks = (
        Stream.select(Stream.fallback_offer_id, Stream.campaign)
        .where(Stream.fallback_offer_id.is_null(False) & (Stream.status != "deleted"))
        .tuples()
    )
    for offer_id, campaign_id in [*links, *fallbacks]:
        used.setdefault(offer_id, set()).add(campaign_id)
    return used
