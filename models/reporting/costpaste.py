"""Many zone costs at once: a column of "zone<TAB or comma>amount" lines pasted out of a traffic source's
stats, for one campaign and one period, checked line by line (a preview) and then set together.

Each good line is one cost set (models/reporting/costs.py set_cost) narrowed to its zone, so a paste is
what the cost form would do zone by zone: the same paste applied twice gives the same costs, and a later
paste replaces an earlier one's zones where their periods overlap. The preview says, per line, what
applying would do: a `new` zone cost, one that `replaces` costs set before over some of the same clicks
(a zone's earlier spend, or its share of the campaign's), the `same` cost again, an `unknown` zone (no
clicks to spread over in the period) or a `bad` line with its reason. Applying sets every new, replacing
and same line in one transaction, so a paste is set whole or not at all; unknown and bad lines are
listed, never set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from peewee import Database

from models.accounts.principal import CLI, Principal
from models.errors import LannerError
from models.reporting.costs import (
    CostError,
    CostRequest,
    SpreadCost,
    check_amount,
    check_clicks,
    cost_entries,
    cost_request,
    cost_scope,
    set_cost,
)
from models.store.costs import CostStore
from models.store.database import write_tx

MAX_LINES = 2000  # A source's zone list for a period; past it the paste is refused whole, not cut.
MAX_ZONE = 500  # As a click's sub id value (models/reporting/costs.py MAX_FILTER_VALUE).
# An amount as stats pages print it: an optional currency sign, digits with "," or " " between thousands,
# and a "." or (with one or two digits after it) a "," before the cents.
AMOUNT = re.compile(r"^[$€£]?\s*(\d{1,3}(?:[, ]\d{3})+|\d+)(?:[.,](\d{1,6}))?\s*(?:[A-Za-z]{3})?$")
STATUSES = ("new", "replaces", "same", "unknown", "bad")
APPLIED = ("new", "replaces", "same")


class PasteError(LannerError, ValueError):
    """A paste refused whole (too many lines, nothing in it); one sentence for the user."""


@dataclass(frozen=True)
class PasteLine:
    """One line of a paste: its number (1-based), text, zone and amount as read, and what applying it
    would do (`status`, one of STATUSES) with `detail` (the reason for a bad or unknown line, the costs
    replaced); `clicks` it would be spread over; `request` the cost to set (applicable lines only)."""

    number: int
    text: str
    zone: str = ""
    amount: float | None = None
    status: str = "bad"
    detail: str = ""
    clicks: int = 0
    request: CostRequest | None = None

    @property
    def is_applied(self) -> bool:
        return self.status in APPLIED


def read_amount(text: str) -> float | None:
    """The amount a stats page printed (`12.5`, `$1,250.50`, `12,50`, `1 250.50 USD`), or None."""
    match = AMOUNT.match(text.strip())
    if match is None:
        return None
    whole, cents = match.group(1), match.group(2)
    digits = re.sub(r"[, ]", "", whole)
    if cents is not None and "," in whole and text.strip().count(",") > 1 and "." not in text:
        return None  # 1,250,50: thousands and cents both by comma.
    return float(f"{digits}.{cents}" if cents is not None else digits)


def split_line(text: str) -> tuple[str, str] | str:
    """(zone, amount text) of a line, or the reason it cannot be split. A tab splits first (a column
    copied out of a table), then a semicolon, then a comma: with a comma, the amount is what follows the
    first one (`zone,1,250.50` reads 1,250.50), as a zone holding a comma is pasted with a tab."""
    for separator in ("\t", ";", ","):
        if separator in text:
            zone, _, amount = text.partition(separator)
            if separator == "\t" and "\t" in amount:
                amount = amount.strip("\t")
                if "\t" in amount:
                    return "more than two columns; paste the zone and the amount only"
            return zone.strip(), amount.strip()
    return "no tab or comma between the zone and the amount"


def parse_paste(text: str) -> list[PasteLine]:
    """The paste's non-empty lines, each read (status `new`, to be checked against the clicks) or `bad`
    with its reason; PasteError past MAX_LINES or for a paste with no line at all."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise PasteError("Paste one zone and its amount a line, such as 4417<TAB>12.50.")
    if len(lines) > MAX_LINES:
        raise PasteError(
            f"A paste takes at most {MAX_LINES:,} lines, not {len(lines):,}; split it into periods or parts."
        )
    read: list[PasteLine] = []
    seen: dict[str, int] = {}
    for number, line in lines:
        shown = line.strip()[:200]
        # Spaces only: a leading tab is an empty zone column, not nothing.
        parts = split_line(line.strip(" \r"))
        if isinstance(parts, str):
            read.append(PasteLine(number, shown, detail=parts))
            continue
        zone, amount_text = parts
        amount = read_amount(amount_text)
        if not zone:
            read.append(PasteLine(number, shown, detail="no zone before the amount"))
        elif len(zone) > MAX_ZONE:
            read.append(PasteLine(number, shown, detail=f"a zone is at most {MAX_ZONE} characters"))
        elif amount is None:
            why = f"{amount_text[:40]!r} is not an amount such as 12.50" if amount_text else "no amount"
            read.append(PasteLine(number, shown, zone, detail=why))
        elif zone in seen:
            detail = f"zone {zone[:60]!r} is on line {seen[zone]} already; one amount a zone"
            read.append(PasteLine(number, shown, zone, amount, detail=detail))
        else:
            seen[zone] = number
            read.append(PasteLine(number, shown, zone, amount, status="new"))
    return read


@dataclass(frozen=True)
class PastePlan:
    """A paste checked for one campaign: its lines, the zone parameter and the period as given."""

    lines: list[PasteLine]
    parameter: str
    since: str
    until: str

    def count(self, status: str) -> int:
        return sum(1 for line in self.lines if line.status == status)

    @property
    def applied(self) -> list[PasteLine]:
        return [line for line in self.lines if line.is_applied]

    @property
    def total(self) -> float:
        return sum(line.amount or 0.0 for line in self.applied)


def plan_paste(
    db: Database,
    campaign,
    text: str,
    parameter: str,
    since: str,
    until: str,
    *,
    currency: str | None = None,
    timezone: str = "UTC",
    include_bots: bool = False,
    unique_only: bool = False,
) -> PastePlan:
    """Check each line of `text` as a cost for `campaign`'s clicks whose `parameter` (the traffic source's
    name for it, such as zoneid, or sub_id_N) is the line's zone, from `since` to `until` (local dates in
    `timezone`). CostError for a parameter, period or currency that no line could be set with (the
    form's fields, not a line's); PasteError for the paste itself."""
    lines = parse_paste(text)
    # The form's own fields first, on a stand-in zone: wrong there, every line would be wrong the same way.
    scope = cost_scope(db, campaign=campaign, sub_ids=[(parameter, "-")])
    period = cost_request(db, scope, since, until, 0.0, currency=currency, timezone=timezone)
    ((column, _),) = scope.filters
    # Only a set over the same zone, or over none (the campaign's or its source's), can cover a zone's clicks.
    wide: list[dict] = []
    by_zone: dict[str, list[dict]] = {}
    for entry in cost_entries(db, campaign_ids=[campaign.id]):
        if not entry["filters"]:
            wide.append(entry)
        elif column in entry["filters"]:
            by_zone.setdefault(entry["filters"][column], []).append(entry)
    zones = zone_clicks(db, period, [line.zone for line in lines if line.status != "bad"])
    checked = []
    for line in lines:
        if line.status == "bad":
            checked.append(line)
            continue
        assert line.amount is not None
        try:
            # PERF: the form's period, currency and timezone were checked once above (a request per
            # line read the campaign and the rate again: ~1 ms a line, 2,000 lines a paste); a line
            # brings its zone and amount.
            scope = cost_scope(db, campaign=campaign, sub_ids=[(parameter, line.zone)])
            check_amount(line.amount)
            request = replace(
                period, scope=scope, amount=line.amount, include_bots=include_bots, unique_only=unique_only
            )
        except CostError as exc:
            checked.append(replace(line, status="bad", detail=str(exc)))
            continue
        try:
            clicks = check_clicks(db, request, zones.get(line.zone, []))
        except CostError as exc:
            checked.append(replace(line, status="unknown", detail=str(exc)))
            continue
        status, detail = _against(request, campaign, [*by_zone.get(line.zone, []), *wide])
        checked.append(replace(line, status=status, detail=detail, clicks=clicks, request=request))
    return PastePlan(checked, parameter, since, until)


def zone_clicks(
    db: Database, period: CostRequest, zones: Iterable[str] | None = None
) -> dict[str, list[tuple]]:
    """The campaign's clicks in the period by their value of the zone's column, in one scan; with
    `zones`, those of these zones only.

    PERF: a scan per zone (what set_cost reads alone) walks the campaign's whole period each time, as the
    zone column has no index: 2,000 zones over 200,000 clicks would be 400 M rows read. And only the
    pasted zones' rows come back: a busy campaign's week is 400,000 clicks over 9,000 zones, and making
    a Python row of each took 0.5 s of a 200-line preview's 0.9 s (docs/PERFORMANCE.md)."""
    ((column, _),) = period.scope.filters
    return CostStore(db.connection()).scope_clicks_by(
        period.scope.campaign_ids[0],
        period.start_ms,
        period.end_ms,
        column,
        None if zones is None else set(zones),
    )


def _against(request: CostRequest, campaign, entries: Iterable[dict]) -> tuple[str, str]:
    """Whether a line's cost is new, replaces costs set before over some of its clicks, or is the same
    set again; with what it replaces."""
    filters = dict(request.scope.filters)
    replaced = []
    for entry in entries:
        if not (entry["start_at"] < request.end_ms and entry["end_at"] > request.start_ms):
            continue
        if not set(entry["filters"].items()) <= set(filters.items()):
            continue  # Another zone's (or narrower): none of this zone's clicks.
        is_same = (
            entry["filters"] == filters
            and entry["campaign_id"] == campaign.id
            and (entry["start_at"], entry["end_at"]) == (request.start_ms, request.end_ms)
            and (entry["amount"], entry["currency"]) == (request.amount, request.currency)
            and bool(entry["is_bots_included"]) == request.include_bots
            and bool(entry["is_unique_only"]) == request.unique_only
        )
        if is_same:
            return "same", "the same cost is set already; setting it again changes nothing"
        what = "this zone's" if entry["filters"] == filters else f"its share of {_scope_of(entry, campaign)}"
        replaced.append(
            f"{what} {entry['amount']:,.2f} {entry['currency']} of {entry['since']} – {entry['until']}"
        )
    if replaced:
        return "replaces", "; ".join(replaced)
    return "new", ""


def _scope_of(entry: dict, campaign) -> str:
    if entry["campaign_id"] is None:
        return "the traffic source's"
    label = entry.get("label")
    return f"the campaign's {label}" if label else "the campaign's"


def apply_paste(
    db: Database, plan: PastePlan, *, actor: Principal = CLI
) -> list[tuple[PasteLine, SpreadCost]]:
    """Set every applicable line's cost, all in one transaction: if any cannot be set (its clicks pruned
    since the preview), none is. Each is recorded and audited as a cost set of its own.

    PERF: one transaction holds SQLite's write lock for the whole paste, so the spool flusher waits for
    it; MAX_LINES zones of one campaign's period is a few seconds at most, as one large cost set is."""
    done: list[tuple[PasteLine, SpreadCost]] = []
    with write_tx(db):
        zones: dict[str, list[tuple]] = {}
        earlier: dict[str, list[dict]] = {}
        for line in plan.applied:
            assert line.request is not None
            if not done:  # Read again inside the transaction: the clicks and costs as they are set.
                pasted = [applied.zone for applied in plan.applied]
                zones, earlier = zone_clicks(db, line.request, pasted), zone_entries(db, line.request)
            # One chunk per zone: the outer transaction already makes the paste one write.
            spread = set_cost(
                db,
                line.request,
                actor=actor,
                chunk_size=1 << 30,
                rows=zones.get(line.zone, []),
                earlier=earlier.get(line.zone, []),
            )
            done.append((line, spread))
    return done


def zone_entries(db: Database, period: CostRequest) -> dict[str, list[dict]]:
    """The cost sets recorded within the period narrowed to a value of the zone's column, by that value:
    the only ones a zone's set may cover (a wider one keeps the rest of its clicks)."""
    ((column, _),) = period.scope.filters
    by_zone: dict[str, list[dict]] = {}
    for entry in CostStore(db.connection()).entries(period.start_ms, period.end_ms):
        zone = json.loads(entry["filters"] or "{}").get(column)
        if zone is not None:
            by_zone.setdefault(zone, []).append(entry)
    return by_zone
