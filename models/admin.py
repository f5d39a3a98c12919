"""Campaign, stream and offer administration: the library the CLI (and later the admin API) call.

Every change runs in one transaction that also bumps `config_version`, so web workers reload.
Streams are updated in place and removed by status, never renumbered, so click history keeps
pointing at the stream it went through.
"""

from __future__ import annotations

import re
import time
from typing import Any, Iterable

from peewee import Database, IntegrityError

from models.campaign import (
    CAMPAIGN_STATUSES,
    ROTATIONS,
    STREAM_ACTIONS,
    STREAM_STATUSES,
    STREAM_TYPES,
    Campaign,
    Stream,
    StreamOffer,
)
from models.macros import MacroError, compile_url
from models.offer import OFFER_STATUSES, Offer
from models.routing import bump_config_version

ALIAS_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
RESERVED_ALIASES = frozenset({"healthz", "postback", "api", "px", "admin", "static"})


class AdminError(ValueError):
    """A change that cannot be made; the message is one sentence for the user."""


def _now() -> int:
    return int(time.time() * 1000)


def _check_url(url: str) -> str:
    try:
        compile_url(url)
    except MacroError as exc:
        raise AdminError(str(exc)) from None
    return url


def _check_choice(value: str, choices: Iterable[str], what: str) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise AdminError(f"{what} must be one of {', '.join(choices)}, not {value!r}.")
    return value


def _check_alias(alias: str) -> str:
    if not ALIAS_PATTERN.match(alias) or alias.lower() in RESERVED_ALIASES:
        raise AdminError(
            f"Alias {alias!r} must be 1-64 letters, digits, '-' or '_', "
            f"and not one of {', '.join(sorted(RESERVED_ALIASES))}."
        )
    return alias


def get_campaign(ref: str | int) -> Campaign:
    """A campaign by id or alias."""
    ref = str(ref)
    query = Campaign.select().where(
        (Campaign.alias == ref) | (Campaign.id == (int(ref) if ref.isdigit() else -1))
    )
    campaign = query.first()
    if campaign is None:
        raise AdminError(f"There is no campaign {ref!r}.")
    return campaign


def get_offer(offer_id: int) -> Offer:
    offer = Offer.get_or_none(Offer.id == offer_id)
    if offer is None:
        raise AdminError(f"There is no offer {offer_id}.")
    return offer


def get_stream(stream_id: int) -> Stream:
    stream = Stream.get_or_none((Stream.id == stream_id) & (Stream.status != "deleted"))
    if stream is None:
        raise AdminError(f"There is no stream {stream_id}.")
    return stream


def create_offer(db: Database, name: str, url: str, *, payout: float = 0.0, currency: str = "USD") -> Offer:
    with db.atomic():
        offer = Offer.create(name=name, url=_check_url(url), payout=payout, currency=currency.upper())
        bump_config_version(db)
    return offer


def update_offer(db: Database, offer_id: int, **changes: Any) -> Offer:
    changes = {key: value for key, value in changes.items() if value is not None}
    if "url" in changes:
        _check_url(changes["url"])
    if "status" in changes:
        _check_choice(changes["status"], OFFER_STATUSES, "Offer status")
    with db.atomic():
        offer = get_offer(offer_id)
        for key, value in changes.items():
            setattr(offer, key, value)
        offer.updated_at = _now()
        offer.save()
        bump_config_version(db)
    return offer


def list_offers() -> list[Offer]:
    return list(Offer.select().order_by(Offer.id))


def create_campaign(
    db: Database,
    name: str,
    alias: str,
    *,
    offer_url: str | None = None,
    offer_id: int | None = None,
    rotation: str = "position",
    uniqueness_hours: float = 24.0,
) -> Campaign:
    """A campaign with one regular stream to one offer (a new offer from `offer_url`, or `offer_id`)."""
    _check_alias(alias)
    _check_choice(rotation, ROTATIONS, "Rotation")
    if (offer_url is None) == (offer_id is None):
        raise AdminError("Give exactly one of an offer URL or an existing offer id.")
    if uniqueness_hours <= 0:
        raise AdminError("The uniqueness window must be a positive number of hours.")
    with db.atomic():
        try:
            campaign = Campaign.create(
                name=name, alias=alias, rotation=rotation, uniqueness_hours=uniqueness_hours
            )
        except IntegrityError:
            raise AdminError(f"A campaign with alias {alias!r} already exists.") from None
        offer = get_offer(offer_id) if offer_id is not None else None
        if offer is None:
            offer = Offer.create(name=name, url=_check_url(offer_url))
        stream = Stream.create(campaign=campaign, name="Default", type="regular", position=1)
        StreamOffer.create(stream=stream, offer=offer, weight=100)
        bump_config_version(db)
    return campaign


def update_campaign(db: Database, ref: str | int, **changes: Any) -> Campaign:
    changes = {key: value for key, value in changes.items() if value is not None}
    if "alias" in changes:
        _check_alias(changes["alias"])
    if "rotation" in changes:
        _check_choice(changes["rotation"], ROTATIONS, "Rotation")
    if "status" in changes:
        _check_choice(changes["status"], CAMPAIGN_STATUSES, "Campaign status")
    if changes.get("uniqueness_hours", 1) <= 0:
        raise AdminError("The uniqueness window must be a positive number of hours.")
    with db.atomic():
        campaign = get_campaign(ref)
        for key, value in changes.items():
            setattr(campaign, key, value)
        campaign.updated_at = _now()
        try:
            campaign.save()
        except IntegrityError:
            raise AdminError(f"A campaign with alias {changes.get('alias')!r} already exists.") from None
        bump_config_version(db)
    return campaign


def archive_campaign(db: Database, ref: str | int) -> Campaign:
    return update_campaign(db, ref, status="archived")


def list_campaigns(*, include_archived: bool = False) -> list[Campaign]:
    query = Campaign.select().order_by(Campaign.id)
    if not include_archived:
        query = query.where(Campaign.status != "archived")
    return list(query)


def _set_stream_offers(stream: Stream, offers: list[tuple[int, int]]) -> None:
    """Make the stream's active offers exactly `offers` [(offer_id, weight)].

    Existing links are updated in place (never deleted and re-inserted), so their ids stay.
    """
    wanted = {}
    for offer_id, weight in offers:
        get_offer(offer_id)
        if weight < 0:
            raise AdminError("An offer weight cannot be negative.")
        wanted[offer_id] = weight
    for link in StreamOffer.select().where(StreamOffer.stream == stream):
        if link.offer_id in wanted:
            link.weight, link.status = wanted.pop(link.offer_id), "active"
        else:
            link.status = "disabled"
        link.save()
    for offer_id, weight in wanted.items():
        StreamOffer.create(stream=stream, offer=offer_id, weight=weight)


def _check_stream_fields(fields: dict[str, Any]) -> None:
    if "type" in fields:
        _check_choice(fields["type"], STREAM_TYPES, "Stream type")
    if "action" in fields:
        _check_choice(fields["action"], STREAM_ACTIONS, "Stream action")
    if "status" in fields:
        _check_choice(fields["status"], STREAM_STATUSES, "Stream status")
    if fields.get("action") == "redirect" or fields.get("action_payload"):
        _check_url(fields.get("action_payload", ""))
    if fields.get("weight", 0) < 0:
        raise AdminError("A stream weight cannot be negative.")


def add_stream(
    db: Database,
    campaign_ref: str | int,
    *,
    name: str = "",
    type: str = "regular",
    position: int | None = None,
    weight: int = 100,
    action: str = "offers",
    url: str = "",
    offers: list[tuple[int, int]] = (),
) -> Stream:
    fields = {"type": type, "action": action, "weight": weight, "action_payload": url}
    _check_stream_fields(fields)
    if action == "offers" and not offers:
        raise AdminError("A stream that sends to offers needs at least one --offer.")
    with db.atomic():
        campaign = get_campaign(campaign_ref)
        if position is None:
            last = Stream.select().where(Stream.campaign == campaign).order_by(Stream.position.desc()).first()
            position = (last.position + 1) if last else 1
        stream = Stream.create(campaign=campaign, name=name, position=position, **fields)
        _set_stream_offers(stream, list(offers))
        bump_config_version(db)
    return stream


def update_stream(
    db: Database, stream_id: int, *, offers: list[tuple[int, int]] | None = None, **changes: Any
) -> Stream:
    changes = {key: value for key, value in changes.items() if value is not None}
    if "url" in changes:
        changes["action_payload"] = changes.pop("url")
    _check_stream_fields(changes)
    with db.atomic():
        stream = get_stream(stream_id)
        for key, value in changes.items():
            setattr(stream, key, value)
        stream.updated_at = _now()
        stream.save()
        if offers:
            _set_stream_offers(stream, offers)
        bump_config_version(db)
    return stream


def remove_stream(db: Database, stream_id: int) -> Stream:
    return update_stream(db, stream_id, status="deleted")


def list_streams(campaign_ref: str | int) -> list[Stream]:
    campaign = get_campaign(campaign_ref)
    return list(
        Stream.select()
        .where((Stream.campaign == campaign) & (Stream.status != "deleted"))
        .order_by(Stream.position, Stream.id)
    )


def stream_offers(stream: Stream) -> list[tuple[int, int]]:
    return [
        (link.offer_id, link.weight)
        for link in StreamOffer.select().where(
            (StreamOffer.stream == stream) & (StreamOffer.status == "active")
        )
    ]
