"""The conversion log, the postback log, refused postbacks and the outbound delivery log, for the CLI.

Times are shown in the user's timezone; date bounds become UTC milliseconds on indexed columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.conversions.postbacks import PARKED
from models.reporting.logorder import LogOrder, OrderKey, SortedPage, sorted_page
from models.reporting.timerange import before, localise_times, time_bounded, zone
from models.tables.conversion import Conversion, PostbackDelivery, PostbackLog, PostbackRefusal

CONVERSION_COLUMNS = (
    "id",
    "created_at",
    "subid",
    "tid",
    "status",
    "original_status",
    "previous_status",
    "raw_status",
    "payout",
    "currency",
    "report_payout",
    "cost",
    "campaign_id",
    "stream_id",
    "offer_id",
    "network",
)
POSTBACK_COLUMNS = (
    "id",
    "received_at",
    "verdict",
    "subid",
    "tid",
    "raw_status",
    "remote_ip",
    "detail",
    "request",
)
REFUSAL_COLUMNS = ("day", "remote_ip", "refusals", "first_at", "last_at", "sample")
DELIVERY_COLUMNS = (
    "id",
    "created_at",
    "conversion_id",
    "target_id",
    "connection_id",  # An ad platform connection's event (models/conversions/platforms/) instead.
    "status",
    "state",
    "attempts",
    "response_code",
    "error",
    "url",
)


@dataclass
class LogFilter:
    campaign_id: int | None = None
    campaign_ids: tuple[int, ...] | None = None  # Only these campaigns' rows (a user's visible ones).
    subid: str | None = None
    status: str | None = None  # A conversion status, a postback verdict or a delivery state.
    since: str | None = None
    until: str | None = None
    timezone: str = "UTC"
    limit: int = 50
    before_id: int | None = None  # Only rows after this one in the log's order (the API's cursor).


def _conversions(query: LogFilter):
    """The conversions `query`'s filters select (not its range, order or cursor)."""
    select = Conversion.select(*(getattr(Conversion, c) for c in CONVERSION_COLUMNS))
    if query.campaign_id is not None:
        select = select.where(Conversion.campaign_id == query.campaign_id)
    if query.campaign_ids is not None:
        select = select.where(Conversion.campaign_id.in_(sorted(query.campaign_ids)))
    if query.subid:
        select = select.where(Conversion.subid == query.subid)
    if query.status:
        select = select.where(Conversion.status == query.status.lower())
    return select


def sorted_conversions(db: Database, query: LogFilter, order: LogOrder) -> SortedPage:
    """A page of the conversions `query` selects in `order` (models/reporting/logorder.py)."""
    return sorted_page(
        db, _conversions(query), Conversion, Conversion.created_at, query, order, ("created_at",)
    )


def list_conversions(db: Database, query: LogFilter) -> list[dict[str, Any]]:
    """The newest conversions (by the time they were first recorded), newest first."""
    tz = zone(query.timezone)
    select = _conversions(query)
    if query.before_id is not None:
        select = select.where(before(Conversion, Conversion.created_at, query.before_id))
    select = time_bounded(
        select.order_by(Conversion.created_at.desc(), Conversion.id.desc()),
        Conversion.created_at,
        since=query.since,
        until=query.until,
        tz=tz,
        limit=query.limit,
    )
    return localise_times(list(select.dicts()), ("created_at",), tz)


def _postbacks(query: LogFilter, orphans: bool):
    select = PostbackLog.select(*(getattr(PostbackLog, c) for c in POSTBACK_COLUMNS), PostbackLog.expires_at)
    if orphans:
        select = select.where(PostbackLog.verdict == PARKED)
    elif query.status:
        select = select.where(PostbackLog.verdict == query.status.lower())
    if query.subid:
        select = select.where(PostbackLog.subid == query.subid)
    return select


def sorted_postbacks(db: Database, query: LogFilter, order: LogOrder, *, orphans: bool = False) -> SortedPage:
    """A page of the incoming postbacks `query` selects in `order`."""
    select = _postbacks(query, orphans)
    return sorted_page(
        db, select, PostbackLog, PostbackLog.received_at, query, order, ("received_at", "expires_at")
    )


def list_postbacks(db: Database, query: LogFilter, *, orphans: bool = False) -> list[dict[str, Any]]:
    """The newest incoming postbacks as received, with their verdicts; `orphans`: the parked ones."""
    tz = zone(query.timezone)
    select = _postbacks(query, orphans)
    if query.before_id is not None:
        select = select.where(PostbackLog.id < query.before_id)
    select = time_bounded(
        select.order_by(PostbackLog.id.desc()),
        PostbackLog.received_at,
        since=query.since,
        until=query.until,
        tz=tz,
        limit=query.limit,
    )
    return localise_times(list(select.dicts()), ("received_at", "expires_at"), tz)


def sorted_refusals(db: Database, query: LogFilter, order: LogOrder) -> SortedPage:
    """A page of the refusal counters in `order` (its tie: the day, then the address)."""
    select = PostbackRefusal.select(*(getattr(PostbackRefusal, c) for c in REFUSAL_COLUMNS))
    return sorted_page(
        db, select, PostbackRefusal, PostbackRefusal.last_at, query, order, ("first_at", "last_at")
    )


def list_refusals(db: Database, query: LogFilter) -> list[dict[str, Any]]:
    """Postbacks refused before their key was right, per day and source address, busiest first."""
    tz = zone(query.timezone)
    select = PostbackRefusal.select(*(getattr(PostbackRefusal, c) for c in REFUSAL_COLUMNS))
    select = time_bounded(
        select.order_by(PostbackRefusal.day.desc(), PostbackRefusal.refusals.desc()),
        PostbackRefusal.last_at,
        since=query.since,
        until=query.until,
        tz=tz,
        limit=query.limit,
    )
    return localise_times(list(select.dicts()), ("first_at", "last_at"), tz)


def _deliveries(query: LogFilter):
    select = PostbackDelivery.select(*(getattr(PostbackDelivery, c) for c in DELIVERY_COLUMNS))
    if query.status:
        select = select.where(PostbackDelivery.state == query.status.lower())
    if query.campaign_id is not None:
        select = select.where(
            PostbackDelivery.conversion_id.in_(
                Conversion.select(Conversion.id).where(Conversion.campaign_id == query.campaign_id)
            )
        )
    if query.campaign_ids is not None:
        select = select.where(
            PostbackDelivery.conversion_id.in_(
                Conversion.select(Conversion.id).where(Conversion.campaign_id.in_(sorted(query.campaign_ids)))
            )
        )
    return select


def sorted_deliveries(db: Database, query: LogFilter, order: LogOrder) -> SortedPage:
    """A page of the outbound postbacks `query` selects in `order`."""
    return sorted_page(
        db, _deliveries(query), PostbackDelivery, PostbackDelivery.created_at, query, order, ("created_at",)
    )


def list_deliveries(db: Database, query: LogFilter) -> list[dict[str, Any]]:
    """Outbound postbacks, newest first, with their state and the last answer."""
    tz = zone(query.timezone)
    select = _deliveries(query)
    if query.before_id is not None:
        select = select.where(PostbackDelivery.id < query.before_id)
    select = time_bounded(
        select.order_by(PostbackDelivery.id.desc()),
        PostbackDelivery.created_at,
        since=query.since,
        until=query.until,
        tz=tz,
        limit=query.limit,
    )
    return localise_times(list(select.dicts()), ("created_at",), tz)


# Each log's columns a user may sort by: its key -> (the stored column, whether it is text); campaign,
# stream and offer hold ids and sort by their names (models/reporting/logorder.py).
CONVERSION_SORT = {
    "time": ("created_at", False),
    "subid": ("subid", True),
    "tid": ("tid", True),
    "status": ("status", True),
    "raw_status": ("raw_status", True),
    "campaign": ("campaign_id", False),
    "stream": ("stream_id", False),
    "offer": ("offer_id", False),
    "network": ("network", True),
    "payout": ("payout", False),
    "report_payout": ("report_payout", False),
    "cost": ("cost", False),
}
POSTBACK_SORT = {
    "time": ("received_at", False),
    "verdict": ("verdict", True),
    "subid": ("subid", True),
    "tid": ("tid", True),
    "raw_status": ("raw_status", True),
    "from": ("remote_ip", True),
    "detail": ("detail", True),
}
REFUSAL_SORT = {
    "day": ("day", False),
    "from": ("remote_ip", True),
    "refusals": ("refusals", False),
    "first": ("first_at", False),
    "last": ("last_at", False),
}
REFUSAL_TIE = (OrderKey("day", True), OrderKey("remote_ip", False, is_text=True))
DELIVERY_SORT = {
    "time": ("created_at", False),
    "state": ("state", True),
    "status": ("status", True),
    "attempts": ("attempts", False),
    "answer": ("response_code", False),
    "error": ("error", True),
    "conversion": ("conversion_id", False),
}
