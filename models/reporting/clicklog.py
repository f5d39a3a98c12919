"""The click log: recent stored clicks with filters, for `lanner click list` (admin path, not the hot path).

Clicks LANNER_RAW_RETENTION (or `lanner prune`) deleted from the row store come from the columnar
history when one is given (models/reporting/historyclicks.py): those created before `pruned_before`,
less any the row store still has, merged into the page in the log's order. The history keeps no IP
address, user agent or full referrer: an old click shows none, and an IP filter reads the row store only.

The sorted log (`sorted_clicks`) on a node that keeps the history reads the clicks the history answers
for from it, as reports do, and only the rest from the row store (`_sorted_from_history`).

Date bounds are given in the user's timezone and converted to UTC milliseconds on the indexed
`created_at` column (never a function on the column), so a campaign's range uses
`click_campaign_created_at`; without a campaign the newest rows are read backwards by id.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from peewee import Database

from models.choices import SUB_ID_SLOTS
from models.errors import LannerError, NotFoundError
from models.ops.retention import pruned_before
from models.reporting.clickpath import describe_path, path_names, with_paths
from models.reporting.historyclicks import ClickHistory, answering_history
from models.reporting.logorder import LogOrder, SortedPage
from models.reporting.timerange import before, local_instant, localise_times, time_bounded, zone
from models.store.duckdb.connection import HISTORY_UNAVAILABLE
from models.store.history import queued_clicks
from models.store.logorder import spelling_for
from models.tables.click import Click

LOG_COLUMNS = (
    "subid",
    "created_at",
    "campaign_id",
    "stream_id",
    "offer_id",
    "ip",
    "country",
    "device_type",
    "os",
    "browser",
    "is_unique_campaign",
    "is_bot",
    "route",
    "lander_id",
    "lp_clicked_at",
)

# What `lanner click list` shows of a row: the log's columns and the decision path in words.
SHOWN_COLUMNS = (*(c for c in LOG_COLUMNS if c not in ("lander_id", "lp_clicked_at")), "path")


class ClickLogError(LannerError, ValueError):
    """A click log filter that cannot be used; one sentence for the user."""


@dataclass
class ClickFilter:
    campaign_id: int | None = None
    stream_id: int | None = None
    offer_id: int | None = None
    country: str | None = None
    is_bot: bool | None = None
    campaign_ids: tuple[int, ...] | None = None  # Only these campaigns' clicks (a user's visible ones).
    subid: str | None = None
    ip: str | None = None  # As stored: anonymised where the install anonymises (README, "Privacy").
    sub_id: tuple[int, str] | None = None  # (slot 1..30, value): clicks with sub_id_<slot> = value.
    since: str | None = None  # YYYY-MM-DD or YYYY-MM-DDTHH:MM, in `timezone`, inclusive.
    until: str | None = None  # Same, exclusive; a bare date means the end of that day.
    timezone: str = "UTC"
    limit: int = 50
    before_id: int | None = None  # Only clicks after this one in the log's order (the API's cursor).


def list_clicks(
    db: Database, query: ClickFilter, history: ClickHistory | None = None
) -> list[dict[str, Any]]:
    """The newest clicks matching `query`, newest first (with their `id`), `created_at` as ISO text in its
    timezone; with `history`, the pruned ones too."""
    tz = zone(query.timezone)
    cutoff = pruned_before(db.connection()) if history is not None and query.ip is None else None
    if query.campaign_ids is not None and query.campaign_id is None:
        # PERF: one read per campaign on click_campaign_created_at, merged here: `campaign_id IN (...)`
        # with a time range made SQLite sort every click of those campaigns in the range (285 ms for
        # 60,000 clicks) to keep the newest few; each campaign's newest `limit` cost about 0.3 ms.
        rows = []
        for campaign_id in sorted(query.campaign_ids):
            one = replace(query, campaign_id=campaign_id, campaign_ids=None)
            rows += _with_history(one, tz, _clicks(one, tz), history, cutoff)
        rows = sorted(rows, key=lambda row: (row["created_at"], row["id"]), reverse=True)[: query.limit]
    else:
        rows = _with_history(query, tz, _clicks(query, tz), history, cutoff)
    return with_paths(localise_times(rows, ("created_at",), tz))


def _with_history(
    query: ClickFilter, tz, rows: list[dict[str, Any]], history: ClickHistory | None, cutoff: int | None
) -> list[dict[str, Any]]:
    """The row store's page merged with the history's clicks created before the cutoff that the row store
    no longer has, in the log's order, `limit` rows."""
    if history is None or cutoff is None:
        return rows
    by_time = query.campaign_id is not None
    cursor: tuple[int, int] | int | None = query.before_id
    if by_time and query.before_id is not None:
        at = Click.select(Click.created_at).where(Click.id == query.before_id).scalar()
        if at is None:  # The cursor's click is an old one.
            at = (history.by_ids([query.before_id]).get(query.before_id) or {}).get("created_at")
        cursor = (at, query.before_id) if at is not None else None
    equal = _history_equal(query)
    # Twice the page: the few old clicks the row store still has (converted, or not yet deleted) drop out.
    old = history.log(
        equal,
        before_ms=cutoff,
        since_ms=local_instant(query.since, tz, is_end=False) if query.since else None,
        until_ms=local_instant(query.until, tz, is_end=True) if query.until else None,
        cursor=cursor,
        by_time=by_time,
        limit=2 * query.limit,
    )
    kept = {row["id"] for row in rows}
    still = Click.select(Click.id).where(Click.id.in_([r["id"] for r in old]))
    present = kept | {click.id for click in still}
    merged = rows + [
        {"id": click["id"], **{c: click.get(c, "") for c in LOG_COLUMNS}}
        for click in old
        if click["id"] not in present
    ]
    key = (lambda row: (row["created_at"], row["id"])) if by_time else (lambda row: row["id"])
    return sorted(merged, key=key, reverse=True)[: query.limit]


def _conditions(query: ClickFilter, *, is_tail: bool = False) -> list:
    """The row store's conditions for `query`'s filters (not its range, order or cursor). `is_tail`: for
    the clicks past the history's position, a range of the primary key the campaign index must not be
    chosen over."""
    conditions = []
    # PERF: `campaign_id + 0` is no indexed column: on the tail SQLite walked a buyer's campaigns' every
    # click by click_campaign_created_at (190 ms over 1.6 M clicks) to find the minute past the position.
    campaign = Click.campaign_id + 0 if is_tail else Click.campaign_id
    if query.campaign_id is not None:
        conditions.append(campaign == query.campaign_id)
    elif query.campaign_ids is not None:
        conditions.append(campaign.in_(sorted(query.campaign_ids)))
    if query.stream_id is not None:
        conditions.append(Click.stream_id == query.stream_id)
    if query.offer_id is not None:
        conditions.append(Click.offer_id == query.offer_id)
    if query.country is not None:
        conditions.append(
            Click.country == ("" if query.country.lower() == "unknown" else query.country.upper())
        )
    if query.is_bot is not None:
        conditions.append(Click.is_bot == int(query.is_bot))
    if query.subid is not None:
        conditions.append(Click.subid == query.subid)
    if query.ip is not None:
        conditions.append(Click.ip == query.ip)
    if query.sub_id is not None:
        slot, value = query.sub_id
        if not 1 <= slot <= SUB_ID_SLOTS:
            raise ClickLogError(f"A sub id slot is 1 to {SUB_ID_SLOTS}, not {slot}.")
        conditions.append(getattr(Click, f"sub_id_{slot}") == value)
    return conditions


def _clicks(query: ClickFilter, tz) -> list[dict[str, Any]]:
    """list_clicks' rows of one campaign or of all, `created_at` in UTC ms."""
    select = Click.select(Click.id, *(getattr(Click, column) for column in LOG_COLUMNS))
    for condition in _conditions(query):
        select = select.where(condition)
    if query.campaign_id is not None:
        # click_campaign_created_at, backwards; the id orders clicks of one millisecond.
        select = select.order_by(Click.created_at.desc(), Click.id.desc())
        if query.before_id is not None:
            select = select.where(before(Click, Click.created_at, query.before_id))
    else:
        # Ids grow with landing time: the newest, cheaply, backwards on the primary key. The IP and
        # sub id filters have no index (one more per click written is not worth a log's filter): a
        # rare value reads the table back to its first match (about 0.1 s per 400,000 clicks).
        select = select.order_by(Click.id.desc())
        if query.before_id is not None:
            select = select.where(Click.id < query.before_id)
    select = time_bounded(
        select, Click.created_at, since=query.since, until=query.until, tz=tz, limit=query.limit
    )
    return list(select.dicts())


# The click log's columns a user may sort by: the log's key -> (the stored column, whether it is text).
# Campaign, stream and offer hold ids and sort by their names (models/reporting/logorder.py).
SORT_COLUMNS = {
    "time": ("created_at", False),
    "subid": ("subid", True),
    "campaign": ("campaign_id", False),
    "stream": ("stream_id", False),
    "offer": ("offer_id", False),
    "ip": ("ip", True),
    "country": ("country", True),
    "device": ("device_type", True),
    "os": ("os", True),
    "browser": ("browser", True),
    "unique": ("is_unique_campaign", False),
    "bot": ("is_bot", False),
}


def sorted_clicks(
    db: Database, query: ClickFilter, order: LogOrder, history: ClickHistory | None = None
) -> SortedPage:
    """`query.limit` clicks matching `query` in `order` after its cursor, `created_at` as ISO text in its
    timezone. With a `history` this node keeps, the clicks it answers for come from it (a columnar top-N
    sort, ~tens of ms over millions of clicks) and only the rest from the row store, as reports read it;
    if it cannot answer (missing, damaged, locked, behind), or for the IP address it does not keep (a
    filter or a key), every click comes from the row store, with the pruned ones from the history merged
    in, and the page's `fallback` says why when the history was asked. Each source is read sorted and
    keyset-paged, so neither a page nor a CSV's chunk holds more than its own rows and each source's."""
    tz = zone(query.timezone)
    fallback = None
    needs_ip = query.ip is not None or any(key.column == "ip" for key in order.keys)
    if history is not None and history.answers and not needs_ip:
        try:
            return _sorted_from_history(db, query, tz, order, history)
        except HISTORY_UNAVAILABLE as error:
            fallback = str(error)
    rows = _sorted_rows(db, query, tz, order)
    cutoff = pruned_before(db.connection()) if history is not None and query.ip is None else None
    if history is not None and cutoff is not None:
        old = _sorted_history(query, tz, order, history, cutoff)
        rows = list(itertools.islice(heapq.merge(rows, old, key=order.merge_key), query.limit + 1))
    page = rows[: query.limit]
    cursor = order.key_of(page[-1]) if len(rows) > query.limit else None
    return SortedPage(with_paths(localise_times(page, ("created_at",), tz)), cursor, fallback)


def _sorted_rows(
    db: Database, query: ClickFilter, tz, order: LogOrder, *only, is_tail: bool = False
) -> list[dict[str, Any]]:
    """The row store's `query.limit + 1` clicks matching `query` (and the conditions `only`) in `order`
    after its cursor (`is_tail`: `only` is a range of ids past the history's position)."""
    select = Click.select(Click.id, *(getattr(Click, column) for column in LOG_COLUMNS))
    for condition in [*_conditions(query, is_tail=is_tail), *only]:
        select = select.where(condition)
    bytewise = spelling_for(db.connection()).bytewise
    after = order.after_condition(Click, bytewise)
    if after is not None:
        select = select.where(after)
    select = time_bounded(
        select.order_by(*order.order_by(Click, bytewise)),
        Click.created_at,
        since=query.since,
        until=query.until,
        tz=tz,
        limit=query.limit + 1,
    )
    return list(select.dicts())


# What the sorted log reads of a click the history answers for: the log's columns but the IP address
# (read from the row store for the page's rows).
HELD_COLUMNS = ("id", *(column for column in LOG_COLUMNS if column != "ip"))


def _sorted_from_history(
    db: Database, query: ClickFilter, tz, order: LogOrder, history: ClickHistory
) -> SortedPage:
    """sorted_clicks' page with the clicks the history answers for (ids up to the row store's position,
    not queued for a copy again) read from it, the rest (ids past the position, queued) from the row
    store, merged; the IP address of the page's clicks from the row store by id (a pruned one has none).
    HISTORY_UNAVAILABLE if the history cannot answer."""
    since_ms = local_instant(query.since, tz, is_end=False) if query.since else None
    limit = query.limit + 1
    with answering_history(history.files, db, since_ms=since_ms, wait=history.wait) as answering:
        held = answering.columnar.sorted_log(
            _history_equal(query),
            campaign_ids=None
            if query.campaign_id is not None or query.campaign_ids is None
            else sorted(query.campaign_ids),
            before_ms=None,
            since_ms=since_ms,
            until_ms=local_instant(query.until, tz, is_end=True) if query.until else None,
            keys=[
                (key.column, key.is_descending, None if key.ranks is None else dict(key.ranks))
                for key in order.keys
            ],
            after=None if order.after is None else list(order.after),
            limit=limit,
            up_to=answering.position,
            leave_out=answering.queued,
            columns=HELD_COLUMNS,
        )
        old = [dict(zip(HELD_COLUMNS, click, strict=True)) for click in held]
        # PERF: the tail past the position is a range of the primary key; the queued clicks are few.
        sources = [old, _sorted_rows(db, query, tz, order, Click.id > answering.position, is_tail=True)]
        if answering.queued:
            copied = Click.id <= answering.position  # A click past it, queued too, is in the tail.
            sources.append(_sorted_rows(db, query, tz, order, copied, Click.id.in_(queued_clicks())))
        rows = list(itertools.islice(heapq.merge(*sources, key=order.merge_key), limit))
        page = rows[: query.limit]
        missing = [row["id"] for row in page if "ip" not in row]
        ips: dict[int, str] = {}
        if missing:
            ips = dict(Click.select(Click.id, Click.ip).where(Click.id.in_(missing)).tuples().iterator())
    for row in page:
        if "ip" not in row:
            row["ip"] = ips.get(row["id"], "")
    cursor = order.key_of(page[-1]) if len(rows) > query.limit else None
    return SortedPage(with_paths(localise_times(page, ("created_at",), tz)), cursor)


def _history_equal(query: ClickFilter) -> dict[str, Any]:
    """The history's equality filters for `query` (its columns as the row store's)."""
    equal: dict[str, Any] = {
        column: value
        for column, value in (
            ("campaign_id", query.campaign_id),
            ("stream_id", query.stream_id),
            ("offer_id", query.offer_id),
            ("is_bot", None if query.is_bot is None else int(query.is_bot)),
            ("subid", query.subid),
        )
        if value is not None
    }
    if query.country is not None:
        equal["country"] = "" if query.country.lower() == "unknown" else query.country.upper()
    if query.sub_id is not None:
        equal[f"sub_id_{query.sub_id[0]}"] = query.sub_id[1]
    return equal


def _sorted_history(
    query: ClickFilter, tz, order: LogOrder, history: ClickHistory, cutoff: int
) -> Iterator[dict[str, Any]]:
    """The history's clicks created before the cutoff that the row store no longer has, in `order` after
    its cursor, read a page's worth at a time for as long as the merge takes them."""
    after = None if order.after is None else list(order.after)
    chunk = query.limit + 1
    keys = [
        (key.column, key.is_descending, None if key.ranks is None else dict(key.ranks)) for key in order.keys
    ]
    while True:
        old = history.sorted_log(
            _history_equal(query),
            campaign_ids=None
            if query.campaign_id is not None or query.campaign_ids is None
            else sorted(query.campaign_ids),
            before_ms=cutoff,
            since_ms=local_instant(query.since, tz, is_end=False) if query.since else None,
            until_ms=local_instant(query.until, tz, is_end=True) if query.until else None,
            keys=keys,
            after=after,
            limit=chunk,
        )
        rows = [{"id": click["id"], **{c: click.get(c, "") for c in LOG_COLUMNS}} for click in old]
        still = {c.id for c in Click.select(Click.id).where(Click.id.in_([row["id"] for row in rows]))}
        yield from (row for row in rows if row["id"] not in still)
        if len(old) < chunk:
            return
        after = order.key_of(rows[-1])


HISTORY_ONLY = (
    "in the columnar history only (LANNER_RAW_RETENTION): no IP address or user agent, the referrer's domain"
)


class StoredClickError(NotFoundError, LookupError):
    """No stored click with that subid; the message is one sentence for the user."""


def stored_click(
    db: Database,
    subid: str,
    *,
    geo_path: Path,
    geo_network_paths: tuple[Path, ...] = (),
    history: ClickHistory | None = None,
) -> dict[str, Any]:
    """A stored click with its decision path as it happened (models/reporting/clickpath.py) and, beside
    it, today's filters re-evaluated on its stored values, for `lanner click show` and the admin API:
    {"click": its row, "path": the path in words, "streams": the re-evaluated trace rows}. With
    `history`, a click the row store no longer has comes from it, with its path but no re-evaluation
    (the history keeps neither the IP address nor the user agent the filters read):
    {"click": its row, "path": ..., "streams": [], "kept": ...}."""
    from models.lookups.geo import GeoSource
    from models.routing.config import load_campaigns
    from models.routing.trace import stored_trace, trace_rows

    found = Click.select().where(Click.subid == subid).dicts().first()
    if found is None and history is not None:
        old = history.by_subid(subid)
        if old is not None:
            old["referrer"] = old.pop("referrer_domain")  # Only its domain was kept.
            path = describe_path(old, path_names([old]))
            return {"click": old, "path": path, "streams": [], "kept": HISTORY_ONLY}
    if found is None:
        raise StoredClickError(
            f"There is no stored click {subid!r} (clicks land within a second; see `lanner spool status`)."
        )
    if found.get("lander_id") is not None:  # The lander step: which lander, and when its LP click was.
        from models.tables.lander import Lander

        lander = Lander.get_or_none(Lander.id == found["lander_id"])
        found["lander_name"] = lander.name if lander else ""
        found["lp_clicked"] = (
            datetime.fromtimestamp(found["lp_clicked_at"] / 1000, UTC).isoformat(timespec="milliseconds")
            if found.get("lp_clicked_at") is not None
            else "not yet"
        )
    campaigns = {c.id: c for c in load_campaigns(db).values()}
    # Not stored with the click: looked up again (the network files, or a location file that has them).
    source = GeoSource(geo_path, geo_network_paths)
    network = source.lookup_network(found["ip"])
    source.close()
    return {
        "click": found,
        "path": describe_path(found, path_names([found])),
        "streams": trace_rows(stored_trace(found, campaigns, network)),
    }
