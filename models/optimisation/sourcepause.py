"""Pausing a zone at its traffic source: which platform campaigns a Lanner campaign's zone is excluded
from, and the exclusion (or its undo) done there.

A campaign's zones can be paused at the source when its traffic source has an active PropellerAds spend
connection (models/reporting/spend/connections.py) whose parameter is the rule's dimension (the click
parameter the connection maps zones to) and which maps at least one of the platform's campaign ids onto
it: the zone is excluded in each of those. Nothing here writes to Lanner's store: the rule records what
was done (models/optimisation/rules.py) once the source said yes, so a refusal leaves nothing half-done.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from models.errors import ConflictError
from models.optimisation.labels import LabelError, LabelScope, parse_slot
from models.optimisation.sourcezones import (
    Send,
    SourceRefused,
    excluded_zones,
    http_send,
    is_zone_id,
    set_excluded_zones,
)
from models.routing.sources import loads, slot_of
from models.tables.campaign import Campaign
from models.tables.optimisation import Label
from models.tables.source import TrafficSource
from models.tables.spend import SpendConnection, SpendMapping

PLATFORMS = ("propellerads",)  # The spend connections whose API can exclude a zone.


@dataclass(frozen=True)
class SourceAccess:
    """How the sources' APIs are reached: each platform's base URL (settings) and the HTTP call."""

    urls: Mapping[str, str]
    send: Send = http_send

    @classmethod
    def from_settings(cls, settings) -> SourceAccess:
        return cls({"propellerads": settings.propellerads_api_url})


@dataclass(frozen=True)
class SourceTarget:
    """Where a campaign's zones are paused: a connection and the platform's campaign ids mapped onto it."""

    connection_id: int
    connection: str
    platform: str
    platform_campaigns: tuple[str, ...]


def _connection_slot(connection: SpendConnection, source: TrafficSource) -> int | None:
    slot = parse_slot(connection.parameter)
    return slot if slot is not None else slot_of(loads(source.parameters)).get(connection.parameter)


def source_target(campaign: Campaign, slot: int) -> SourceTarget | str:
    """Where `campaign`'s zones in sub_id `slot` are paused at the source, or why they cannot be (one
    sentence)."""
    source = TrafficSource.get_or_none(TrafficSource.id == campaign.source_id)
    if source is None:
        return f"Campaign {campaign.alias!r} has no traffic source to pause its zones at."
    connections = list(
        SpendConnection.select()
        .where(
            (SpendConnection.source_id == source.id)
            & (SpendConnection.status == "active")
            & SpendConnection.platform.in_(PLATFORMS)
        )
        .order_by(SpendConnection.id)
    )
    if not connections:
        return (
            f"Traffic source {source.name!r} has no active PropellerAds spend connection to pause zones "
            "through; skipped."
        )
    for connection in connections:
        if _connection_slot(connection, source) != slot:
            continue
        ids = tuple(
            row.external_id
            for row in SpendMapping.select(SpendMapping.external_id)
            .where((SpendMapping.connection_id == connection.id) & (SpendMapping.campaign_id == campaign.id))
            .order_by(SpendMapping.external_id)
        )
        if ids:
            return SourceTarget(connection.id, connection.name, connection.platform, ids)
    return (
        f"No active PropellerAds connection of {source.name!r} maps a platform campaign onto "
        f"{campaign.alias!r} with this parameter as its zone; skipped."
    )


def _token(connection_id: int) -> tuple[str, str]:
    """(platform, API token) of a connection that is not removed; SourceRefused otherwise."""
    row = SpendConnection.get_or_none(SpendConnection.id == connection_id)
    if row is None or row.status == "removed":
        raise SourceRefused(
            "The spend connection it went through is removed; change it at the source by hand."
        )
    return row.platform, json.loads(row.credentials).get("api_token", "")


def exclude_zone(target: SourceTarget, zone: str, access: SourceAccess, added: list[str]) -> str:
    """Exclude `zone` in each of the target's platform campaigns where it is not excluded yet, each
    campaign it was added to appended to `added` as it is (so that a refusal half-way still says which
    took it); the platform's answers. Sending the union again changes nothing, so a retry is safe."""
    if not is_zone_id(zone):
        raise SourceRefused(f"{zone[:40]!r} is not a PropellerAds zone id (a whole number); skipped.")
    platform, token = _token(target.connection_id)
    base = access.urls[platform]
    answers = []
    for campaign_id in target.platform_campaigns:
        zones = excluded_zones(base, token, campaign_id, access.send)
        if zone in zones:
            answers.append(f"campaign {campaign_id}: excluded already")
            continue
        said = set_excluded_zones(base, token, campaign_id, sorted({*zones, zone}, key=int), access.send)
        added.append(campaign_id)
        answers.append(f"campaign {campaign_id}: {said}")
    return "; ".join(answers)


def include_zone(connection_id: int, campaigns: list[str], zone: str, access: SourceAccess) -> str:
    """Take `zone` out of the exclusion list of each of `campaigns` (the undo); the platform's answers."""
    platform, token = _token(connection_id)
    base = access.urls[platform]
    answers = []
    for campaign_id in campaigns:
        zones = excluded_zones(base, token, campaign_id, access.send)
        if zone not in zones:
            answers.append(f"campaign {campaign_id}: not excluded")
            continue
        left = [z for z in zones if z != zone]
        answers.append(
            f"campaign {campaign_id}: {set_excluded_zones(base, token, campaign_id, left, access.send)}"
        )
    return "; ".join(answers)


class PushRefused(LabelError, ConflictError):
    """A blacklist the source refused or could not take: one sentence; what it took stays taken."""


def _scope_targets(scope: LabelScope) -> list[SourceTarget]:
    """The connections and platform campaigns a scope's blacklist goes to (LabelError for none)."""
    if scope.scope == "campaign":
        found = source_target(Campaign.get_by_id(scope.scope_id), scope.slot)
        if isinstance(found, str):
            raise PushRefused(found.removesuffix("; skipped.") + ": nothing to push the blacklist to.")
        return [found]
    source = TrafficSource.get_by_id(scope.scope_id)
    targets = []
    for connection in SpendConnection.select().where(
        (SpendConnection.source_id == source.id)
        & (SpendConnection.status == "active")
        & SpendConnection.platform.in_(PLATFORMS)
    ):
        if _connection_slot(connection, source) != scope.slot:
            continue
        ids = tuple(
            row.external_id
            for row in SpendMapping.select(SpendMapping.external_id)
            .where(SpendMapping.connection_id == connection.id)
            .order_by(SpendMapping.external_id)
        )
        if ids:
            targets.append(SourceTarget(connection.id, connection.name, connection.platform, ids))
    if not targets:
        raise PushRefused(
            f"No active PropellerAds spend connection of {source.name!r} with {scope.parameter!r} as its "
            "zone maps a platform campaign: nothing to push the blacklist to."
        )
    return targets


@dataclass(frozen=True)
class Pushed:
    """What a push sent: how many zones, the blacklisted values that are no zone id, and per platform
    campaign what it answered."""

    zones: int
    not_zone_ids: list[str]
    campaigns: dict[str, str]


def push_blacklist(scope: LabelScope, access: SourceAccess) -> Pushed:
    """Exclude every blacklisted zone of `scope` in the platform campaigns its connection maps onto it
    (a source's: every campaign any of its connections maps): the union with what each excludes already
    is sent, so pushing again changes nothing. What was sent, per platform campaign; PushRefused when
    the source refuses (the campaigns before it took theirs: a push again finishes the rest)."""
    values = [
        row.value
        for row in Label.select(Label.value)
        .where(
            (Label.scope == scope.scope)
            & (Label.scope_id == scope.scope_id)
            & (Label.slot == scope.slot)
            & (Label.label == "blacklist")
        )
        .order_by(Label.value)
    ]
    zones = sorted({v for v in values if is_zone_id(v)}, key=int)
    not_zones = [v for v in values if not is_zone_id(v)]
    pushed: dict[str, str] = {}
    for target in _scope_targets(scope):
        platform, token = _token(target.connection_id)
        base = access.urls[platform]
        for campaign_id in target.platform_campaigns:
            try:
                excluded = excluded_zones(base, token, campaign_id, access.send)
                new = [zone for zone in zones if zone not in excluded]
                if new:
                    merged = sorted({*excluded, *new}, key=int)
                    said = set_excluded_zones(base, token, campaign_id, merged, access.send)
                    pushed[campaign_id] = f"{len(new)} zone(s) added: {said}"
                else:
                    pushed[campaign_id] = "excluded all of them already"
            except SourceRefused as exc:
                raise PushRefused(f"{exc} Pushed before it: {pushed or 'none'}.") from None
    return Pushed(len(zones), not_zones, pushed)
