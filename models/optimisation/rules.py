"""Automation rules: "over the last N hours (optionally before today), for each zone (sub id value),
offer, lander or stream of these campaigns where the conditions hold, blacklist or whitelist it, pause
it in Lanner, or only notify".

Notifying: a rule with an alert channel (models/alerts/) tells it of what it did, one message a run
for all its actions (never one per zone), each action in one message only (`rule_action.alert_id`);
a `notify` rule changes nothing and tells what matched, once per thing like any action.

A rule reads the same reports as everyone (models/reporting/reports.py: the rollups, the columnar
history when it exists), one report per window and dimension for every rule that shares them, grouped
by campaign and the dimension. What it would do now is `plan_rules` (the dry run); `run_rules` does it,
each action in one transaction with its log row: what, why (the conditions), the numbers then, and
what undoes it. A rule never acts twice on the same thing (one log row per rule, campaign and target,
undone or not: an undo is the user overruling it), never changes a label someone set (by hand or by
another rule), and acts at most `max_actions` times a run, the worst spenders first; the rest wait for
the next run, counted as held back.

Pausing: a stream is disabled; an offer or a lander gets weight 0 in the campaign's streams, except
where it is a stream's last one with a weight (the stream would send nowhere). Loops: two enabled rules
that would label the same campaign's same slot one black and one white are refused (each would undo
the other); no rule un-pauses, and none overrides a label, so no rule can undo another's action.

Pausing at the source (`pause_at_source`): a zone is excluded in the platform campaigns a PropellerAds
spend connection of the campaign's traffic source maps onto it (models/optimisation/sourcepause.py). The
call is made outside any transaction and its row written after the source said yes: a refusal leaves a
`failed` row with the answer (the next run tries again), no connection or mapping a `skipped` one; only a
`done` action is never repeated, and each counts against the rule's limit.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from peewee import Database, IntegrityError, fn

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminNotFound
from models.admin.rows import get_campaign
from models.admin.services import check_timezone
from models.alerts.channels import get_channel_row
from models.alerts.delivery import queue_alert
from models.errors import ConflictError, LannerError, NotFoundError
from models.optimisation.conditions import (
    COMPARE,
    Condition,
    ConditionError,
    conditions_from_json,
    parse_conditions,
)
from models.optimisation.labels import LABELS, label_lookup, label_scope, set_labels
from models.optimisation.sourcepause import SourceAccess, exclude_zone, include_zone, source_target
from models.optimisation.sourcezones import SourceRefused, is_zone_id
from models.reporting.history import HistoryFiles
from models.reporting.reportpage import PageQuery, page_report
from models.reporting.reports import ReportError, ReportQuery, run_report
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.alerts import AlertChannel
from models.tables.campaign import Campaign, Stream, StreamOffer
from models.tables.lander import StreamLander
from models.tables.optimisation import Label, Rule, RuleAction

PAUSED_DIMENSIONS = ("stream", "offer", "lander")
NOTIFY = "notify"  # Changes nothing: its channel is told what matched (once per thing, like any action).
PAUSE_AT_SOURCE = "pause_at_source"  # The zone excluded at the traffic source, by its API.
ACTIONS = (*LABELS, "pause", PAUSE_AT_SOURCE, NOTIFY)
DONE, FAILED, SKIPPED = "done", "failed", "skipped"
MAX_WINDOW_HOURS = 90 * 24
MAX_ACTIONS_PER_RUN = 1000
NUMBERS = ("clicks", "conversions", "cost", "revenue", "profit", "roi", "cr", "epc", "cpa")
_WINDOW = re.compile(r"([0-9]{1,5})\s*([hd])")


class RuleError(LannerError, ValueError):
    """A rule that cannot be made or run; one sentence for the user."""


class RuleNotFound(RuleError, NotFoundError):
    """No rule, or no action, by that name or id."""


class RuleConflict(RuleError, ConflictError):
    """A rule whose name is taken, or that would undo another's actions."""


class RuleSourceRefused(RuleConflict):
    """An undo at the source that the source refused: nothing was undone."""


def parse_window(text: str) -> int:
    """`6h` or `3d` as hours."""
    match = _WINDOW.fullmatch(text.strip().lower())
    if match is None:
        raise RuleError(f"A window is hours or days, such as 6h or 3d, not {text[:20]!r}.")
    hours = int(match.group(1)) * (24 if match.group(2) == "d" else 1)
    if not 1 <= hours <= MAX_WINDOW_HOURS:
        raise RuleError(f"A window is 1 hour to {MAX_WINDOW_HOURS // 24} days.")
    return hours


def _window_text(hours: int) -> str:
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"


@dataclass(frozen=True)
class RuleSpec:
    """A rule as read from its row."""

    id: int
    name: str
    campaign_ids: tuple[int, ...]
    dimension: str
    window_hours: int
    is_today_excluded: bool
    timezone: str
    conditions: tuple[Condition, ...]
    action: str
    max_actions: int
    is_enabled: bool
    channel_id: int | None = None  # The alert channel told of what it does.
    last_run_at: int | None = None  # UTC ms.
    warnings: tuple[str, ...] = ()  # Said at creation: what keeps it from acting (no source connection).

    @classmethod
    def of(cls, row: Rule) -> RuleSpec:
        return cls(
            row.id,
            row.name,
            tuple(json.loads(row.campaign_ids)),
            row.dimension,
            row.window_hours,
            bool(row.is_today_excluded),
            row.timezone,
            tuple(conditions_from_json(json.loads(row.conditions))),
            row.action,
            row.max_actions,
            bool(row.is_enabled),
            row.channel_id,
            row.last_run_at,
        )

    @property
    def reason(self) -> str:
        window = f"over {_window_text(self.window_hours)}" + (
            " before today" if self.is_today_excluded else ""
        )
        return " and ".join(c.text for c in self.conditions) + f" {window}"

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "campaigns": list(self.campaign_ids),
            "dimension": self.dimension,
            "window": _window_text(self.window_hours),
            "exclude_today": self.is_today_excluded,
            "timezone": self.timezone,
            "conditions": [c.text for c in self.conditions],
            "action": self.action,
            "max_actions": self.max_actions,
            "enabled": self.is_enabled,
            "notify": _channel_name(self.channel_id),
            "last_run_at": self.last_run_at,
        } | ({"warnings": list(self.warnings)} if self.warnings else {})


def _channel_name(channel_id: int | None) -> str | None:
    if channel_id is None:
        return None
    row = AlertChannel.get_or_none(AlertChannel.id == channel_id)
    return row.name if row else None


def _channel_id(ref: str | None) -> int | None:
    """The alert channel a rule notifies, by name or id (None for none); RuleError when there is none."""
    if ref is None or not str(ref).strip():
        return None
    try:
        return get_channel_row(ref).id
    except AdminNotFound as exc:
        raise RuleError(str(exc)) from None


def _slots(dimension: str, campaigns: Iterable[Campaign]) -> dict[int, int]:
    """Campaign id -> the sub_id slot `dimension` is in for it (RuleError for one without it)."""
    slots = {}
    for campaign in campaigns:
        try:
            slots[campaign.id] = label_scope(campaign=campaign, parameter=dimension).slot
        except LannerError:
            raise RuleError(
                f"Campaign {campaign.alias!r} has no {dimension!r}: a rule's dimension is offer, lander, "
                "stream, sub_id_1 … sub_id_30, or a parameter of every one of its campaigns' traffic sources."
            ) from None
    return slots


def create_rule(
    db: Database,
    name: str,
    *,
    campaigns: Iterable[str],
    dimension: str,
    window: str,
    conditions: Iterable[str],
    action: str,
    max_actions: int = 10,
    exclude_today: bool = False,
    timezone: str = "UTC",
    notify: str | None = None,
    actor: Principal = CLI,
) -> RuleSpec:
    """A rule, checked whole before it is stored: RuleError (or ConditionError) for anything wrong with
    it, RuleConflict for a name taken or a rule it would undo."""
    name = name.strip()
    if not name or len(name) > 100:
        raise RuleError("A rule's name is 1 to 100 characters.")
    refs = [ref.strip() for ref in campaigns if ref.strip()]
    if not refs:
        raise RuleError("A rule acts on at least one campaign.")
    found = {campaign.id: campaign for campaign in (get_campaign(db, ref) for ref in refs)}
    dimension = dimension.strip()
    if action not in ACTIONS:
        raise RuleError(f"A rule's action is {', '.join(ACTIONS)}, not {action[:20]!r}.")
    if action == NOTIFY:
        if notify is None:
            raise RuleError("A rule whose action is notify needs the alert channel it notifies.")
        if dimension not in PAUSED_DIMENSIONS:
            _slots(dimension, found.values())
    elif dimension in PAUSED_DIMENSIONS:
        if action == PAUSE_AT_SOURCE:
            raise RuleError(
                f"A rule over {dimension}s pauses them in Lanner; pause_at_source is for zones (the "
                "parameter a source's spend connection maps zones to)."
            )
        if action != "pause":
            raise RuleError(
                f"A rule over {dimension}s pauses them; blacklists and whitelists are of sub id values."
            )
    else:
        _slots(dimension, found.values())
        if action == "pause":
            raise RuleError(
                "A zone or sub id value cannot be paused in Lanner: blacklist it (and export the list to the "
                "source)."
            )
    hours = parse_window(window)
    try:
        checked = parse_conditions(list(conditions))
    except ConditionError as exc:
        raise RuleError(str(exc)) from None
    if not 1 <= max_actions <= MAX_ACTIONS_PER_RUN:
        raise RuleError(f"A rule acts 1 to {MAX_ACTIONS_PER_RUN} times a run at most.")
    timezone = check_timezone(timezone)
    with write_tx(db):
        channel_id = _channel_id(notify)
        if Rule.get_or_none(Rule.name == name) is not None:
            raise RuleConflict(f"There is a rule named {name!r} already.")
        if action in LABELS:
            _refuse_loops(name, dimension, action, found)
        now = int(time.time() * 1000)
        row = Rule.create(
            name=name,
            campaign_ids=json.dumps(sorted(found)),
            dimension=dimension,
            window_hours=hours,
            is_today_excluded=int(exclude_today),
            timezone=timezone,
            conditions=json.dumps([c.as_json() for c in checked]),
            action=action,
            max_actions=max_actions,
            channel_id=channel_id,
            created_at=now,
            updated_at=now,
        )
        spec = RuleSpec.of(row)
        record_change(db, actor, "rule", row.id, "create", None, spec.as_json())
    if action == PAUSE_AT_SOURCE:
        spec = replace(spec, warnings=tuple(source_warnings(spec, found.values())))
    return spec


def rule_warnings(db: Database, spec: RuleSpec) -> list[str]:
    """What keeps the rule from acting now: for pause_at_source, campaigns with nothing to act through."""
    if spec.action != PAUSE_AT_SOURCE:
        return []
    try:
        return source_warnings(spec, Campaign.select().where(Campaign.id.in_(list(spec.campaign_ids))))
    except RuleError as exc:
        return [str(exc)]


def source_warnings(spec: RuleSpec, campaigns: Iterable[Campaign]) -> list[str]:
    """Why a pause_at_source rule could not act on some of its campaigns now (one sentence each)."""
    campaigns = list(campaigns)
    slots = _slots(spec.dimension, campaigns)
    warnings = []
    for campaign in campaigns:
        found = source_target(campaign, slots[campaign.id])
        if isinstance(found, str):
            warnings.append(f"{found.removesuffix('; skipped.')}: its zones are skipped until one does.")
    return warnings


def _refuse_loops(name: str, dimension: str, action: str, campaigns: dict[int, Campaign]) -> None:
    """RuleConflict if an enabled rule labels the same slot of one of `campaigns` the other way."""
    slots = _slots(dimension, campaigns.values())
    for other in Rule.select().where(
        (Rule.is_enabled == 1) & Rule.action.in_(LABELS) & (Rule.action != action)
    ):
        spec = RuleSpec.of(other)
        shared = [campaigns[i] for i in spec.campaign_ids if i in campaigns]
        if not shared:
            continue
        try:
            other_slots = _slots(spec.dimension, shared)
        except RuleError:
            continue
        for campaign in shared:
            if other_slots[campaign.id] == slots[campaign.id]:
                raise RuleConflict(
                    f"Rule {spec.name!r} {spec.action}s {spec.dimension} values of campaign "
                    f"{campaign.alias!r}, which {name!r} would {action}: each would undo the other. Disable "
                    "it, or give this rule other campaigns."
                )


def get_rule(db: Database, ref: str | int) -> Rule:
    ref = str(ref).strip()
    row = Rule.get_or_none(Rule.name == ref)
    if row is None and ref.isdigit() and int(ref) < 2**63:
        row = Rule.get_or_none(Rule.id == int(ref))
    if row is None:
        raise RuleNotFound(f"There is no rule {ref[:60]!r}.")
    return row


def list_rules(db: Database) -> list[RuleSpec]:
    return [RuleSpec.of(row) for row in Rule.select().order_by(Rule.id)]


def set_rule_enabled(db: Database, ref: str | int, is_enabled: bool, *, actor: Principal = CLI) -> RuleSpec:
    with write_tx(db):
        row = get_rule(db, ref)
        if is_enabled and not row.is_enabled and row.action in LABELS:
            spec = RuleSpec.of(row)
            campaigns = {c.id: c for c in Campaign.select().where(Campaign.id.in_(list(spec.campaign_ids)))}
            _refuse_loops(row.name, row.dimension, row.action, campaigns)
        before = RuleSpec.of(row).as_json()
        row.is_enabled, row.updated_at = int(is_enabled), int(time.time() * 1000)
        row.save()
        spec = RuleSpec.of(row)
        record_change(db, actor, "rule", row.id, "update", before, spec.as_json())
    return spec


def update_rule(
    db: Database,
    ref: str | int,
    *,
    window: str,
    conditions: Iterable[str],
    max_actions: int,
    exclude_today: bool,
    timezone: str,
    notify: str | None,
    actor: Principal = CLI,
) -> RuleSpec:
    """A rule's window, conditions, limit and channel changed, checked as at creation. Its campaigns,
    dimension and action stay: its log is about them (a rule for others is a new rule). What it did
    stays done and is still never done again."""
    hours = parse_window(window)
    try:
        checked = parse_conditions(list(conditions))
    except ConditionError as exc:
        raise RuleError(str(exc)) from None
    if not 1 <= max_actions <= MAX_ACTIONS_PER_RUN:
        raise RuleError(f"A rule acts 1 to {MAX_ACTIONS_PER_RUN} times a run at most.")
    timezone = check_timezone(timezone)
    with write_tx(db):
        row = get_rule(db, ref)
        channel_id = _channel_id(notify)
        if channel_id is None and row.action == NOTIFY:
            raise RuleError("A rule whose action is notify needs the alert channel it notifies.")
        before = RuleSpec.of(row).as_json()
        row.window_hours, row.conditions = hours, json.dumps([c.as_json() for c in checked])
        row.max_actions, row.is_today_excluded, row.timezone = max_actions, int(exclude_today), timezone
        row.channel_id, row.updated_at = channel_id, int(time.time() * 1000)
        row.save()
        spec = RuleSpec.of(row)
        record_change(db, actor, "rule", row.id, "update", before, spec.as_json())
    return spec


def rule_counts(db: Database) -> dict[int, tuple[int, int]]:
    """Rule id -> (actions it took, how many of them were undone)."""
    counts: dict[int, tuple[int, int]] = {}
    query = (
        RuleAction.select(RuleAction.rule_id, fn.COUNT(RuleAction.id), fn.COUNT(RuleAction.undone_at))
        .where(RuleAction.state == DONE)
        .group_by(RuleAction.rule_id)
    )
    rows: list[Any] = list(query.tuples())  # peewee's stubs type it as models.
    for rule_id, taken, undone in rows:
        counts[rule_id] = (taken, undone)
    return counts


def set_rule_channel(
    db: Database, ref: str | int, channel: str | None, *, actor: Principal = CLI
) -> RuleSpec:
    """The alert channel the rule tells of what it does from now on (None: none; a notify rule needs one)."""
    with write_tx(db):
        row = get_rule(db, ref)
        channel_id = _channel_id(channel)
        if channel_id is None and row.action == NOTIFY:
            raise RuleError(f"Rule {row.name!r} only notifies: it needs a channel (disable it instead).")
        before = RuleSpec.of(row).as_json()
        row.channel_id, row.updated_at = channel_id, int(time.time() * 1000)
        row.save()
        spec = RuleSpec.of(row)
        record_change(db, actor, "rule", row.id, "update", before, spec.as_json())
    return spec


def delete_rule(db: Database, ref: str | int, *, actor: Principal = CLI) -> None:
    """A rule and its log (what it did stays done; undo first what should not)."""
    with write_tx(db):
        row = get_rule(db, ref)
        RuleAction.delete().where(RuleAction.rule_id == row.id).execute()
        record_change(db, actor, "rule", row.id, "remove", RuleSpec.of(row).as_json(), None)
        row.delete_instance()


# -- evaluation ------------------------------------------------------------------------------------


@dataclass
class Planned:
    """One thing a rule would do now."""

    rule_id: int
    rule: str
    campaign_id: int
    target: str  # The value, or the stream/offer/lander id.
    name: str  # What the report calls it (an offer's name ...).
    action: str
    reason: str
    numbers: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "campaign": self.campaign_id,
            "target": self.target,
            "name": self.name,
            "action": self.action,
            "reason": self.reason,
            "numbers": self.numbers,
        }


@dataclass
class RulePlan:
    rule: RuleSpec
    actions: list[Planned] = field(default_factory=list)
    held_back: int = 0  # Matches beyond max_actions: the next run's.
    done_before: int = 0  # Matches this rule acted on before (or whose action was undone).
    unchanged: int = 0  # Matches labelled or paused already (by hand, by another rule), or not pausable.
    error: str | None = None  # Why the rule could not be evaluated now.
    notes: list[str] = field(default_factory=list)


def _bounds(spec: RuleSpec, now: float) -> tuple[str, str]:
    """The rule's window as UTC minutes "YYYY-MM-DDTHH:MM" [since, until)."""
    from zoneinfo import ZoneInfo

    if spec.is_today_excluded:
        local = datetime.fromtimestamp(now, ZoneInfo(spec.timezone))
        end = local.replace(hour=0, minute=0, second=0, microsecond=0).astimezone(UTC)
    else:
        end = datetime.fromtimestamp(now // 60 * 60, UTC)
    start = end - timedelta(hours=spec.window_hours)
    return start.strftime("%Y-%m-%dT%H:%M"), end.strftime("%Y-%m-%dT%H:%M")


def _report_rows(
    db: Database,
    dimension: str,
    since: str,
    until: str,
    campaign_ids: set[int],
    history: HistoryFiles | None,
    conditions: tuple[Condition, ...] = (),
) -> tuple[list[dict[str, Any]], list[str]]:
    """The report's rows, or with `conditions` (the one rule asking for this report's) only those that
    may meet them (models/reporting/reportpage.py: DuckDB keeps them where the history answers, so
    Python makes no row of the thousands of zones that cannot; _plan_rule checks them exactly)."""
    query = ReportQuery(
        group_by=("campaign", dimension),
        filters={"campaign": tuple(str(i) for i in sorted(campaign_ids))},
        since=since,
        until=until,
        timezone="UTC",
    )
    if not conditions:
        report = run_report(db, query, history=history)
        return report.rows, report.notes
    where = tuple((c.metric, c.operator, c.value) for c in conditions)
    report = page_report(db, query, PageQuery(limit=2**62, where=where), history=history)
    return report.rows, report.notes


def plan_rules(
    db: Database,
    rules: Iterable[RuleSpec] | None = None,
    *,
    now: float | None = None,
    history: HistoryFiles | None = None,
) -> list[RulePlan]:
    """What each rule (the enabled ones by default) would do now, each rule's actions within its limit."""
    now = time.time() if now is None else now
    specs = [spec for spec in list_rules(db) if spec.is_enabled] if rules is None else list(rules)
    plans = {spec.id: RulePlan(spec) for spec in specs}
    # Each rule's report column per campaign: a source's parameter name is the sub_id slot its
    # campaign's source stores it in, which two campaigns' sources may not agree on.
    columns: dict[int, dict[int, str]] = {}
    wanted: dict[tuple[str, str, str], set[int]] = {}
    asking: dict[tuple[str, str, str], dict[int, tuple[Condition, ...]]] = {}  # Each rule's conditions.
    for spec in specs:
        try:
            columns[spec.id] = _columns(spec)
        except RuleError as exc:
            plans[spec.id].error = str(exc)
            continue
        bounds = _bounds(spec, now)
        for campaign_id, column in columns[spec.id].items():
            wanted.setdefault((column, *bounds), set()).add(campaign_id)
            asking.setdefault((column, *bounds), {})[spec.id] = spec.conditions
    reports: dict[tuple[str, str, str], dict[int, list[dict[str, Any]]] | str] = {}
    notes: dict[tuple[str, str, str], list[str]] = {}
    for key, campaign_ids in wanted.items():
        # PERF: one report for every rule of the same column and window.
        try:
            # The rows that may meet the conditions only, where one rule asks for the report (its page).
            conditions = next(iter(asking[key].values())) if len(asking[key]) == 1 else ()
            rows, notes[key] = _report_rows(db, *key, campaign_ids, history, tuple(conditions))
        except ReportError as exc:
            reports[key] = str(exc)
            continue
        by_campaign: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            by_campaign.setdefault(row["campaign"], []).append(row)
        reports[key] = by_campaign
    for spec in specs:
        if spec.id not in columns:
            continue
        bounds = _bounds(spec, now)
        candidates: list[tuple[str, list[dict[str, Any]]]] = []
        for campaign_id, column in columns[spec.id].items():
            found = reports[(column, *bounds)]
            if isinstance(found, str):
                plans[spec.id].error = found
                break
            plans[spec.id].notes = list(dict.fromkeys([*plans[spec.id].notes, *notes[(column, *bounds)]]))
            candidates.append((column, found.get(campaign_id, [])))
        else:
            _plan_rule(db, plans[spec.id], candidates)
    return [plans[spec.id] for spec in specs]


def _columns(spec: RuleSpec) -> dict[int, str]:
    """Campaign id -> the report group that holds the rule's dimension for it."""
    if spec.dimension in PAUSED_DIMENSIONS:
        return dict.fromkeys(spec.campaign_ids, spec.dimension)
    campaigns = Campaign.select().where(Campaign.id.in_(list(spec.campaign_ids)))
    return {campaign_id: f"sub_id_{slot}" for campaign_id, slot in _slots(spec.dimension, campaigns).items()}


def _plan_rule(db: Database, plan: RulePlan, candidates: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """`candidates`: (the report column holding the rule's dimension, its rows) of each campaign."""
    spec = plan.rule
    # PERF: 100 rules over 50,000 zones test 5 million rows a run; most fail the first condition.
    checks = [(c.metric, COMPARE[c.operator], c.value) for c in spec.conditions]
    matches = []
    for column, rows in candidates:
        for row in rows:
            for metric, compare, limit in checks:
                number = row[metric]
                if number is None or not compare(number, limit):
                    break
            else:
                if row[column] not in (None, ""):
                    matches.append((row[column], row))
    if not matches:
        return
    matches.sort(key=lambda item: (-(item[1].get("cost") or 0), -(item[1].get("clicks") or 0), str(item[0])))
    done = {
        (action.campaign_id, action.target)
        for action in RuleAction.select(RuleAction.campaign_id, RuleAction.target).where(
            (RuleAction.rule_id == spec.id) & (RuleAction.state == DONE)
        )
    }
    is_settled = _settled(db, spec)
    for value, row in matches:
        target = str(value)
        if (row["campaign"], target) in done:
            plan.done_before += 1
        elif is_settled(row["campaign"], target):
            plan.unchanged += 1
        elif len(plan.actions) >= spec.max_actions:
            plan.held_back += 1
        else:
            plan.actions.append(
                Planned(
                    spec.id,
                    spec.name,
                    row["campaign"],
                    target,
                    str(row.get(f"{spec.dimension}_name") or target),
                    spec.action,
                    spec.reason,
                    {name: row.get(name) for name in NUMBERS},
                )
            )
    if plan.held_back:
        plan.notes = [
            *plan.notes,
            f"{plan.held_back} more match beyond its limit of {spec.max_actions} a run: the next run's.",
        ]


def _settled(db: Database, spec: RuleSpec):
    """(campaign id, target) -> whether acting would change nothing or must not: a value labelled
    already (by hand, by another rule), a target paused already or one the pause must leave alone."""
    if spec.action in (NOTIFY, PAUSE_AT_SOURCE):
        # Telling changes nothing; what the source excludes is known only by asking it, when acting.
        return lambda campaign_id, target: False
    if spec.action in LABELS:
        campaigns = list(Campaign.select().where(Campaign.id.in_(list(spec.campaign_ids))))
        slots = _slots(spec.dimension, campaigns)
        sources = {c.id: c.source_id for c in campaigns}
        lookups = {slot: label_lookup(slot, sources) for slot in set(slots.values())}
        return lambda campaign_id, value: bool(lookups[slots[campaign_id]](campaign_id, value))
    return lambda campaign_id, target: not _pause_changes(spec.dimension, campaign_id, int(target))


# -- acting ------------------------------------------------------------------------------------------


def _pause_changes(dimension: str, campaign_id: int, target: int) -> dict[str, dict[str, int]]:
    """What pausing `target` in the campaign changes: {"stream_status" | "offer_weight" | "lander_weight":
    {row id: value before}}; empty when nothing would (paused already, or each link is its stream's last)."""
    streams = list(Stream.select().where((Stream.campaign == campaign_id) & (Stream.status == "active")))
    if dimension == "stream":
        stream = next((s for s in streams if s.id == target), None)
        others = [s for s in streams if s.type == "regular" and s.id != target]
        if stream is None or (stream.type == "regular" and not others):
            return {}  # Its campaign's last regular stream: pausing it would send nowhere.
        return {"stream_status": {str(stream.id): "active"}}  # type: ignore[dict-item]
    model, attribute, key = (
        (StreamOffer, "offer_id", "offer_weight")
        if dimension == "offer"
        else (StreamLander, "lander_id", "lander_weight")
    )
    changes = {}
    ids = [s.id for s in streams]
    links: list[Any] = list(
        model.select().where(model.stream_id.in_(ids or [-1]) & (model.status == "active"))
    )
    for link in links:
        if getattr(link, attribute) != target or link.weight <= 0:
            continue
        weighted = [other for other in links if other.stream_id == link.stream_id and other.weight > 0]
        if len(weighted) > 1:  # Never a stream's last: it would send nowhere.
            changes[str(link.id)] = link.weight
    return {key: changes} if changes else {}


def _apply_pause(changes: dict[str, dict[str, Any]], *, undo: bool = False) -> None:
    for key, rows in changes.items():
        for row_id, before in rows.items():
            if key == "stream_status":
                Stream.update(status=before if undo else "disabled").where(Stream.id == int(row_id)).execute()
            else:
                model = StreamOffer if key == "offer_weight" else StreamLander
                model.update(weight=before if undo else 0).where(model.id == int(row_id)).execute()


@dataclass
class RunResult:
    plans: list[RulePlan]
    acted: list[Planned]
    skipped: list[tuple[Planned, str]]  # Changed under the run (acted by another node, labelled meanwhile).
    alert_ids: list[int] = field(default_factory=list)  # The messages queued to the rules' channels.


def run_rules(
    db: Database,
    rules: Iterable[RuleSpec] | None = None,
    *,
    now: float | None = None,
    history: HistoryFiles | None = None,
    actor: Principal = CLI,
    sources: SourceAccess | None = None,
) -> RunResult:
    """Do what plan_rules says, each action with its log row in one transaction; `sources` reaches the
    traffic sources' APIs for pause_at_source (None: those actions are skipped)."""
    now = time.time() if now is None else now
    plans = plan_rules(db, rules, now=now, history=history)
    acted: list[Planned] = []
    skipped: list[tuple[Planned, str]] = []
    alert_ids: list[int] = []
    for plan in plans:
        for planned in plan.actions:
            try:
                if plan.rule.action == PAUSE_AT_SOURCE:
                    reason = _act_at_source(db, planned, plan.rule, int(now * 1000), sources)
                else:
                    reason = _act(db, planned, plan.rule, actor, int(now * 1000))
            except IntegrityError:
                reason = "another run acted on it first"
            if reason is None:
                acted.append(planned)
            else:
                skipped.append((planned, reason))
        if plan.error is None:
            Rule.update(last_run_at=int(now * 1000)).where(Rule.id == plan.rule.id).execute()
        if plan.rule.channel_id is not None:
            names = {(p.campaign_id, p.target): p.name for p in plan.actions}
            alert_id = notify_actions(db, plan.rule, names, int(now * 1000))
            if alert_id is not None:
                alert_ids.append(alert_id)
    return RunResult(plans, acted, skipped, alert_ids)


def _act(db: Database, planned: Planned, spec: RuleSpec, actor: Principal, now_ms: int) -> str | None:
    """One action and its log row, together; why it was not done (None: done)."""
    with write_tx(db):
        if spec.action == NOTIFY:
            undo: dict[str, Any] = {}
        elif spec.action in LABELS:
            campaign = Campaign.get_by_id(planned.campaign_id)
            scope = label_scope(campaign=campaign, parameter=spec.dimension)
            if _settled(db, spec)(planned.campaign_id, planned.target):
                return "it was labelled meanwhile"
            set_labels(db, scope, [planned.target], spec.action, actor=actor, rule_id=spec.id)
            label = Label.get(
                (Label.scope == "campaign")
                & (Label.scope_id == campaign.id)
                & (Label.slot == scope.slot)
                & (Label.value == planned.target)
            )
            undo = {"label_id": label.id, "label": spec.action}
        else:
            changes = _pause_changes(spec.dimension, planned.campaign_id, int(planned.target))
            if not changes:
                return "pausing it would leave a stream nothing to send to, or it is paused already"
            _apply_pause(changes)
            MetaStore(db.connection()).bump_config_version()
            record_change(
                db, actor, spec.dimension, int(planned.target), "update", None, {"paused_by_rule": spec.name}
            )
            undo = changes
        RuleAction.create(
            rule_id=spec.id,
            campaign_id=planned.campaign_id,
            target=planned.target,
            action=spec.action,
            reason=planned.reason,
            numbers=json.dumps(planned.numbers, default=str),
            undo=json.dumps(undo),
            created_at=now_ms,
            alert_id=None if spec.channel_id is not None else 0,  # NULL: its channel is yet to be told.
        )
    return None


def _act_at_source(
    db: Database, planned: Planned, spec: RuleSpec, now_ms: int, sources: SourceAccess | None
) -> str | None:
    """Exclude the zone at the source, then log it: done, failed (retried next run) or skipped; why it
    was not done (None: done). PERF: the source is called outside any transaction."""
    campaign = Campaign.get_by_id(planned.campaign_id)
    found = source_target(campaign, _slots(spec.dimension, [campaign])[campaign.id])
    state, answer, undo = SKIPPED, "", {}
    if isinstance(found, str):
        answer = found
    elif not is_zone_id(planned.target):
        answer = f"{planned.target[:40]!r} is not a PropellerAds zone id (a whole number); skipped."
    elif sources is None:
        answer = "This run cannot reach the traffic sources' APIs; skipped."
    else:
        # What an earlier try added before the source refused it half-way: the undo takes that back too.
        earlier = _earlier_try(spec.id, planned)
        added = (
            list(earlier.get("campaigns", [])) if earlier.get("connection_id") == found.connection_id else []
        )
        try:
            answer = exclude_zone(found, planned.target, sources, added)
            state = DONE
        except SourceRefused as exc:
            state, answer = FAILED, str(exc)
        undo = {"connection_id": found.connection_id, "connection": found.connection, "campaigns": added}
    with write_tx(db):
        before = _try_row(spec.id, planned)
        if before is not None and before.state == DONE:
            return "another run acted on it first"
        fields = {
            "action": spec.action,
            "reason": planned.reason,
            "numbers": json.dumps(planned.numbers, default=str),
            "undo": json.dumps(undo),
            "created_at": now_ms,
            "state": state,
            "answer": answer[:2000],
            # NULL: its channel is yet to be told; only what was done is told.
            "alert_id": None if spec.channel_id is not None and state == DONE else 0,
        }
        if before is None:
            RuleAction.create(
                rule_id=spec.id, campaign_id=planned.campaign_id, target=planned.target, **fields
            )
        else:
            RuleAction.update(**fields).where(RuleAction.id == before.id).execute()
    return None if state == DONE else answer


def _try_row(rule_id: int, planned: Planned) -> RuleAction | None:
    return RuleAction.get_or_none(
        (RuleAction.rule_id == rule_id)
        & (RuleAction.campaign_id == planned.campaign_id)
        & (RuleAction.target == planned.target)
    )


def _earlier_try(rule_id: int, planned: Planned) -> dict[str, Any]:
    row = _try_row(rule_id, planned)
    return json.loads(row.undo) if row is not None and row.state == FAILED else {}


NOTIFIED_NUMBERS = ("clicks", "conversions", "cost", "revenue", "roi")
MAX_NOTIFIED_LINES = 50


def _number_text(name: str, value: Any) -> str:
    if name in ("cost", "revenue"):
        return f"{name} {float(value):.2f}"
    if name == "roi":
        return f"roi {float(value):.1f}%"
    return f"{name} {value}"


def notify_actions(
    db: Database, spec: RuleSpec, names: dict[tuple[int, str], str], now_ms: int
) -> int | None:
    """One message to the rule's channel of every action of it no message told of yet (this run's, and any
    a crash kept from the last one's), queued with them marked in one transaction; its id, None for none."""
    with write_tx(db):
        actions = list(
            RuleAction.select()
            .where((RuleAction.rule_id == spec.id) & RuleAction.alert_id.is_null())
            .order_by(RuleAction.id)
        )
        if not actions or spec.channel_id is None:
            return None
        aliases = {
            c.id: c.alias
            for c in Campaign.select(Campaign.id, Campaign.alias).where(
                Campaign.id.in_(list({a.campaign_id for a in actions}))
            )
        }
        verb = {
            "blacklist": "blacklisted",
            "whitelist": "whitelisted",
            "pause": "paused",
            PAUSE_AT_SOURCE: "paused at the source",
            NOTIFY: "matched",
        }
        items = []
        lines: list[str] = []
        for action in actions:
            numbers = json.loads(action.numbers)
            name = names.get((action.campaign_id, action.target), action.target)
            campaign = aliases.get(action.campaign_id, str(action.campaign_id))
            items.append(
                {
                    "campaign": action.campaign_id,
                    "campaign_alias": campaign,
                    "target": action.target,
                    "name": name,
                    "action": action.action,
                    "reason": action.reason,
                    "numbers": numbers,
                    "rule_action_id": action.id,
                }
            )
            if len(lines) < MAX_NOTIFIED_LINES:
                shown = ", ".join(
                    _number_text(key, numbers[key])
                    for key in NOTIFIED_NUMBERS
                    if numbers.get(key) is not None
                )
                lines.append(f"- {campaign}: {spec.dimension} {name} {verb[action.action]} ({shown})")
        if len(actions) > len(lines):
            lines.append(f"… and {len(actions) - len(lines)} more (`lanner rule log --rule {spec.name}`).")
        title = f"Rule {spec.name}: {len(actions)} {spec.dimension} {verb[spec.action]}"
        body = f"When {spec.reason}:\n" + "\n".join(lines)
        alert_id = queue_alert(
            db,
            spec.channel_id,
            f"rule:{spec.id}:{actions[0].id}",
            "rule",
            title,
            body,
            {"rule": spec.name, "rule_id": spec.id, "dimension": spec.dimension, "actions": items},
            now_ms=now_ms,
        )
        RuleAction.update(alert_id=alert_id or 0).where(RuleAction.id.in_([a.id for a in actions])).execute()
    return alert_id


def rule_log(db: Database, *, rule_ref: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """What rules did, newest first."""
    query = RuleAction.select().order_by(RuleAction.id.desc()).limit(limit)
    if rule_ref is not None:
        query = query.where(RuleAction.rule_id == get_rule(db, rule_ref).id)
    names = {row.id: row.name for row in Rule.select(Rule.id, Rule.name)}
    return [
        {
            "id": row.id,
            "rule": names.get(row.rule_id, ""),
            "campaign": row.campaign_id,
            "target": row.target,
            "action": row.action,
            "reason": row.reason,
            "numbers": json.loads(row.numbers),
            "created_at": row.created_at,
            "undone_at": row.undone_at,
            "undone_by": row.undone_by,
            "state": row.state,
            "answer": row.answer,
        }
        for row in query
    ]


def rule_of_action(db: Database, action_id: int) -> int | None:
    """The id of the rule that took action `action_id` (None for no such action)."""
    row = RuleAction.get_or_none(RuleAction.id == action_id)
    return None if row is None else row.rule_id


def undo_action(
    db: Database, action_id: int, *, actor: Principal = CLI, sources: SourceAccess | None = None
) -> dict[str, Any]:
    """Put back what a rule's action changed; the rule will not act on it again. RuleError if it was
    undone already, or changed by someone since (their change stands); RuleSourceRefused if the source
    refused to take a zone back (nothing undone)."""
    found = RuleAction.get_or_none(RuleAction.id == action_id)
    if found is not None and found.action == PAUSE_AT_SOURCE:
        return _undo_at_source(db, found, actor, sources)
    with write_tx(db):
        row = RuleAction.get_or_none(RuleAction.id == action_id)
        if row is None:
            raise RuleNotFound(f"There is no rule action {action_id}.")
        if row.undone_at is not None:
            raise RuleConflict(f"Rule action {action_id} was undone already.")
        undo = json.loads(row.undo)
        if row.action == NOTIFY:
            pass  # It changed nothing: the undo only marks it (its rule still leaves it be).
        elif row.action in LABELS:
            label = Label.get_or_none(Label.id == undo["label_id"])
            if label is None or label.label != undo["label"]:
                raise RuleConflict(
                    f"The label rule action {action_id} set on {row.target!r} was changed or removed since; "
                    "nothing to undo."
                )
            record_change(
                db, actor, "label", label.id, "remove", {"value": label.value, "label": label.label}, None
            )
            label.delete_instance()
        else:
            for key, rows in undo.items():
                for row_id in rows:
                    current = (
                        Stream.get_or_none(Stream.id == int(row_id))
                        if key == "stream_status"
                        else (StreamOffer if key == "offer_weight" else StreamLander).get_or_none(
                            id=int(row_id)
                        )
                    )
                    paused = current is not None and (
                        current.status == "disabled" if key == "stream_status" else current.weight == 0
                    )
                    if not paused:
                        raise RuleConflict(
                            f"What rule action {action_id} paused was changed since; nothing to undo."
                        )
            _apply_pause(undo, undo=True)
            MetaStore(db.connection()).bump_config_version()
        row.undone_at, row.undone_by = int(time.time() * 1000), actor.name
        row.save()
    return {"id": row.id, "target": row.target, "action": row.action, "undone_by": actor.name}


def _undo_at_source(
    db: Database, row: RuleAction, actor: Principal, sources: SourceAccess | None
) -> dict[str, Any]:
    """Take the zone out of the exclusion lists the action added it to, then mark the action undone."""
    if row.undone_at is not None:
        raise RuleConflict(f"Rule action {row.id} was undone already.")
    if row.state != DONE:
        raise RuleConflict(f"Rule action {row.id} was {row.state}, not done: nothing to undo.")
    undo = json.loads(row.undo)
    answer = "nothing was added at the source"
    if undo["campaigns"]:
        if sources is None:
            raise RuleSourceRefused("This process cannot reach the traffic sources' APIs; nothing undone.")
        try:
            answer = include_zone(undo["connection_id"], undo["campaigns"], row.target, sources)
        except SourceRefused as exc:
            raise RuleSourceRefused(f"{exc} Nothing undone; try again.") from None
    with write_tx(db):
        current = RuleAction.get_by_id(row.id)
        if current.undone_at is not None:
            raise RuleConflict(f"Rule action {row.id} was undone already.")
        current.undone_at, current.undone_by = int(time.time() * 1000), actor.name
        current.answer = f"{current.answer} | undone: {answer}"[:4000]
        current.save()
    return {
        "id": row.id,
        "target": row.target,
        "action": row.action,
        "undone_by": actor.name,
        "answer": answer,
    }
