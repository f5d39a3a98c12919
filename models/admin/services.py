"""Campaign, stream and offer administration: the library the CLI (and later the admin API) call.

Every change runs in one transaction that also bumps `config_version`, so web workers reload, and
writes its audit-log entry (models/accounts/audit.py) naming `actor`: the CLI unless the caller
(the admin API, the panel) says who. Streams are updated in place and removed by status, never
renumbered, so click history keeps pointing at the stream it went through.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

from peewee import Database, IntegrityError

from models.accounts.access import sees_campaign, visible_offer_ids
from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError, AdminNotFound
from models.admin.rows import (
    get_campaign,
    get_offer,
    get_stream,
    list_offers,  # noqa: F401 -- handed on: callers list offers from here
)
from models.choices import (
    CAMPAIGN_STATUSES,
    COST_MODELS,
    DEFAULT_ACTIONS,
    FILTER_MODES,
    LANDER_ROTATIONS,
    OFFER_ROTATIONS,
    OFFER_STATUSES,
    REDIRECT_TYPES,
    ROTATIONS,
    STREAM_ACTIONS,
    STREAM_STATUSES,
    STREAM_TYPES,
)
from models.lookups.timezones import timezone_set
from models.reporting.currency import CurrencyError, check_code, missing_rate, report_currency
from models.routing.filters import FilterError, describe_filter, parse_filter
from models.routing.macros import MacroError, saved_url
from models.routing.sources import slot_filter
from models.store.accounts import AccountStore
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Campaign, CampaignTag, Stream, StreamOffer
from models.tables.campaign import new_token as new_campaign_token
from models.tables.network import Network
from models.tables.offer import Offer

ALIAS_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# panel: /panel/; landers: local landers' files (/landers/); lp: /lp/click, /lp/visit;
# click_api: /click_api/v3
RESERVED_ALIASES = frozenset(
    {
        *("healthz", "livez", "readyz", "metrics"),  # routes/health.py, routes/metrics.py
        *("postback", "api", "px", "admin", "static", "panel", "landers", "lp", "click_api"),
    }
)
MAX_UNIQUENESS_HOURS = 10 * 366 * 24  # Ten years; Infinity would break every worker's config load.
MAX_COST_VALUE = 1e9  # A cost or payout per unit: the bound postback payouts have too.


def _now() -> int:
    return int(time.time() * 1000)


def _fields(db: Database, row: Campaign | Stream | Offer) -> dict[str, Any]:
    """A row's fields as the audit log compares them (a stream's with its active offers and landers)."""
    from models.admin.landers import stream_landers

    fields = dict(row.__data__)
    if isinstance(row, Campaign) and fields.get("token"):
        # The audit log shows that a Click API token changed, not the token.
        fields["token"] = "..." + fields["token"][-4:]
    if isinstance(row, Stream):
        fields["offers"] = [list(link) for link in sorted(stream_offers(db, row))]
        fields["landers"] = [list(link) for link in sorted(stream_landers(row.id))]
    return fields


def _check_url(url: str) -> str:
    """The URL as it is stored: validated, and rewritten to the printable ASCII a Location carries.
    The traffic sources' parameter names (`{zoneid}`) are macros besides the click's."""
    from models.admin.sources import source_macro_names

    try:
        return saved_url(url, source_macro_names())
    except MacroError as exc:
        raise AdminError(str(exc)) from None


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


def check_timezone(name: str) -> str:
    """An IANA timezone name, or one sentence saying it is none (campaigns' and users' timezones)."""
    if name not in timezone_set():
        raise AdminError(f"Unknown timezone {name!r}; use an IANA name such as Europe/Berlin or UTC.")
    ZoneInfo(name)
    return name


def _check_cap(value: int | None, what: str) -> None:
    if value is not None and value < 0:
        raise AdminError(f"{what} cannot be negative.")


def _check_currency(code: str) -> str:
    """A three-letter code. One without an exchange rate is accepted (an offer's conversions, a
    campaign's clicks wait for one, and reports say so); rate_warnings() tells whoever set it."""
    try:
        return check_code(code)
    except CurrencyError as exc:
        raise AdminError(str(exc)) from None


def rate_warnings(db: Database, *currencies: str | None) -> list[str]:
    """One sentence per currency (an offer's payout, a campaign's costs) with no exchange rate into the
    report currency: accepted, but its amounts stay out of revenue and cost until a rate comes."""
    conn = db.connection()
    seen = dict.fromkeys(code for code in currencies if code)
    return [warning for code in seen if (warning := missing_rate(conn, code)) is not None]


def _check_offer_fields(fields: dict[str, Any]) -> None:
    if fields.get("currency") is not None:
        fields["currency"] = _check_currency(fields["currency"])
    if "url" in fields:
        fields["url"] = _check_url(fields["url"])
    if not 0 <= fields.get("payout", 0) <= MAX_COST_VALUE:  # NaN and Infinity too
        raise AdminError(f"A payout must be a number from 0 to {MAX_COST_VALUE:,.0f}.")
    if "status" in fields:
        _check_choice(fields["status"], OFFER_STATUSES, "Offer status")
    if "timezone" in fields:
        check_timezone(fields["timezone"])
    _check_cap(fields.get("daily_cap"), "A daily cap")
    _check_cap(fields.get("total_cap"), "A total cap")
    network_id = fields.get("network_id")
    if network_id is not None and Network.get_or_none(Network.id == network_id) is None:
        raise AdminNotFound(f"There is no network {network_id}.")


def filters_json(expressions: Iterable[str], source_slots: dict[str, int] | None = None) -> str:
    """Stream filters as stored: the JSON list of specs parsed from `country=US`-style expressions.
    `source_slots`: the campaign's traffic source's names, taken as their sub_id slots (`zoneid=1`)."""
    try:
        return json.dumps(
            [parse_filter(slot_filter(expression, source_slots or {})) for expression in expressions]
        )
    except FilterError as exc:
        raise AdminError(str(exc)) from None


def _source_slots(db: Database, ref: int | None, *, by_campaign: bool = False) -> dict[str, int]:
    """Name -> sub_id slot of a traffic source (by id), or of a campaign's (by the campaign's id)."""
    from models.admin.sources import source_of_id
    from models.routing.sources import loads, slot_of

    source = source_of_id(get_campaign(db, ref).source_id if by_campaign and ref is not None else ref)
    return slot_of(loads(source.parameters)) if source is not None else {}


def describe_filters(stream: Stream) -> list[str]:
    return [describe_filter(spec) for spec in json.loads(stream.filters or "[]")]


_CITY_FILE = (
    "set LANNER_GEO_DATABASE to a city file (GeoLite2-City, dbip-city-lite, GeoIP2-Enterprise) or name "
    "a city "
    "edition in LANNER_GEO_EDITIONS for `lanner geo update`"
)
_NETWORK_FILE = (
    "name {editions} in LANNER_GEO_EDITIONS (its file goes to DATA_DIR/geo: `lanner geo update`, or put it "
    "there), or set LANNER_GEO_DATABASE to a GeoIP2-Enterprise file"
)
_LOCATION_FILTERS = frozenset({"country", "region", "city"})
# A geo filter -> (what the configured files lack, how to get it); "country" stands for no location file.
_GEO_GAPS = {
    "country": ("there is no geo database", "run `lanner geo build` or set LANNER_GEO_DATABASE"),
    "region": ("the geo database has countries only", _CITY_FILE),
    "city": ("the geo database has countries only", _CITY_FILE),
    "isp": (
        "no geo file gives ISPs",
        _NETWORK_FILE.format(editions="GeoLite2-ASN, dbip-asn-lite or GeoIP2-ISP"),
    ),
    "connection": (
        "no geo file gives connection types",
        _NETWORK_FILE.format(editions="GeoIP2-Connection-Type"),
    ),
    "carrier": ("no geo file gives mobile carriers", _NETWORK_FILE.format(editions="GeoIP2-ISP")),
}


def stream_geo_warnings(stream: Stream, geo_path: Path, geo_network_paths: tuple[Path, ...]) -> list[str]:
    """geo_filter_warnings for what the configured geo files (LANNER_GEO_*) can tell now."""
    from models.lookups.geo import GeoSource

    source = GeoSource(geo_path, geo_network_paths)
    try:
        return geo_filter_warnings(stream, source.facts)
    finally:
        source.close()


def geo_filter_warnings(stream: Stream, geo_facts: frozenset[str]) -> list[str]:
    """One sentence per geo filter of `stream` that the geo files cannot answer, naming the setting to change.

    `geo_facts` is what the configured files can tell (GeoSource.facts: country, region, city, isp,
    connection, carrier). Such a stream is still saved, since the file may come later; until then the
    filter sees every click's value as unknown (models/routing/filters.py), so an IS filter never matches.
    """
    names = dict.fromkeys(spec["name"] for spec in json.loads(stream.filters or "[]"))
    warnings = []
    for name in names:
        if name not in _GEO_GAPS or name in geo_facts:
            continue
        no_location_file = "country" not in geo_facts and name in _LOCATION_FILTERS
        missing, fix = _GEO_GAPS["country" if no_location_file else name]
        warnings.append(
            f"Stream {stream.id}'s {name} filter sees every click's {name} as unknown: {missing}; {fix}."
        )
    return warnings


def create_offer(
    db: Database,
    name: str,
    url: str,
    *,
    payout: float = 0.0,
    currency: str | None = None,
    daily_cap: int | None = None,
    total_cap: int | None = None,
    timezone: str = "UTC",
    network_id: int | None = None,
    actor: Principal = CLI,
) -> Offer:
    """`currency`: the payout's, default the report currency; `network_id`: the affiliate network
    paying for it (models/conversions/networks.py)."""
    fields: dict[str, Any] = {
        "url": url,
        "payout": payout,
        "daily_cap": daily_cap,
        "total_cap": total_cap,
        "timezone": timezone,
        "network_id": network_id,
    }
    fields["currency"] = currency or report_currency(db.connection())
    _check_offer_fields(fields)
    fields["url"] = _with_network_params(fields["url"], network_id)
    with write_tx(db):
        offer = Offer.create(name=name, **fields)
        record_change(db, actor, "offer", offer.id, "create", None, _fields(db, offer))
        MetaStore(db.connection()).bump_config_version()
    return offer


def update_offer(
    db: Database,
    offer_id: int,
    *,
    clear_caps: bool = False,
    clear_network: bool = False,
    actor: Principal = CLI,
    **changes: Any,
) -> Offer:
    """Change an offer; None leaves a field as it is (`clear_caps` removes both caps, `clear_network`
    its network)."""
    changes = {key: value for key, value in changes.items() if value is not None}
    _check_offer_fields(changes)
    if clear_caps:  # The caps not given: a cap given with it is set (the panel's form sends both).
        changes.setdefault("daily_cap", None)
        changes.setdefault("total_cap", None)
    if clear_network:
        changes.setdefault("network_id", None)
    with write_tx(db):
        offer = get_offer(offer_id)
        before = _fields(db, offer)
        if changes.get("network_id") is not None or ("url" in changes and offer.network_id is not None):
            network_id = changes.get("network_id", offer.network_id)
            changes["url"] = _with_network_params(changes.get("url", offer.url), network_id)
        for key, value in changes.items():
            setattr(offer, key, value)
        offer.updated_at = _now()
        offer.save()
        record_change(db, actor, "offer", offer.id, "update", before, _fields(db, offer))
        MetaStore(db.connection()).bump_config_version()
    return offer


def _with_network_params(url: str, network_id: int | None) -> str:
    """The offer URL with what its network's offers add (models/conversions/networks.py), if it lacks it."""
    if network_id is None:
        return url
    from models.conversions.networks import offer_url_with_params

    network = Network.get_by_id(network_id)
    return _check_url(offer_url_with_params(url, network.offer_params)) if network.offer_params else url


def create_campaign(
    db: Database,
    name: str,
    alias: str,
    *,
    offer_url: str | None = None,
    offer_id: int | None = None,
    rotation: str = "position",
    uniqueness_hours: float = 24.0,
    landers: Sequence[tuple[int, int]] = (),
    actor: Principal = CLI,
    **options: Any,
) -> Campaign:
    """A campaign with one regular stream to one offer (a new offer from `offer_url`, or `offer_id`),
    behind `landers` [(lander_id, weight)] if given.

    `options`: timezone, bind_visitor, default_action, default_payload, owner_id, source (a traffic
    source's name or id; see update_campaign; the owner is by default the actor's user: nobody for the
    CLI and the install key).
    """
    from models.admin.sources import source_id_for, source_of, sync_postback_target

    _check_alias(alias)
    if (offer_url is None) == (offer_id is None):
        raise AdminError("Give exactly one of an offer URL or an existing offer id.")
    options = {key: value for key, value in options.items() if value is not None}
    source_ref = options.pop("source", None)
    fields = {"rotation": rotation, "uniqueness_hours": uniqueness_hours, **options}
    fields.setdefault("cost_currency", report_currency(db.connection()))
    fields.setdefault("owner_id", actor.user_id)
    _check_campaign_fields(fields)
    with write_tx(db):
        fields["source_id"] = source_id_for(db, source_ref)
        if offer_id is not None:
            check_usable_offers(db, actor, [offer_id])
        try:
            campaign = Campaign.create(name=name, alias=alias, **fields)
        except IntegrityError:
            raise AdminConflict(f"A campaign with alias {alias!r} already exists.") from None
        record_change(db, actor, "campaign", campaign.id, "create", None, _fields(db, campaign))
        offer = get_offer(offer_id) if offer_id is not None else None
        if offer is None:
            assert offer_url is not None  # Exactly one of the two, checked above.
            offer = Offer.create(
                name=name, url=_check_url(offer_url), currency=report_currency(db.connection())
            )
            record_change(db, actor, "offer", offer.id, "create", None, _fields(db, offer))
        stream = Stream.create(campaign=campaign, name="Default", type="regular", position=1)
        StreamOffer.create(stream=stream, offer=offer, weight=100)
        if landers:
            _set_stream_landers(db, actor, stream, list(landers))
        record_change(db, actor, "stream", stream.id, "create", None, _fields(db, stream))
        sync_postback_target(db, campaign, source_of(campaign), actor)
        MetaStore(db.connection()).bump_config_version()
    return campaign


def _check_campaign_fields(fields: dict[str, Any]) -> None:
    if "alias" in fields:
        _check_alias(fields["alias"])
    if "rotation" in fields:
        _check_choice(fields["rotation"], ROTATIONS, "Rotation")
    if "status" in fields:
        _check_choice(fields["status"], CAMPAIGN_STATUSES, "Campaign status")
    if not 0 < fields.get("uniqueness_hours", 1) <= MAX_UNIQUENESS_HOURS:  # NaN and Infinity too
        raise AdminError(
            f"The uniqueness window must be a positive number of hours, at most {MAX_UNIQUENESS_HOURS:,}."
        )
    if "timezone" in fields:
        check_timezone(fields["timezone"])
    if "default_action" in fields:
        _check_choice(fields["default_action"], DEFAULT_ACTIONS, "Default action")
        if fields["default_action"] == "redirect":
            if not fields.get("default_payload"):
                raise AdminError("A redirect default action needs a --default-url.")
    if fields.get("default_payload"):
        fields["default_payload"] = _check_url(fields["default_payload"])
    if "bind_visitor" in fields:
        fields["bind_visitor"] = int(bool(fields["bind_visitor"]))
    if "cost_model" in fields:
        _check_choice(fields["cost_model"], COST_MODELS, "Cost model")
    if not 0 <= fields.get("cost_value", 0) <= MAX_COST_VALUE:  # NaN and Infinity too
        raise AdminError(f"A cost must be a number from 0 to {MAX_COST_VALUE:,.0f}.")
    if fields.get("cost_model") == "revshare" and fields.get("cost_value", 0) > 100:
        raise AdminError("A revshare cost is a percentage of revenue, from 0 to 100.")
    if "cost_currency" in fields:
        fields["cost_currency"] = _check_currency(fields["cost_currency"])
    if fields.get("owner_id") is not None:
        if AccountStore(Campaign._meta.database.connection()).user_by_id(fields["owner_id"]) is None:
            raise AdminNotFound(f"There is no user with id {fields['owner_id']} to own the campaign.")


def update_campaign(
    db: Database,
    ref: str | int,
    *,
    clear_owner: bool = False,
    clear_source: bool = False,
    new_token: bool = False,
    actor: Principal = CLI,
    **changes: Any,
) -> Campaign:
    """Change a campaign; None leaves a field as it is (`clear_owner`: owned by nobody, admins only;
    `source`: a traffic source's name or id, `clear_source`: none; `new_token`: a new Click API token,
    the old one refused from the web workers' next reload)."""
    from models.admin.sources import source_id_for, source_of, sync_postback_target

    changes = {key: value for key, value in changes.items() if value is not None}
    source_ref = changes.pop("source", None)
    _check_campaign_fields(changes)
    if clear_owner:
        changes["owner_id"] = None
    if new_token:
        changes["token"] = new_campaign_token()
    with write_tx(db):
        if source_ref is not None:
            changes["source_id"] = source_id_for(db, source_ref)
        elif clear_source:
            changes["source_id"] = None
        campaign = get_campaign(db, ref)
        before = _fields(db, campaign)
        for key, value in changes.items():
            setattr(campaign, key, value)
        campaign.updated_at = _now()
        try:
            campaign.save()
        except IntegrityError:
            raise AdminConflict(f"A campaign with alias {changes.get('alias')!r} already exists.") from None
        action = "archive" if changes.get("status") == "archived" else "update"
        record_change(db, actor, "campaign", campaign.id, action, before, _fields(db, campaign))
        if "source_id" in changes:
            sync_postback_target(db, campaign, source_of(campaign), actor)
        MetaStore(db.connection()).bump_config_version()
    return campaign


def archive_campaign(db: Database, ref: str | int, *, actor: Principal = CLI) -> Campaign:
    return update_campaign(db, ref, status="archived", actor=actor)


COPIED_STREAM_FIELDS = (
    "name",
    "type",
    "position",
    "weight",
    "action",
    "action_payload",
    "filters",
    "filter_mode",
    "daily_cap",
    "total_cap",
    "offer_rotation",
    "lander_rotation",
    "redirect_type",
    "fallback_offer_id",
    "status",
)
COPIED_CAMPAIGN_FIELDS = (
    "rotation",
    "uniqueness_hours",
    "timezone",
    "cost_model",
    "cost_value",
    "cost_currency",
    "bind_visitor",
    "default_action",
    "default_payload",
    "source_id",
)


def _free_alias(base: str) -> str:
    """`base`, or `base-2`, `base-3` ... : the first no campaign has (archived ones keep theirs)."""
    # .tuples(): peewee's stubs still say models.
    aliases = cast("Iterable[tuple[str]]", Campaign.select(Campaign.alias).tuples())
    taken = {alias.lower() for (alias,) in aliases}
    candidate, number = base, 1
    while candidate.lower() in taken:
        number += 1
        suffix = f"-{number}"
        candidate = base[: 64 - len(suffix)] + suffix
    return candidate


def clone_campaign(
    db: Database,
    ref: str | int,
    *,
    name: str | None = None,
    alias: str | None = None,
    actor: Principal = CLI,
) -> Campaign:
    """A copy of a campaign with its streams (filters, caps, offers, landers and weights; not removed
    streams).

    Named "<name> (copy)" with the alias "<alias>-copy" (then -copy-2 ...) unless given. It keeps the
    original's status, but a copy of an archived campaign is paused. An admin's copy (the CLI's, the
    install key's) keeps the original's owner; anyone else's is their own, as a campaign they create
    would be. Shares, postback targets and costs are not copied: they belong to the original's traffic.
    Its traffic source is, with the source's postback, and so are its tags (models/admin/tags.py).
    """
    from models.admin.landers import stream_landers
    from models.admin.sources import source_of, sync_postback_target
    from models.tables.lander import StreamLander

    source = get_campaign(db, ref)
    if alias is None:
        alias = _free_alias(source.alias[:59] + "-copy")
    _check_alias(alias)
    name = name if name is not None and name.strip() else f"{source.name} (copy)"
    fields = {field: getattr(source, field) for field in COPIED_CAMPAIGN_FIELDS}
    fields["status"] = "paused" if source.status == "archived" else source.status
    fields["owner_id"] = source.owner_id if actor.role == "admin" else actor.user_id
    with write_tx(db):
        try:
            campaign = Campaign.create(name=name, alias=alias, **fields)
        except IntegrityError:
            raise AdminConflict(f"A campaign with alias {alias!r} already exists.") from None
        created = _fields(db, campaign) | {"cloned_from": source.id}
        record_change(db, actor, "campaign", campaign.id, "create", None, created)
        for original in list_streams(db, source.id):
            stream = Stream.create(
                campaign=campaign, **{field: getattr(original, field) for field in COPIED_STREAM_FIELDS}
            )
            for offer_id, weight in stream_offers(db, original):
                StreamOffer.create(stream=stream, offer=offer_id, weight=weight)
            for lander_id, weight in stream_landers(original.id):
                StreamLander.create(stream=stream, lander=lander_id, weight=weight)
            record_change(db, actor, "stream", stream.id, "create", None, _fields(db, stream))
        for link in CampaignTag.select().where(CampaignTag.campaign_id == source.id):
            CampaignTag.create(campaign=campaign, tag=link.tag)
        # The source's own postback comes with the source: it is the network's, not the traffic's.
        sync_postback_target(db, campaign, source_of(campaign), actor)
        MetaStore(db.connection()).bump_config_version()
    return campaign


def list_campaigns(db: Database, *, include_archived: bool = False) -> list[Campaign]:
    query = Campaign.select().order_by(Campaign.id)
    if not include_archived:
        query = query.where(Campaign.status != "archived")
    return list(query)


def first_campaign(db: Database) -> Campaign:
    """The first campaign not archived, a demo one created if there is none (`lanner run`)."""
    campaigns = list_campaigns(db)
    if campaigns:
        return campaigns[0]
    return create_campaign(
        db, "Demo", "demo", offer_url="https://example.com/offer?subid={subid}&source={source}"
    )


def check_usable_offers(
    db: Database, actor: Principal, offer_ids: Iterable[int], fallback_offer_id: int | None = None
) -> None:
    """AdminNotFound, as for an offer that does not exist, for one `actor` may not see and so not use
    (models/accounts/access.py visible_offer_ids: an admin and the CLI use any)."""
    wanted = [*offer_ids, *([] if fallback_offer_id is None else [fallback_offer_id])]
    if not wanted:
        return
    usable = visible_offer_ids(db, actor)
    for offer_id in wanted:
        if usable is not None and offer_id not in usable:
            raise AdminNotFound(f"There is no offer {offer_id}.")


def check_usable_target(db: Database, actor: Principal, action: str, target: str) -> None:
    """AdminNotFound, as for a campaign that does not exist, when a stream of `actor`'s would send its
    visitors to a campaign `actor` may not see (an admin and the CLI send to any)."""
    if action == "campaign" and target and not sees_campaign(db, actor, get_campaign(db, target).id):
        raise AdminNotFound(f"There is no campaign {str(target)!r}.")


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


def _check_landers_action(landers: Sequence[tuple[int, int]] | None, action: str) -> None:
    if landers and action != "offers":
        raise AdminError(
            "Only a stream that sends to offers has landers: a lander's link goes on to the offer."
        )


def _set_stream_landers(
    db: Database, actor: Principal, stream: Stream, landers: list[tuple[int, int]]
) -> None:
    """The stream's landers as given, each one `actor` may see (models/accounts/access.py)."""
    from models.accounts.access import visible_lander_ids
    from models.admin.landers import set_stream_landers

    set_stream_landers(stream, landers, usable=visible_lander_ids(db, actor) if landers else None)


def _check_stream_fields(db: Database, fields: dict[str, Any], action: str) -> None:
    """Validate stream fields; `action` is the stream's action after the change."""
    if "type" in fields:
        _check_choice(fields["type"], STREAM_TYPES, "Stream type")
    if "action" in fields:
        _check_choice(fields["action"], STREAM_ACTIONS, "Stream action")
    if "status" in fields:
        _check_choice(fields["status"], STREAM_STATUSES, "Stream status")
    if "offer_rotation" in fields:
        _check_choice(fields["offer_rotation"], OFFER_ROTATIONS, "Offer rotation")
    if "lander_rotation" in fields:
        _check_choice(fields["lander_rotation"], LANDER_ROTATIONS, "Lander rotation")
    if "redirect_type" in fields:
        _check_choice(fields["redirect_type"], REDIRECT_TYPES, "Redirect type")
    if "filter_mode" in fields:
        _check_choice(fields["filter_mode"], FILTER_MODES, "Filter mode")
    if fields.get("weight", 0) < 0:
        raise AdminError("A stream weight cannot be negative.")
    _check_cap(fields.get("daily_cap"), "A daily cap")
    _check_cap(fields.get("total_cap"), "A total cap")
    if fields.get("fallback_offer_id") is not None:
        get_offer(fields["fallback_offer_id"])
    payload = fields.get("action_payload")
    if "action" in fields or payload is not None:
        if action == "redirect":
            fields["action_payload"] = _check_url(payload or "")
        elif action == "campaign":
            if not payload:
                raise AdminError("A stream that sends to another campaign needs --target ALIAS.")
            get_campaign(db, payload)
        elif action == "html" and not payload:
            raise AdminError("A stream that shows a page needs --html.")


def add_stream(
    db: Database,
    campaign_ref: str | int,
    *,
    name: str = "",
    type: str = "regular",
    position: int | None = None,
    weight: int = 100,
    action: str = "offers",
    payload: str = "",
    offers: Sequence[tuple[int, int]] = (),
    landers: Sequence[tuple[int, int]] = (),
    filters: Iterable[str] = (),
    actor: Principal = CLI,
    **options: Any,
) -> Stream:
    """A stream; `options`: filter_mode, daily_cap, total_cap, offer_rotation, lander_rotation, redirect_type,
    fallback_offer_id. `filters` are expressions such as `country=US,GB` (models/routing/filters.py).
    `landers` [(lander_id, weight)]: the pages its visitors see before the offer (models/admin/landers.py)."""
    options = {key: value for key, value in options.items() if value is not None}
    fields = {"type": type, "action": action, "weight": weight, "action_payload": payload, **options}
    fields["filters"] = filters_json(filters, _source_slots(db, get_campaign(db, campaign_ref).source_id))
    _check_stream_fields(db, fields, action)
    if action == "offers" and not offers:
        raise AdminError("A stream that sends to offers needs at least one --offer.")
    _check_landers_action(landers, action)
    with write_tx(db):
        check_usable_offers(db, actor, [offer_id for offer_id, _ in offers], fields.get("fallback_offer_id"))
        check_usable_target(db, actor, action, payload)
        campaign = get_campaign(db, campaign_ref)
        if position is None:
            last = Stream.select().where(Stream.campaign == campaign).order_by(Stream.position.desc()).first()
            position = (last.position + 1) if last else 1
        stream = Stream.create(campaign=campaign, name=name, position=position, **fields)
        _set_stream_offers(stream, list(offers))
        if landers:
            _set_stream_landers(db, actor, stream, list(landers))
        record_change(db, actor, "stream", stream.id, "create", None, _fields(db, stream))
        MetaStore(db.connection()).bump_config_version()
    return stream


def update_stream(
    db: Database,
    stream_id: int,
    *,
    offers: list[tuple[int, int]] | None = None,
    landers: list[tuple[int, int]] | None = None,
    filters: Iterable[str] | None = None,
    clear_filters: bool = False,
    clear_caps: bool = False,
    clear_fallback_offer: bool = False,
    actor: Principal = CLI,
    **changes: Any,
) -> Stream:
    """Change a stream in place; None leaves a field as it is. `filters` replace the stream's filters;
    `clear_caps` removes the caps not given (the panel's form sets one and clears the other at once),
    `clear_fallback_offer` the fallback offer. `landers` replace the stream's landers ([] clears them)."""
    changes = {key: value for key, value in changes.items() if value is not None}
    if "payload" in changes:
        changes["action_payload"] = changes.pop("payload")
    if filters:
        campaign_slots = _source_slots(db, get_stream(db, stream_id).campaign_id, by_campaign=True)
        changes["filters"] = filters_json(filters, campaign_slots)
    elif clear_filters:
        changes["filters"] = "[]"
    if clear_caps:
        changes.setdefault("daily_cap", None)
        changes.setdefault("total_cap", None)
    if clear_fallback_offer:
        changes.setdefault("fallback_offer_id", None)
    with write_tx(db):
        check_usable_offers(
            db, actor, [offer_id for offer_id, _ in offers or ()], changes.get("fallback_offer_id")
        )
        stream = get_stream(db, stream_id)
        before = _fields(db, stream)
        checked = dict(changes)
        if "action" in checked:
            checked.setdefault("action_payload", stream.action_payload)
        _check_stream_fields(db, checked, checked.get("action", stream.action))
        if "action" in changes or "action_payload" in changes:
            check_usable_target(
                db,
                actor,
                checked.get("action", stream.action),
                checked.get("action_payload", stream.action_payload),
            )
        if "action_payload" in changes:
            changes["action_payload"] = checked["action_payload"]  # A redirect URL as rewritten.
        _check_landers_action(landers, checked.get("action", stream.action))
        for key, value in changes.items():
            setattr(stream, key, value)
        stream.updated_at = _now()
        stream.save()
        if offers:
            _set_stream_offers(stream, offers)
        if landers is not None:
            _set_stream_landers(db, actor, stream, landers)
        action = "remove" if changes.get("status") == "deleted" else "update"
        record_change(db, actor, "stream", stream.id, action, before, _fields(db, stream))
        MetaStore(db.connection()).bump_config_version()
    return stream


def remove_stream(db: Database, stream_id: int, *, actor: Principal = CLI) -> Stream:
    return update_stream(db, stream_id, status="deleted", actor=actor)


def reorder_streams(
    db: Database, campaign_ref: str | int, stream_ids: list[int], *, actor: Principal = CLI
) -> list[Stream]:
    """Put a campaign's streams in this order: each type's streams take positions 1, 2, ... as listed.

    `stream_ids` must name each of the campaign's streams (not removed ones) exactly once."""
    with write_tx(db):
        streams = {stream.id: stream for stream in list_streams(db, campaign_ref)}
        if sorted(stream_ids) != sorted(streams):
            raise AdminError(
                "List every stream of the campaign exactly once: "
                + (", ".join(str(i) for i in sorted(streams)) or "it has none")
                + "."
            )
        positions: dict[str, int] = {}
        for stream_id in stream_ids:
            stream = streams[stream_id]
            positions[stream.type] = positions.get(stream.type, 0) + 1
            if stream.position != positions[stream.type]:
                before = _fields(db, stream)
                stream.position = positions[stream.type]
                stream.updated_at = _now()
                stream.save()
                record_change(db, actor, "stream", stream.id, "update", before, _fields(db, stream))
        MetaStore(db.connection()).bump_config_version()
    return list_streams(db, campaign_ref)


def list_streams(db: Database, campaign_ref: str | int) -> list[Stream]:
    """A campaign's streams in evaluation order: intercepting, regular, fallback; each by position."""
    campaign = get_campaign(db, campaign_ref)
    streams = Stream.select().where((Stream.campaign == campaign) & (Stream.status != "deleted"))
    return sorted(streams, key=lambda s: (STREAM_TYPES.index(s.type), s.position, s.id))


def stream_offers(db: Database, stream: Stream) -> list[tuple[int, int]]:
    return [
        (link.offer_id, link.weight)
        for link in StreamOffer.select()
        .where((StreamOffer.stream == stream) & (StreamOffer.status == "active"))
        .order_by(StreamOffer.id)  # As added: PostgreSQL's scan order moves with every update.
    ]
