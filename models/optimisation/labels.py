"""Labels: values of a sub_id slot (a zone, a site, a placement) marked whitelisted or blacklisted, per
campaign or for every campaign of a traffic source, and exported in the lists ad networks take.

A label names its slot by the traffic source's parameter name (`zoneid`) or by the slot (`sub_id_3`);
the slot is what reports group by, so a source's name is resolved once, when the label is set. A
campaign's own label of a value wins over its source's. Reports group and filter by label
(models/reporting/reports.py, through `label_lookup`); rules set labels (models/optimisation/rules.py).
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.choices import SUB_ID_SLOTS
from models.errors import LannerError, NotFoundError
from models.routing.sources import loads, slot_of
from models.store.database import write_tx
from models.tables.campaign import Campaign
from models.tables.optimisation import Label
from models.tables.source import TrafficSource

LABELS = ("whitelist", "blacklist")
NO_LABEL = "none"  # The label filter's word for values with no label (their label column is "").
EXPORT_FORMATS = ("plain", "comma", "csv")
MAX_VALUE = 500  # As long as a click keeps a sub_id value (routes/click.py).
MAX_VALUES = 10_000  # In one call: a whole zone list, not a whole database.
_SLOT = re.compile(r"sub_id_([0-9]{1,2})")
# A list an ad network takes is one value a line or comma-separated: a value with either is no zone id.
_UNLISTABLE = re.compile(r"[,\x00-\x1f\x7f]")


class LabelError(LannerError, ValueError):
    """A label that cannot be set, removed or exported; one sentence for the user."""


class LabelNotFound(LabelError, NotFoundError):
    """A value with no label to remove."""


@dataclass(frozen=True)
class LabelScope:
    scope: str  # campaign, source
    scope_id: int
    name: str  # The campaign's alias or the source's name, for messages.
    slot: int
    parameter: str  # As given: zoneid, or sub_id_3.

    @property
    def slot_name(self) -> str:
        return f"sub_id_{self.slot}"


def parse_slot(name: str) -> int | None:
    """N for `sub_id_N` (1..SUB_ID_SLOTS), None for any other name."""
    match = _SLOT.fullmatch(name)
    if match and 1 <= int(match.group(1)) <= SUB_ID_SLOTS:
        return int(match.group(1))
    return None


def _source_slots(source_id: int | None) -> dict[str, int]:
    source = TrafficSource.get_or_none(TrafficSource.id == source_id) if source_id else None
    return slot_of(loads(source.parameters)) if source is not None else {}


def label_scope(
    *, campaign: Campaign | None = None, source: TrafficSource | None = None, parameter: str
) -> LabelScope:
    """Whose values `parameter` names: a campaign's (its source's names apply) or a traffic source's."""
    if (campaign is None) == (source is None):
        raise LabelError("Give a campaign or a traffic source (one of them).")
    parameter = parameter.strip()
    slot = parse_slot(parameter)
    if campaign is not None:
        scope, scope_id, name, source_id = "campaign", campaign.id, campaign.alias, campaign.source_id
    else:
        assert source is not None
        scope, scope_id, name, source_id = "source", source.id, source.name, source.id
    if slot is None:
        slot = _source_slots(source_id).get(parameter)
    if slot is None:
        raise LabelError(
            f"{parameter!r} is no parameter of {scope} {name!r}'s traffic source; name one of its "
            f"parameters (zoneid ...) or sub_id_1 to sub_id_{SUB_ID_SLOTS}."
        )
    return LabelScope(scope, scope_id, name, slot, parameter)


def scope_of(db: Database, campaign_ref: str | None, source_ref: str | None, parameter: str) -> LabelScope:
    """label_scope for a campaign's id or alias, or a traffic source's id or name."""
    from models.admin.rows import get_campaign
    from models.admin.sources import get_source

    if (campaign_ref is None) == (source_ref is None):
        raise LabelError("Give a campaign or a traffic source (one of them).")
    if campaign_ref is not None:
        return label_scope(campaign=get_campaign(db, campaign_ref), parameter=parameter)
    assert source_ref is not None
    return label_scope(source=get_source(db, source_ref), parameter=parameter)


def _check_values(values: Iterable[str]) -> list[str]:
    checked = list(dict.fromkeys(value.strip() for value in values))
    if not checked or checked == [""]:
        raise LabelError("Give at least one value to label.")
    if len(checked) > MAX_VALUES:
        raise LabelError(f"Label at most {MAX_VALUES:,} values at once, not {len(checked):,}.")
    for value in checked:
        if not value:
            raise LabelError("An empty value cannot be labelled.")
        if len(value) > MAX_VALUE:
            raise LabelError(f"A value is at most {MAX_VALUE} characters (a click keeps no more).")
        if _UNLISTABLE.search(value):
            raise LabelError(
                f"{value[:40]!r} holds a comma or a control character, which no list a source takes can "
                "carry; it cannot be labelled."
            )
    return checked


def _check_label(label: str) -> str:
    if label not in LABELS:
        raise LabelError(f"A label is {' or '.join(LABELS)}, not {label[:40]!r}.")
    return label


def _where(scope: LabelScope):
    return (Label.scope == scope.scope) & (Label.scope_id == scope.scope_id) & (Label.slot == scope.slot)


def set_labels(
    db: Database,
    scope: LabelScope,
    values: Iterable[str],
    label: str,
    *,
    actor: Principal = CLI,
    rule_id: int | None = None,
) -> int:
    """Mark `values` with `label` in `scope` (a value labelled otherwise is relabelled); the number of
    values whose label changed."""
    _check_label(label)
    checked = _check_values(values)
    now = int(time.time() * 1000)
    changed = 0
    with write_tx(db):
        existing = {row.value: row for row in Label.select().where(_where(scope) & Label.value.in_(checked))}
        for value in checked:
            row = existing.get(value)
            if row is not None and row.label == label:
                continue
            if row is None:
                row = Label.create(
                    scope=scope.scope,
                    scope_id=scope.scope_id,
                    slot=scope.slot,
                    parameter=scope.parameter,
                    value=value,
                    label=label,
                    rule_id=rule_id,
                    actor=actor.name,
                    created_at=now,
                    updated_at=now,
                )
                before = None
            else:
                before = _snapshot(row)
                row.label, row.rule_id, row.actor, row.updated_at = label, rule_id, actor.name, now
                row.save()
            record_change(
                db, actor, "label", row.id, "create" if before is None else "update", before, _snapshot(row)
            )
            changed += 1
    return changed


def remove_labels(db: Database, scope: LabelScope, values: Iterable[str], *, actor: Principal = CLI) -> int:
    """Take the labels off `values` in `scope`; LabelNotFound if none of them had one."""
    checked = _check_values(values)
    with write_tx(db):
        rows = list(Label.select().where(_where(scope) & Label.value.in_(checked)))
        if not rows:
            raise LabelNotFound(f"None of these values has a label in {scope.scope} {scope.name!r}.")
        for row in rows:
            record_change(db, actor, "label", row.id, "remove", _snapshot(row), None)
        Label.delete().where(Label.id.in_([row.id for row in rows])).execute()
    return len(rows)


def _snapshot(row: Label) -> dict[str, Any]:
    return {
        "scope": row.scope,
        "scope_id": row.scope_id,
        "slot": row.slot,
        "value": row.value,
        "label": row.label,
        "rule_id": row.rule_id,
    }


def list_labels(
    db: Database,
    *,
    scope: LabelScope | None = None,
    campaign_ids: Iterable[int] | None = None,
    label: str | None = None,
) -> list[dict[str, Any]]:
    """Labels, by scope, parameter and value; `scope` narrows to one campaign's or source's slot,
    `campaign_ids` to those campaigns' own labels and their sources'."""
    query = Label.select()
    if scope is not None:
        query = query.where(_where(scope))
    if campaign_ids is not None:
        ids = list(campaign_ids)
        sources = {c.source_id for c in Campaign.select(Campaign.source_id).where(Campaign.id.in_(ids))}
        sources.discard(None)
        query = query.where(
            ((Label.scope == "campaign") & Label.scope_id.in_(ids or [-1]))
            | ((Label.scope == "source") & Label.scope_id.in_(list(sources) or [-1]))
        )
    if label is not None:
        query = query.where(Label.label == _check_label(label))
    names = {
        "campaign": {c.id: c.alias for c in Campaign.select(Campaign.id, Campaign.alias)},
        "source": {s.id: s.name for s in TrafficSource.select(TrafficSource.id, TrafficSource.name)},
    }
    rows = sorted(query, key=lambda r: (r.scope, r.scope_id, r.slot, r.value))
    return [
        {
            "id": row.id,
            "scope": row.scope,
            "scope_id": row.scope_id,
            "scope_name": names[row.scope].get(row.scope_id, ""),
            "parameter": row.parameter,
            "slot": f"sub_id_{row.slot}",
            "value": row.value,
            "label": row.label,
            "rule_id": row.rule_id,
            "updated_at": row.updated_at,
        }
        for row in rows
    ]


def export_labels(db: Database, scope: LabelScope, label: str, fmt: str) -> str:
    """The values labelled `label` in `scope` as a source takes them: `plain` one a line, `comma` one
    line of comma-separated values, `csv` with a header (value,label,parameter)."""
    if fmt not in EXPORT_FORMATS:
        raise LabelError(f"Export as {', '.join(EXPORT_FORMATS)}, not {fmt[:20]!r}.")
    values = [
        row.value
        for row in Label.select(Label.value)
        .where(_where(scope) & (Label.label == _check_label(label)))
        .order_by(Label.value)
    ]
    if fmt == "plain":
        return "".join(f"{value}\n" for value in values)
    if fmt == "comma":
        return ",".join(values) + "\n" if values else ""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["value", "label", scope.parameter])
    for value in values:
        writer.writerow([value, label, scope.parameter])
    return out.getvalue()


def label_lookup(slot: int, campaign_sources: dict[int, int | None]) -> Callable[[int, str], str]:
    """(campaign id, value of sub_id_`slot`) -> its label, "" for none: the campaign's own, else its
    traffic source's. `campaign_sources`: campaign id -> its source's id. Reads every label of the slot
    once (PERF: a report of 50,000 zones asks 50,000 times)."""
    own: dict[tuple[int, str], str] = {}
    by_source: dict[tuple[int, str], str] = {}
    for row in Label.select(Label.scope, Label.scope_id, Label.value, Label.label).where(Label.slot == slot):
        (own if row.scope == "campaign" else by_source)[(row.scope_id, row.value)] = row.label
    if not own and not by_source:
        return lambda campaign_id, value: ""

    def lookup(campaign_id: int, value: str) -> str:
        found = own.get((campaign_id, value))
        if found is None:
            source_id = campaign_sources.get(campaign_id)
            found = by_source.get((source_id, value), "") if source_id else ""
        return found

    return lookup
