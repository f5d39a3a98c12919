"""Traffic sources: create, change and list them, start one from the bundled catalogue, and link a
campaign to one. The library the CLI, the admin API and the panel call.

Every change runs in one transaction that writes its audit entry (entity `traffic_source`), bumps
`config_version` (workers resolve each campaign's source parameters when they load it) and keeps
the postback targets made for the source (`postback_target.source_id`) in step: one per campaign of
the source while the source has a postback URL, changed in place when the source's URL changes,
removed when the campaign leaves the source. Those targets are sent by the outbound postback
machinery like any other (models/conversions/outbound.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any, cast
from urllib.parse import urlsplit

from peewee import Database, IntegrityError

from models.accounts.access import visible_campaign_ids
from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError, AdminNotFound
from models.admin.rows import find_by_name_or_id, listed
from models.choices import CONVERSION_STATUSES, POSTBACK_METHODS, SOURCE_STATUSES
from models.conversions.outbound import OutboundError, compile_target_url
from models.conversions.platforms.connections import connections_of_source, release_source
from models.reporting.spend.connections import release_spend_source, spend_connections_of_source
from models.routing.macros import MacroError, compile_url, rename_macros
from models.routing.sources import (
    SourceError,
    campaign_url,
    loads,
    macro_renames,
    parse_template,
    slot_of,
    template_text,
)
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Campaign, Stream
from models.tables.conversion import PostbackTarget
from models.tables.offer import Offer
from models.tables.source import TrafficSource

MAX_NAME = 100


def _now() -> int:
    return int(time.time() * 1000)


@cache
def catalogue() -> dict[str, Any]:
    """The bundled catalogue (models/admin/data/traffic_sources.json): {"about", "sources"}."""
    text = resources.files("models.admin").joinpath("data/traffic_sources.json").read_text("utf-8")
    return json.loads(text)


def catalogue_entry(key: str) -> dict[str, Any]:
    for entry in catalogue()["sources"]:
        if entry["key"] == key.lower():
            return entry
    keys = ", ".join(entry["key"] for entry in catalogue()["sources"])
    raise AdminNotFound(f"The catalogue has no source {key!r}; it has {keys}.")


def hidden_postback(url: str) -> str:
    """What someone who may not change a source sees of its postback URL: the host. A network's
    postback usually carries the buyer's account key (TrafficStars' `key=`), in its query or its path."""
    if not url:
        return ""
    split = urlsplit(url)
    return f"{split.scheme}://{split.hostname or ''}/… (hidden: only who may change sources sees it)"


def source_fields(
    source: TrafficSource, campaigns: int | None = None, *, reveal: bool = True
) -> dict[str, Any]:
    """A source as the CLI prints it and the admin API answers it (`reveal`: its postback URL whole;
    else only its host, see hidden_postback)."""
    parameters = loads(source.parameters)
    fields = {
        "id": source.id,
        "name": source.name,
        "status": source.status,
        "template": template_text(parameters),
        "parameters": parameters,
        "postback_url": source.postback_url if reveal else hidden_postback(source.postback_url),
        "postback_statuses": source.postback_statuses.split(",") if source.postback_statuses else [],
        "postback_method": source.postback_method,
    }
    if campaigns is not None:
        fields["campaigns"] = campaigns
    return fields


def _audit_fields(source: TrafficSource) -> dict[str, Any]:
    return dict(source.__data__)


def get_source(db: Database, ref: str | int) -> TrafficSource:
    """A source by id or name (a name wins over another source's id, as a campaign's alias does)."""
    return find_by_name_or_id(TrafficSource, TrafficSource.name, ref, "traffic source")


def list_sources(db: Database, *, include_archived: bool = False) -> list[TrafficSource]:
    query = TrafficSource.select().order_by(TrafficSource.id)
    if not include_archived:
        query = query.where(TrafficSource.status == "active")
    return list(query)


def campaign_counts(db: Database) -> dict[int, int]:
    """Source id -> how many campaigns (not archived) use it."""
    counts: dict[int, int] = {}
    # .tuples(): peewee's stubs still say models.
    for (source_id,) in cast(
        "Iterable[tuple[int]]",
        Campaign.select(Campaign.source_id)
        .where(Campaign.source_id.is_null(False) & (Campaign.status != "archived"))
        .tuples(),
    ):
        counts[source_id] = counts.get(source_id, 0) + 1
    return counts


def _statuses(values: Iterable[str]) -> str:
    statuses = [part.strip().lower() for value in values for part in value.split(",") if part.strip()]
    for status in statuses:
        if status not in CONVERSION_STATUSES:
            raise AdminError(
                f"A postback status must be one of {', '.join(CONVERSION_STATUSES)}, not {status!r}."
            )
    if not statuses:
        raise AdminError("Name at least one status the source's postback is for (lead, sale, ...).")
    return ",".join(dict.fromkeys(statuses))


def _target_url(postback_url: str, parameters: list[dict[str, str]]) -> str:
    """The source's postback template as a target stores it: its parameter names as the click macros
    their values are stored under (`{zoneid}` -> `{sub_id_1}`)."""
    return rename_macros(postback_url, macro_renames(parameters))


def _check_postback(url: str, parameters: list[dict[str, str]]) -> str:
    url = url.strip()
    if url:
        try:
            compile_target_url(_target_url(url, parameters))
        except (OutboundError, MacroError) as exc:
            raise AdminError(str(exc)) from None
    return url


def _parameters(template: str, slots: dict[str, int] | None) -> list[dict[str, str]]:
    try:
        return parse_template(template, slots)
    except SourceError as exc:
        raise AdminError(str(exc)) from None


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise AdminError(f"A traffic source's name is 1 to {MAX_NAME} characters.")
    return name


def source_macro_names(exclude_id: int | None = None) -> frozenset[str]:
    """Every source's parameter names: the macros an offer or redirect URL may use besides the click's."""
    names: set[str] = set()
    for source in TrafficSource.select(TrafficSource.id, TrafficSource.parameters):
        if source.id != exclude_id:
            names.update(p["name"] for p in loads(source.parameters))
    return frozenset(names)


def _check_urls_still_compile(names: frozenset[str]) -> None:
    """Refuse a change that would leave a saved URL with a macro no source defines any more: the
    worker would skip that offer or stream (a URL is checked when it is saved, and loaded as saved)."""
    urls = [(f"Offer {o.id}'s URL", o.url) for o in Offer.select(Offer.id, Offer.url)]
    urls += [
        (f"Stream {s.id}'s redirect URL", s.action_payload)
        for s in Stream.select(Stream.id, Stream.action_payload).where(
            (Stream.action == "redirect") & (Stream.status != "deleted")
        )
    ]
    urls += [
        (f"Campaign {c.alias}'s default URL", c.default_payload)
        for c in Campaign.select(Campaign.alias, Campaign.default_payload).where(
            Campaign.default_payload != ""
        )
    ]
    for what, url in urls:
        try:
            compile_url(url, names)
        except MacroError:
            try:
                compile_url(url, source_macro_names())
            except MacroError:
                continue  # Broken before this change: not this change's doing.
            raise AdminError(f"{what} uses a parameter this change removes; change the URL first.") from None


def sync_postback_target(
    db: Database, campaign: Campaign, source: TrafficSource | None, actor: Principal
) -> None:
    """Keep the campaign's source-made postback target as its source says (in the caller's transaction)."""
    current = PostbackTarget.get_or_none(
        (PostbackTarget.campaign_id == campaign.id)
        & PostbackTarget.source_id.is_null(False)
        & (PostbackTarget.status == "active")
    )
    wanted = None
    if source is not None and source.postback_url:
        wanted = {
            "url": _target_url(source.postback_url, loads(source.parameters)),
            "statuses": source.postback_statuses,
            "method": source.postback_method,
        }
    fields = ("campaign_id", "statuses", "url", "method", "status", "source_id")
    if current is not None and (wanted is None or source is None or current.source_id != source.id):
        before = {name: getattr(current, name) for name in fields}
        current.status = "removed"
        current.save()
        after = {name: getattr(current, name) for name in fields}
        record_change(db, actor, "postback_target", current.id, "remove", before, after)
        current = None
    if wanted is None or source is None:  # No wanted target without a source.
        return
    if current is None:
        target = PostbackTarget.create(
            campaign_id=campaign.id, source_id=source.id, created_at=_now(), **wanted
        )
        after = {name: getattr(target, name) for name in fields}
        record_change(db, actor, "postback_target", target.id, "create", None, after)
    elif any(getattr(current, key) != value for key, value in wanted.items()):
        before = {name: getattr(current, name) for name in fields}
        for key, value in wanted.items():
            setattr(current, key, value)
        current.save()
        after = {name: getattr(current, name) for name in fields}
        record_change(db, actor, "postback_target", current.id, "update", before, after)


def create_source(
    db: Database,
    name: str,
    template: str = "",
    *,
    slots: dict[str, int] | None = None,
    postback_url: str = "",
    postback_statuses: Iterable[str] = ("sale",),
    postback_method: str = "GET",
    from_catalogue: str | None = None,
    actor: Principal = CLI,
) -> TrafficSource:
    """A source from a template (`zoneid={zoneid}&...`), or from a catalogue entry's template
    (`from_catalogue`; a template given as well replaces it)."""
    if from_catalogue:
        entry = catalogue_entry(from_catalogue)
        template = template or entry["template"]
        postback_url = postback_url or entry["postback"]
    parameters = _parameters(template, slots)
    fields = {
        "name": _check_name(name),
        "parameters": json.dumps(parameters),
        "postback_url": _check_postback(postback_url, parameters),
        "postback_statuses": _statuses(postback_statuses),
        "postback_method": _method(postback_method),
    }
    with write_tx(db):
        try:
            source = TrafficSource.create(**fields)
        except IntegrityError:
            raise AdminConflict(f"A traffic source named {fields['name']!r} already exists.") from None
        record_change(db, actor, "traffic_source", source.id, "create", None, _audit_fields(source))
        MetaStore(db.connection()).bump_config_version()
    return source


def _method(method: str) -> str:
    method = method.upper()
    if method not in POSTBACK_METHODS:
        raise AdminError(f"The postback method must be GET or POST, not {method!r}.")
    return method


def _kept_slots(
    parameters: list[dict[str, str]], template: str | None, slots: dict[str, int]
) -> dict[str, int]:
    """The slots a changed source maps its names to: those given, and for the other names it keeps
    the slot they had (data already stored there stays theirs), unless a given one takes it."""
    names = {p["name"] for p in _parameters(template, None)} if template is not None else None
    kept = {
        name: slot
        for name, slot in slot_of(parameters).items()
        if (names is None or name in names) and name not in slots and slot not in slots.values()
    }
    return {**kept, **slots}


def update_source(
    db: Database,
    ref: str | int,
    *,
    name: str | None = None,
    template: str | None = None,
    slots: dict[str, int] | None = None,
    postback_url: str | None = None,
    postback_statuses: Iterable[str] | None = None,
    postback_method: str | None = None,
    status: str | None = None,
    actor: Principal = CLI,
) -> TrafficSource:
    """Change a source; None leaves a field as it is (`postback_url=""` stops its postbacks). A name
    keeps its sub_id slot through a change unless `slots` maps it (or another name to its slot); slots
    given without a template re-map the current template's names."""
    with write_tx(db):
        source = get_source(db, ref)
        before = _audit_fields(source)
        parameters = loads(source.parameters)
        if template is not None or slots:
            parameters = _parameters(
                template_text(parameters) if template is None else template,
                _kept_slots(parameters, template, slots or {}),
            )
            source.parameters = json.dumps(parameters)
            names = source_macro_names(exclude_id=source.id) | {p["name"] for p in parameters}
            _check_urls_still_compile(names)
        if name is not None:
            source.name = _check_name(name)
        if postback_url is not None:
            source.postback_url = postback_url
        source.postback_url = _check_postback(source.postback_url, parameters)
        if postback_statuses is not None:
            source.postback_statuses = _statuses(postback_statuses)
        if postback_method is not None:
            source.postback_method = _method(postback_method)
        if status is not None:
            if status not in SOURCE_STATUSES:
                raise AdminError(f"A source's status is one of {', '.join(SOURCE_STATUSES)}, not {status!r}.")
            source.status = status
        source.updated_at = _now()
        try:
            source.save()
        except IntegrityError:
            raise AdminConflict(f"A traffic source named {source.name!r} already exists.") from None
        record_change(db, actor, "traffic_source", source.id, "update", before, _audit_fields(source))
        for campaign in Campaign.select().where(Campaign.source_id == source.id):
            sync_postback_target(db, campaign, source, actor)
        MetaStore(db.connection()).bump_config_version()
    return source


def delete_source(db: Database, ref: str | int, *, actor: Principal = CLI) -> None:
    """Delete a source no campaign uses (archived campaigns too: their reports name it). Its removed
    postback targets keep their history without it."""
    with write_tx(db):
        source = get_source(db, ref)
        users = list(Campaign.select(Campaign.id, Campaign.alias).where(Campaign.source_id == source.id))
        if users:
            # Only the campaigns the actor sees are named: the others' aliases are not theirs to read.
            visible = visible_campaign_ids(db, actor)
            named = sorted(c.alias for c in users if visible is None or c.id in visible)
            hidden = len(users) - len(named)
            which = listed("campaign", named) if named else ""
            if hidden:
                others = f"{hidden} campaign{'s' if hidden > 1 else ''} not shared with you"
                which = f"{which} and {others}" if which else others
            raise AdminConflict(
                f"Traffic source {source.name!r} is the source of {which}: "
                "give them another source (or none) first, or archive it."
            )
        senders = connections_of_source(db, source.id)
        if senders:
            raise AdminConflict(
                f"Traffic source {source.name!r} sends conversions through "
                f"{listed('ad platform connection', senders)}: remove it first (`lanner platform remove`)."
            )
        spenders = spend_connections_of_source(db, source.id)
        if spenders:
            raise AdminConflict(
                f"Traffic source {source.name!r} has its spend pulled by "
                f"{listed('spend connection', spenders)}: remove it first (`lanner platform spend remove`)."
            )
        release_source(db, source.id)
        release_spend_source(db, source.id)
        before = _audit_fields(source)
        PostbackTarget.update(source_id=None).where(PostbackTarget.source_id == source.id).execute()
        source.delete_instance()
        record_change(db, actor, "traffic_source", source.id, "delete", before, None)
        MetaStore(db.connection()).bump_config_version()


def source_id_for(db: Database, ref: str | None) -> int | None:
    """The id of the source a campaign is given (`--source NAME`); only an active one may be picked."""
    if ref is None:
        return None
    source = get_source(db, ref)
    if source.status != "active":
        raise AdminError(f"Traffic source {source.name!r} is archived; a campaign cannot pick it.")
    return source.id


def source_of_id(source_id: int | None) -> TrafficSource | None:
    return TrafficSource.get_or_none(TrafficSource.id == source_id) if source_id else None


def source_of(campaign: Campaign) -> TrafficSource | None:
    return source_of_id(campaign.source_id)


def campaign_source_url(campaign: Campaign) -> str:
    """The campaign URL path as its source's network takes it: `/alias?zoneid={zoneid}&...`."""
    source = source_of(campaign)
    return campaign_url(campaign.alias, loads(source.parameters) if source else [])
