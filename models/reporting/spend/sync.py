"""A spend connection's sync: read the last days' spend from the platform, map each row onto a Lanner
campaign (and the click parameter holding its ad or zone id), and write it as cost sets the reports
read, replacing what this connection wrote before for those days.

Idempotent by construction. Each (campaign, parameter value, day) is one cost set of the connection
(`cost_entry.spend_connection_id`); a run compares what the platform says with the sets it wrote:
  - the same amount, currency and clicks again: nothing is written (`unchanged`);
  - a new or different amount: the day's clicks of that scope get it, spread as `lanner cost set` would,
    and the connection's earlier set for the scope is replaced (`written`);
  - a set the platform no longer reports (or whose id is no longer mapped): its clicks' costs go back
    to 0 and the set is dropped (`removed`).
Only the connection's own sets are compared and dropped: a cost typed by hand keeps its entry, and its
clicks outside the synced scopes keep their costs (a click holds one cost: a synced zone's clicks hold
the synced one, as after any later `lanner cost set`).

The whole report is read before anything is written: a platform that fails, refuses or answers garbage
on any page leaves every cost as it was; the error is the run's one sentence in the sync log and the
next run reads the window again. A row whose ids map to no campaign or whose zone has no clicks that day
is skipped and counted in the run's note. A row in a currency with no exchange rate is written all the
same, its clicks' costs waiting in that currency for a rate (models/reporting/clickcosts.py), and the
note counts it. Each (campaign, day) is written
in one transaction, reading its clicks by zone in one scan (PERF: as a cost paste does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import Principal
from models.admin.errors import AdminConflict
from models.reporting.costs import (
    MAX_AMOUNT,
    CostError,
    CostRequest,
    CostScope,
    check_clicks,
    cost_scope,
    set_costs_together,
    spread_cost,
)
from models.reporting.currency import rate_of, report_currency
from models.reporting.spend import meta, propellerads, tiktok
from models.reporting.spend.fetch import Get, SpendError, SpendRow, http_get
from models.reporting.timerange import local_instant, zone
from models.store.costs import CostStore
from models.store.database import write_tx
from models.tables.campaign import Campaign
from models.tables.spend import SpendConnection, SpendMapping, SpendSync

CLIENTS: dict[str, ModuleType] = {"meta": meta, "propellerads": propellerads, "tiktok": tiktok}
RUNNING_FOR_MS = 3_600_000  # A run still `running` after this died with its process: another may start.
MAX_NAMED = 5  # Unmapped ids named in a run's note.


@dataclass(frozen=True)
class SpendConfig:
    """What a sync needs from the settings: each platform's base URL and the window re-read each run."""

    urls: Mapping[str, str]
    window_days: int = 5
    get: Get = http_get

    @classmethod
    def from_settings(cls, settings) -> SpendConfig:
        urls = {
            "meta": settings.meta_api_url,
            "tiktok": settings.tiktok_api_url,
            "propellerads": settings.propellerads_api_url,
        }
        return cls(urls, settings.spend_window_days)


@dataclass
class SyncCounts:
    rows: int = 0
    written: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    unmapped: dict[str, float] = field(default_factory=dict)  # The platform's campaign id -> spend.
    reasons: dict[str, int] = field(default_factory=dict)  # Why rows of mapped campaigns were skipped.
    waiting: dict[str, int] = field(default_factory=dict)  # Currency -> rows written waiting for its rate.

    def skip(self, reason: str, rows: int) -> None:
        self.skipped += rows
        self.reasons[reason] = self.reasons.get(reason, 0) + rows

    def note(self) -> str:
        """The skipped rows in one sentence ('' if none)."""
        parts = []
        if self.unmapped:
            count = self.skipped - sum(self.reasons.values())
            ids = sorted(self.unmapped, key=lambda i: -self.unmapped[i])
            named = ", ".join(ids[:MAX_NAMED]) + (" …" if len(ids) > MAX_NAMED else "")
            parts.append(
                f"{_rows(count)} ({sum(self.unmapped.values()):,.2f} of spend) of campaigns mapped to none "
                f"of Lanner's ({named})"
            )
        parts.extend(f"{_rows(n)} {reason}" for reason, n in sorted(self.reasons.items()))
        said = ("Skipped " + "; ".join(parts) + ".") if parts else ""
        if self.waiting:
            waiting = "; ".join(f"{_rows(n)} in {code}" for code, n in sorted(self.waiting.items()))
            said += (" " if said else "") + (
                f"Written waiting for an exchange rate, their cost left out of reports until one is set: "
                f"{waiting}."
            )
        return said


def _rows(count: int) -> str:
    return f"{count:,} row" + ("" if count == 1 else "s")


@dataclass(frozen=True)
class Target:
    """The spend of one scope on one day: a campaign, the parameter's column and value (or none)."""

    campaign_id: int
    column: str
    value: str
    day: str


class SyncRefused(AdminConflict):
    """A run that cannot start (a connection paused or removed, another run of it going)."""


def window(timezone: str, days: int, now: float) -> tuple[str, str]:
    """(since, until): the last `days` days of the connection's timezone, today included."""
    today = datetime.fromtimestamp(now, zone(timezone)).date()
    return (today - timedelta(days=days - 1)).isoformat(), today.isoformat()


def sync_connection(
    db: Database,
    connection_id: int,
    config: SpendConfig,
    *,
    actor: Principal,
    clock=time.time,
) -> SpendSync:
    """One run for the connection: its log row, `done` or `failed` with the error sentence."""
    now_ms = int(clock() * 1000)
    with write_tx(db):
        connection = SpendConnection.get_by_id(connection_id)
        check_may_sync(connection, now_ms)
        since, until = window(connection.timezone, config.window_days, now_ms / 1000)
        log = SpendSync.create(connection_id=connection_id, started_at=now_ms, since=since, until=until)
    counts = SyncCounts()
    try:
        client = CLIENTS[connection.platform]
        rows = client.fetch(
            json.loads(connection.credentials), since, until, config.urls[connection.platform], config.get
        )
        counts.rows = len(rows)
        apply_rows(db, connection, rows, since, until, counts)
    except SpendError as exc:
        wait = ""
        if exc.retry_after:
            until = datetime.fromtimestamp(clock() + exc.retry_after, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            wait = f" It asked to wait {exc.retry_after:.0f} s; the periodic sync waits until {until}."
        return _finish(db, log, counts, "failed", str(exc) + wait, clock, exc.retry_after)
    except BaseException:
        _finish(
            db, log, counts, "failed", "The sync stopped on an internal error; see the worker's log.", clock
        )
        raise
    done = _finish(db, log, counts, "done", "", clock)
    with write_tx(db):
        record_change(
            db,
            actor,
            "spend_connection",
            connection.id,
            "sync",
            None,
            {k: getattr(done, k) for k in ("since", "until", "rows", "written", "removed", "skipped")},
        )
    return done


def check_may_sync(connection: SpendConnection, now_ms: int) -> None:
    """SyncRefused if the connection is not active or a run of it is under way."""
    if connection.status != "active":
        raise SyncRefused(
            f"The spend connection {connection.name!r} is {connection.status}: resume it first."
        )
    running = (
        SpendSync.select()
        .where(
            (SpendSync.connection_id == connection.id)
            & (SpendSync.state == "running")
            & (SpendSync.started_at > now_ms - RUNNING_FOR_MS)
        )
        .first()
    )
    if running is not None:
        raise SyncRefused(f"A sync of {connection.name!r} is running already; its log shows when it ends.")


def _finish(
    db: Database,
    log: SpendSync,
    counts: SyncCounts,
    state: str,
    error: str,
    clock,
    retry_after: float | None = None,
) -> SpendSync:
    """Close the run's log row; the connection waits out the platform's Retry-After (`retry_after`
    seconds from now) before its next periodic run, or waits no more (any other end)."""
    now_ms = int(clock() * 1000)
    log.state, log.error, log.finished_at = state, error, now_ms
    log.rows, log.written, log.unchanged = counts.rows, counts.written, counts.unchanged
    log.removed, log.skipped, log.note = counts.removed, counts.skipped, counts.note()
    retry_at = now_ms + int(retry_after * 1000) if retry_after else None
    with write_tx(db):
        log.save()
        SpendConnection.update(retry_after_at=retry_at).where(
            SpendConnection.id == log.connection_id
        ).execute()
    return log


def apply_rows(
    db: Database,
    connection: SpendConnection,
    rows: list[SpendRow],
    since: str,
    until: str,
    counts: SyncCounts,
) -> None:
    """Write the rows of the window [since, until] as the connection's cost sets (the module's rules)."""
    query = SpendMapping.select(SpendMapping.external_id, SpendMapping.campaign_id).where(
        SpendMapping.connection_id == connection.id
    )
    mapping: dict[str, int] = dict(query.tuples())  # type: ignore[arg-type]  # peewee's stubs.
    campaigns = {c.id: c for c in Campaign.select().where(Campaign.id.in_(list(set(mapping.values()))))}
    columns: dict[int, str] = {}  # Campaign -> the click column of the connection's parameter.
    targets: dict[Target, list] = {}  # -> [amount, currency, rows]
    for row in rows:
        campaign_id = next((mapping[i] for i in row.ids if i in mapping), None)
        if campaign_id is None or campaign_id not in campaigns:
            counts.skipped += 1
            campaign = row.ids[-1]
            counts.unmapped[campaign] = counts.unmapped.get(campaign, 0.0) + row.spend
            continue
        if not since <= row.day <= until:
            counts.skip("of days outside the window asked for", 1)
            continue
        column = ""
        if connection.parameter:
            if campaign_id not in columns:
                try:
                    scope = cost_scope(
                        db, campaign=campaigns[campaign_id], sub_ids=[(connection.parameter, "-")]
                    )
                    columns[campaign_id] = scope.filters[0][0]
                except CostError:
                    columns[campaign_id] = ""
            column = columns[campaign_id]
            if not column:
                counts.skip(f"of campaigns whose traffic source has no parameter {connection.parameter!r}", 1)
                continue
        target = Target(campaign_id, column, row.detail if column else "", row.day)
        currency = row.currency or connection.currency
        if target not in targets:
            targets[target] = [0.0, currency, 0]
        total = targets[target]
        if total[2] < 0 or total[1] != currency:  # Summed in two currencies, it would be neither.
            counts.skip("of one ad or zone and day in two currencies", 1 if total[2] < 0 else total[2] + 1)
            total[2] = -1
            continue
        total[0] += row.spend
        total[2] += 1
    tz = zone(connection.timezone)
    store = CostStore(db.connection())
    start_ms = local_instant(since, tz, is_end=False)
    end_ms = local_instant(until, tz, is_end=True)
    earlier: dict[tuple, list[dict]] = {}
    for entry in store.spend_entries(connection.id, start_ms, end_ms):
        filters = json.loads(entry["filters"] or "{}")
        column, value = next(iter(filters.items())) if filters else ("", "")
        earlier.setdefault((entry["campaign_id"], column, value, entry["since"]), []).append(entry)
    rates = Rates(db)
    by_day: dict[tuple[int, str, str], list[Target]] = {}
    for target, (_, _, n) in targets.items():
        if n > 0:
            by_day.setdefault((target.campaign_id, target.column, target.day), []).append(target)
    for (campaign_id, column, day), group in sorted(by_day.items()):
        _write_day(
            db, connection, campaigns[campaign_id], column, day, group, targets, earlier, counts, rates
        )
    reported = {(t.campaign_id, t.column, t.value, t.day) for t in targets}
    for key, entries in earlier.items():
        if key not in reported:
            _clear(db, entries, tz)
            counts.removed += 1


def _write_day(
    db: Database,
    connection: SpendConnection,
    campaign,
    column: str,
    day: str,
    group: list[Target],
    targets: dict[Target, list],
    earlier: dict[tuple, list[dict]],
    counts: SyncCounts,
    rates: Rates,
) -> None:
    """One campaign's day: its clicks by the parameter's value read in one scan, each target compared with
    the set written before, the changed ones set together in one transaction."""
    store = CostStore(db.connection())
    actor = Principal(None, f"spend:{connection.name}", "admin", True, False)
    tz = zone(connection.timezone)
    start_ms, end_ms = local_instant(day, tz, is_end=False), local_instant(day, tz, is_end=True)
    with write_tx(db):
        # PERF: one scan of the day by the parameter's value; a scan per zone walks the whole day each time.
        if column:
            clicks = store.scope_clicks_by(campaign.id, start_ms, end_ms, column)
        else:
            clicks = {"": store.scope_clicks(campaign.id, start_ms, end_ms)}
        items = []
        for target in group:
            amount, currency, n = targets[target]
            amount, currency = round(amount, 6), currency or campaign.cost_currency
            key = (campaign.id, target.column, target.value, day)
            rows = clicks.get(target.value, [])
            old = earlier.get(key, [])
            if (
                len(old) == 1
                and (old[0]["amount"], old[0]["currency"]) == (amount, currency)
                and old[0]["clicks"] + old[0]["unpaid_clicks"] == len(rows)
            ):
                counts.unchanged += 1
                continue
            # The scope and request as cost_scope and cost_request make them, without their lookups per zone.
            filters = ((column, target.value),) if column else ()
            label = f"{connection.parameter}={target.value}" if column else ""
            scope = CostScope((campaign.id,), campaign.id, None, "", filters, label)
            request = CostRequest(scope, day, day, connection.timezone, start_ms, end_ms, amount, currency)
            try:
                if not 0 <= amount <= MAX_AMOUNT:
                    raise CostError(f"The amount must be a number from 0 to {MAX_AMOUNT:,.0f}.")
                check_clicks(db, request, rows)
            except CostError as exc:
                counts.skip(_reason(str(exc), column), n)
                continue
            if not rates.has(currency):
                counts.waiting[currency] = counts.waiting.get(currency, 0) + n
            items.append((request, rows, old))
            earlier.pop(key, None)
        set_costs_together(db, items, actor=actor, spend_connection_id=connection.id)
        counts.written += len(items)


class Rates:
    """Whether a currency has a rate into the report currency, looked up once a run."""

    def __init__(self, db: Database) -> None:
        self.conn = db.connection()
        self.report = report_currency(self.conn)
        self.known: dict[str, bool] = {self.report: True}

    def has(self, currency: str) -> bool:
        if currency not in self.known:
            self.known[currency] = rate_of(self.conn, currency, self.report) is not None
        return self.known[currency]


def _reason(message: str, column: str) -> str:
    """A CostError's sentence as the note's reason for skipping rows (they repeat: counted, not listed)."""
    if "no clicks" in message or "are bots" in message:
        what = "with their ad or zone id" if column else ""
        return f"with no clicks {what} in Lanner that day".replace("  ", " ")
    return "refused: " + message.rstrip(".")


def _clear(db: Database, entries: list[dict], tz) -> None:
    """Give the clicks of the connection's sets no cost again and drop the sets: the platform reports no
    spend for them any more (or their id is no longer mapped)."""
    store = CostStore(db.connection())
    with write_tx(db):
        entry = entries[0]
        filters = json.loads(entry["filters"] or "{}")
        where = next(iter(filters.items())) if filters else None
        try:
            spread_cost(db, entry["campaign_id"], entry["start_at"], entry["end_at"], 0.0, where=where)
        except CostError:
            pass  # Its clicks are gone (pruned): nothing holds its cost any more.
        store.drop_entries([e["id"] for e in entries])
