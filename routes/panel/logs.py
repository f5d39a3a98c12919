"""The panel's logs: the click log and a click's page (its facts, routing trace and conversions), and
the postback log (incoming postbacks, refusals, outbound deliveries), over the services the admin API's
routes/v1/clicks.py and routes/v1/postbacks.py call, limited to the campaigns the user may see.

Every log pages by cursor as the API does (routes/v1/pagination.py: the last row's id, newest first);
the pages already walked ride along in `back`, so "Newer" is one link, with no query of its own.
"""

from __future__ import annotations

import csv
import io
import itertools
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import falcon

from models.accounts.access import visible_campaign_ids
from models.admin.services import list_campaigns
from models.choices import POSTBACK_VERDICTS, SUB_ID_SLOTS
from models.clicks.privacy import anonymized_ip
from models.errors import LannerError
from models.reporting.clicklog import (
    SORT_COLUMNS as CLICK_SORT,
)
from models.reporting.clicklog import (
    ClickFilter,
    StoredClickError,
    list_clicks,
    sorted_clicks,
    stored_click,
)
from models.reporting.clickpath import NOT_RECORDED
from models.reporting.columnpages import CLICKS
from models.reporting.conversionlog import (
    DELIVERY_SORT,
    POSTBACK_SORT,
    REFUSAL_SORT,
    REFUSAL_TIE,
    LogFilter,
    list_conversions,
    list_deliveries,
    list_postbacks,
    list_refusals,
    sorted_deliveries,
    sorted_postbacks,
    sorted_refusals,
)
from models.reporting.historyclicks import click_history
from models.reporting.lognames import campaigns_of_conversions, name_ids
from models.reporting.logorder import ID_KEY, LogOrder, SortedPage
from models.reporting.timerange import local_iso, zone
from models.tables.click import SUB_ID_COLUMNS
from routes.panel.columnsets import ColumnChoice, ListSets
from routes.panel.common import PERIODS, PanelContext, PanelResource, timezone_of
from routes.panel.logsort import SORTED_CHUNK_FACTOR, LogSort, asks_sort
from routes.panel.reports import csv_text
from routes.v1.pagination import id_cursor, log_page, page_limit
from routes.v1.spec import refused

CSV_CHUNK = 1000  # Clicks read per query while the CSV streams: its memory is one chunk.
MAX_BACK = 50  # Pages remembered for "Newer"; past that, it goes back to the newest.
BOT_CHOICES = {"": "Bots and humans", "humans": "Humans only", "bots": "Bots only"}
DELIVERY_STATES = ("pending", "sent", "failed")
POSTBACK_TABS = {"postbacks": "Incoming", "refusals": "Refused before the key", "deliveries": "Outbound"}
# What a click's page lists, in this order (sub ids, cost and the routing summary apart).
CLICK_FACTS = (
    "created_at",
    "ip",
    "user_agent",
    "referrer",
    "source",
    "keyword",
    "external_id",
    "country",
    "region",
    "city",
    "device_type",
    "os",
    "browser",
    "language",
    "is_bot",
    "is_unique_global",
    "is_unique_campaign",
    "is_unique_stream",
)


def param(req: falcon.Request, name: str) -> str:
    return (req.get_param(name) or "").strip()


def log_range(req: falcon.Request, tz_name: str, now: float) -> dict[str, Any]:
    """The `from`/`to` local dates (YYYY-MM-DD, or with a time) the form sent, else the `period` preset's,
    as LogFilter/ClickFilter fields in the user's timezone."""
    since, until, period = param(req, "from") or None, param(req, "to") or None, param(req, "period")
    if period and period not in PERIODS:
        raise falcon.HTTPBadRequest(
            title="Unknown period", description=f"The period is one of {', '.join(PERIODS)}, or none."
        )
    if period and not (since or until):
        today = datetime.fromtimestamp(now, zone(tz_name)).date()
        first = {"today": 0, "yesterday": 1, "last_7_days": 6, "last_30_days": 29}[period]
        since = (today - timedelta(days=first)).isoformat()
        until = since if period == "yesterday" else None  # A bare end date is the end of that day.
    return {"since": since, "until": until, "timezone": tz_name}


class Pager:
    """This page's cursor, the cursors of the pages walked before it (`back`, the newest page's as
    FIRST), and the query strings of the next (older) and the newer page."""

    FIRST = "-"

    def __init__(self, req: falcon.Request, *, is_sorted: bool = False) -> None:
        self.req = req
        self.limit = page_limit(req)
        # A sorted log's cursor is the last row's sort values (routes/panel/logsort.py reads it).
        self.before_id = None if is_sorted else id_cursor(req)
        self.cursor = param(req, "cursor")
        self.back = [c for c in param(req, "back").split(",") if c][-MAX_BACK:]
        self.next: str | None = None

    def rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The page of a log read with `limit + 1` rows."""
        chosen, self.next = log_page(rows, self.limit)
        return chosen

    def sorted_rows(self, rows: list[dict[str, Any]], next_cursor: str | None) -> list[dict[str, Any]]:
        """The page of a sorted log, with the cursor of the page after it."""
        self.next = next_cursor
        return rows

    def query(self, **changes: str | None) -> str:
        kept: dict[str, str | None] = {
            name: value for name, value in self.req.params.items() if isinstance(value, str) and value
        }
        kept.update(changes)
        return urllib.parse.urlencode({name: value for name, value in kept.items() if value})

    @property
    def next_query(self) -> str | None:
        if self.next is None:
            return None
        return self.query(
            cursor=self.next, back=",".join([*self.back, self.cursor or self.FIRST][-MAX_BACK:])
        )

    @property
    def newer_query(self) -> str | None:
        """None on the newest page; the newest page again when the trail was cut (or never given)."""
        if not self.cursor:
            return None
        previous = self.back[-1] if self.back else self.FIRST
        return self.query(cursor=None if previous == self.FIRST else previous, back=",".join(self.back[:-1]))


# The logs' column headers (column sets: models/reporting/columnpages.py CLICKS and CONVERSIONS).
LOG_LABELS = {
    "subid": "Subid",
    "campaign": "Campaign",
    "stream": "Stream",
    "offer": "Offer",
    "ip": "IP",
    "country": "Country",
    "device": "Device",
    "os": "OS",
    "browser": "Browser",
    "unique": "Unique",
    "bot": "Bot",
    "tid": "Tid",
    "status": "Status",
    "raw_status": "Network's word",
    "network": "Network",
    "payout": "Payout",
    "report_payout": "In report currency",
    "cost": "Cost",
}


def log_chooser(
    sets: ListSets, principal, choice: ColumnChoice, labels: dict[str, str], pager: Pager, sorting: LogSort
) -> dict:
    """A log's column chooser (templates/_list_columns.html): its filters kept, its pages' cursor not;
    its sort kept by the chooser and saved with a set."""
    cols_text = ",".join(choice.columns) if choice.columns != choice.base else ""
    pairs = urllib.parse.parse_qsl(pager.query(cursor=None, back=None))
    keep = [(n, v) for n, v in pairs if n not in ("col", "sort")]
    back = f"/panel/{sets.page.name}?" + urllib.parse.urlencode(
        keep
        + ([("col", cols_text)] if cols_text else [])
        + ([("sort", sorting.text)] if sorting.text else [])
    )
    return {
        "chooser": sets.chooser(principal, labels, choice.columns, sorting.text, back),
        "set_keep": keep,
        "cols_text": cols_text,
        "sort_text": sorting.text,
        "sorting": sorting,
    }


def campaign_choice(req: falcon.Request, visible: set[int] | None) -> int | None:
    """The `campaign` filter's id; 404 for one the user may not see (as for one that does not exist)."""
    text = param(req, "campaign")
    if not text:
        return None
    if not text.isdigit() or (visible is not None and int(text) not in visible):
        raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {text[:20]!r}.")
    return int(text)


def visible_campaigns(db, principal) -> tuple[set[int] | None, dict[int, Any]]:
    """The ids the principal may see (None: all) and those campaigns by id, for names and the filter."""
    visible = visible_campaign_ids(db, principal)
    listed = list_campaigns(db, include_archived=True)
    campaigns = {c.id: c for c in listed if visible is None or c.id in visible}
    return visible, campaigns


def scope(visible: set[int] | None, chosen: int | None) -> dict[str, Any]:
    """The filter fields that keep a log to the campaigns a user may see."""
    if chosen is not None:
        return {"campaign_id": chosen}
    return {} if visible is None else {"campaign_ids": tuple(sorted(visible))}


def sub_id_filter(req: falcon.Request) -> tuple[int, str] | None:
    slot, value = param(req, "sub"), req.get_param("sub_value") or ""
    if not slot or not value:
        return None
    if not slot.isdigit() or not 1 <= int(slot) <= SUB_ID_SLOTS:
        raise falcon.HTTPBadRequest(title="Bad sub id", description=f"A sub id slot is 1 to {SUB_ID_SLOTS}.")
    return int(slot), value


class ClickLogResource(PanelResource):
    def __init__(self, sessions, render, settings) -> None:
        super().__init__(sessions, render)
        self.anonymize_ip = settings.anonymize_ip
        self.history = click_history(settings)  # Clicks LANNER_RAW_RETENTION took from the row store.

    def click_filter(self, req: falcon.Request, principal, visible: set[int] | None, limit: int, before_id):
        """The log's filters as the query gives them, `limit` rows after `before_id`."""
        chosen = campaign_choice(req, visible)
        bots = param(req, "bots")
        if bots not in BOT_CHOICES:
            raise falcon.HTTPBadRequest(title="Bad filter", description="Bots are `bots`, `humans` or none.")
        return ClickFilter(
            country=param(req, "country") or None,
            is_bot={"": None, "bots": True, "humans": False}[bots],
            subid=param(req, "subid") or None,
            # Clicks keep the address as anonymised, if the install does: a full one finds them too.
            ip=(anonymized_ip(param(req, "ip")) if self.anonymize_ip else param(req, "ip")) or None,
            sub_id=sub_id_filter(req),
            limit=limit,
            before_id=before_id,
            **scope(visible, chosen),
            **log_range(req, timezone_of(principal), time.time()),
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        sets = ListSets(self.sessions.db, CLICKS)
        sets.redirect_for_controls(req, principal)
        choice = sets.choice(req, principal)
        visible, campaigns = visible_campaigns(self.sessions.db, principal)
        sorting = LogSort(req, CLICK_SORT, ("time", *choice.columns), choice.sort)
        pager = Pager(req, is_sorted=sorting.is_sorted)
        query = self.click_filter(req, principal, visible, pager.limit + 1, pager.before_id)
        fallback = None  # Why the columnar history did not answer a sorted page (said on the page).
        try:
            if visible == set():
                rows = []
            elif sorting.is_sorted:
                page = sorted_clicks(
                    self.sessions.db, replace(query, limit=pager.limit), sorting.order(), self.history
                )
                rows = pager.sorted_rows(page.rows, sorting.cursor(page.after))
                fallback = page.fallback
            else:
                rows = pager.rows(list_clicks(self.sessions.db, query, self.history))
        except LannerError as exc:
            raise refused(exc) from None
        name_ids(rows)
        self.page(
            req,
            resp,
            "logs_clicks.html",
            session,
            rows=rows,
            fallback=fallback,
            not_recorded=NOT_RECORDED,
            pager=pager,
            **log_chooser(sets, principal, choice, LOG_LABELS, pager, sorting),
            csv_query=pager.query(cursor=None, back=None, limit=None, sort=sorting.text or None),
            campaigns=campaigns,
            periods=PERIODS,
            bot_choices=BOT_CHOICES,
            slots=range(1, SUB_ID_SLOTS + 1),
            form={
                name: req.get_param(name) or ""
                for name in (
                    "campaign",
                    "subid",
                    "country",
                    "bots",
                    "ip",
                    "sub",
                    "sub_value",
                    "period",
                    "from",
                    "to",
                )
            },
        )


CLICK_CSV_HEADER = [
    "Time",
    "Subid",
    "Campaign",
    "Campaign id",
    "Stream",
    "Stream id",
    "Offer",
    "Offer id",
    "IP",
    "Country",
    "Device",
    "OS",
    "Browser",
    "Unique",
    "Bot",
    "Path",
]


def click_csv_row(row: dict[str, Any], campaigns: dict[int, Any]) -> list[str]:
    """A click as the log shows it, each name and id apart (text a spreadsheet will not run)."""
    campaign = campaigns.get(row["campaign_id"])
    return [
        row["created_at"][:19].replace("T", " "),
        csv_text(row["subid"]),
        csv_text(campaign.name if campaign else str(row["campaign_id"])),
        str(row["campaign_id"]),
        csv_text(row["stream_name"]),
        "" if row["stream_id"] is None else str(row["stream_id"]),
        csv_text(row["offer_name"]),
        "" if row["offer_id"] is None else str(row["offer_id"]),
        csv_text(row.get("ip") or ""),
        row.get("country") or "",
        row.get("device_type") or "",
        csv_text(row.get("os") or ""),
        csv_text(row.get("browser") or ""),
        "1" if row.get("is_unique_campaign") else "0",
        "1" if row.get("is_bot") == 1 else "0",
        csv_text(row.get("path") or ""),
    ]


class ClickCsvResource(ClickLogResource):
    """`GET /panel/clicks.csv`: every click the log's filters select (all its pages, newest first), the
    columns it shows. Streamed: read CSV_CHUNK rows at a time by the log's own cursor, so a million
    clicks never sit in memory at once."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        db = self.sessions.db
        visible, campaigns = visible_campaigns(db, principal)
        # The CSV carries every column: it sorts by any of the log's.
        sorting = LogSort(req, CLICK_SORT, CLICK_SORT)
        query = self.click_filter(req, principal, visible, CSV_CHUNK, None)
        try:  # The first chunk before the answer starts: a bad filter is a 400, not a cut CSV.
            if visible == set():
                chunks: Iterator[list[dict]] = iter([[]])
            elif sorting.is_sorted:
                chunk = CSV_CHUNK * SORTED_CHUNK_FACTOR
                chunks = self.sorted_chunks(db, replace(query, limit=chunk), sorting.order())
            else:
                chunks = self.chunks(db, query)
            first = next(chunks)
        except LannerError as exc:
            raise refused(exc) from None
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Content-Disposition", 'attachment; filename="lanner-clicks.csv"')
        resp.stream = self.lines(itertools.chain([first], chunks), campaigns)

    def chunks(self, db, query: ClickFilter) -> Iterator[list[dict]]:
        """The log's clicks newest first, CSV_CHUNK at a time by its own cursor."""
        while True:
            rows = list_clicks(db, query, self.history)
            yield rows
            if len(rows) < query.limit:
                return
            query = replace(query, before_id=rows[-1]["id"])

    def sorted_chunks(self, db, query: ClickFilter, order: LogOrder) -> Iterator[list[dict]]:
        """The log's clicks in the sort's order, `query.limit` at a time by its keyset cursor."""
        while True:
            page = sorted_clicks(db, query, order, self.history)
            yield page.rows
            if page.after is None:
                return
            order = order.with_after(page.after)

    @staticmethod
    def lines(chunks: Iterator[list[dict]], campaigns) -> Iterator[bytes]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CLICK_CSV_HEADER)
        for rows in chunks:
            for row in name_ids(rows):
                writer.writerow(click_csv_row(row, campaigns))
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()


class ClickPageResource(PanelResource):
    """One stored click: what was stored, the routing trace on its stored values, its conversions."""

    def __init__(self, sessions, render, settings) -> None:
        super().__init__(sessions, render)
        self.settings = settings

    def on_get(self, req: falcon.Request, resp: falcon.Response, subid: str) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        tz = zone(timezone_of(principal))
        visible, campaigns = visible_campaigns(self.sessions.db, principal)
        try:
            data = stored_click(
                self.sessions.db,
                subid,
                geo_path=self.settings.geo_path,
                geo_network_paths=self.settings.geo_network_paths,
                history=click_history(self.settings),
            )
        except StoredClickError:
            data = None
        if data is None or (visible is not None and data["click"]["campaign_id"] not in visible):
            raise falcon.HTTPNotFound(
                title="Not found", description=f"There is no stored click {subid[:40]!r}."
            )
        found = data["click"]
        # A click only the history holds has no IP address or user agent: shown as none.
        facts = [(name, found.get(name, "")) for name in CLICK_FACTS]
        facts[0] = ("created_at", local_iso(found["created_at"], tz))
        sub_ids = [(name, found[name]) for name in SUB_ID_COLUMNS if found.get(name)]
        conversions = list_conversions(self.sessions.db, LogFilter(subid=subid, timezone=tz.key, limit=100))
        self.page(
            req,
            resp,
            "logs_click.html",
            session,
            click=found,
            names=name_ids([{"stream_id": found["stream_id"], "offer_id": found["offer_id"]}])[0],
            facts=facts,
            sub_ids=sub_ids,
            decision_path=data["path"],
            not_recorded=NOT_RECORDED,
            streams=data["streams"],
            conversions=conversions,
            campaign=campaigns.get(found["campaign_id"]),
            is_anonymized=self.settings.anonymize_ip,
        )


def named_deliveries(rows: list[dict[str, Any]], campaigns: dict[int, Any]) -> list[dict[str, Any]]:
    """Outbound postbacks with their conversion's campaign by name (`campaign`, '' for none shown)."""
    of = campaigns_of_conversions(row["conversion_id"] for row in rows)
    for row in rows:
        campaign = campaigns.get(of.get(row["conversion_id"], 0))
        row["campaign"] = campaign.name if campaign else ""
    return rows


TAB_SORT = {
    "postbacks": POSTBACK_SORT,
    "refusals": REFUSAL_SORT,
    "deliveries": DELIVERY_SORT,
}
ID_KEY_TIE = (ID_KEY,)


@dataclass(frozen=True)
class TabQuery:
    """A postback log tab as one request asks for it: its readers (by id after a row; sorted after a
    cursor), its sort, the tabs the user may open and the campaigns they see."""

    tab: str
    read: Callable[[int | None], list[dict[str, Any]]]
    read_sorted: Callable[[LogOrder], SortedPage]
    sorting: LogSort
    tabs: dict[str, str]
    campaigns: dict[int, Any]


class PostbackLogResource(PanelResource):
    """The postback log's three tabs. As the admin API: a user who hides money gets none of them (the
    raw requests and URLs carry payouts under any name); incoming postbacks and refusals are an
    admin's (parked ones belong to no campaign yet); deliveries are shown for the visible campaigns."""

    def tab_query(self, req: falcon.Request, principal, limit: int, before_id: int | None) -> TabQuery:
        """The tab the query asks for, its readers of `limit` rows (`limit - 1` and the cursor after them,
        sorted) and the tabs the user may open; 403 / 400 in one sentence for what it may not ask."""
        if principal.hides_money:
            raise falcon.HTTPForbidden(
                title="Money hidden",
                description=(
                    "The postback log shows payouts as the networks send them, which this user does not see."
                ),
            )
        is_admin = principal.role == "admin"
        tab = param(req, "log") or ("postbacks" if is_admin else "deliveries")
        if tab not in POSTBACK_TABS:
            raise falcon.HTTPBadRequest(
                title="Unknown log", description=f"The log is one of {', '.join(POSTBACK_TABS)}."
            )
        if tab != "deliveries" and not is_admin:
            raise falcon.HTTPForbidden(title="Admins only", description="Incoming postbacks are for admins.")
        visible, campaigns = visible_campaigns(self.sessions.db, principal)
        chosen = campaign_choice(req, visible) if tab == "deliveries" else None
        status = param(req, "verdict" if tab == "postbacks" else "state") or None
        if status and status not in (POSTBACK_VERDICTS if tab == "postbacks" else DELIVERY_STATES):
            raise falcon.HTTPBadRequest(
                title="Bad filter", description=f"There is no such state as {status[:20]!r}."
            )
        options = {"limit": limit, **log_range(req, timezone_of(principal), time.time())}
        db = self.sessions.db
        sorting = LogSort(
            req, TAB_SORT[tab], TAB_SORT[tab], tie=REFUSAL_TIE if tab == "refusals" else ID_KEY_TIE
        )
        if tab == "postbacks":
            orphans = param(req, "orphans") == "1"
            query = LogFilter(
                subid=param(req, "subid") or None, status=status, before_id=before_id, **options
            )

            def read(after: int | None) -> list[dict[str, Any]]:
                return list_postbacks(db, replace(query, before_id=after), orphans=orphans)

            def read_sorted(order: LogOrder) -> SortedPage:
                return sorted_postbacks(db, replace(query, limit=limit - 1), order, orphans=orphans)

        elif tab == "refusals":
            query = LogFilter(**options)

            def read(after: int | None) -> list[dict[str, Any]]:
                # Counters per day: no pages.
                return [] if after is not None else list_refusals(db, query)[:limit]

            def read_sorted(order: LogOrder) -> SortedPage:
                return sorted_refusals(db, replace(query, limit=limit - 1), order)

        else:
            query = LogFilter(status=status, before_id=before_id, **scope(visible, chosen), **options)

            def read(after: int | None) -> list[dict[str, Any]]:
                if visible == set():
                    return []
                return named_deliveries(list_deliveries(db, replace(query, before_id=after)), campaigns)

            def read_sorted(order: LogOrder) -> SortedPage:
                if visible == set():
                    return SortedPage([], None)
                page = sorted_deliveries(db, replace(query, limit=limit - 1), order)
                return SortedPage(named_deliveries(page.rows, campaigns), page.after)

        tabs = POSTBACK_TABS if is_admin else {"deliveries": POSTBACK_TABS["deliveries"]}
        return TabQuery(tab, read, read_sorted, sorting, tabs, campaigns)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        pager = Pager(req, is_sorted=asks_sort(req))
        found = self.tab_query(req, session.principal, pager.limit + 1, pager.before_id)
        tab, sorting = found.tab, found.sorting
        try:
            if sorting.is_sorted:
                page = found.read_sorted(sorting.order())
                rows = pager.sorted_rows(page.rows, sorting.cursor(page.after))
            else:
                rows = found.read(pager.before_id)
                rows = rows[: pager.limit] if tab == "refusals" else pager.rows(rows)
        except LannerError as exc:
            raise refused(exc) from None
        tabs, campaigns = found.tabs, found.campaigns
        self.page(
            req,
            resp,
            "logs_postbacks.html",
            session,
            tab=tab,
            tabs=tabs,
            rows=rows,
            not_recorded=NOT_RECORDED,
            pager=pager,
            sorting=sorting,
            csv_query=pager.query(cursor=None, back=None, limit=None),
            campaigns=campaigns,
            periods=PERIODS,
            verdicts=POSTBACK_VERDICTS,
            states=DELIVERY_STATES,
            form={
                name: req.get_param(name) or ""
                for name in ("campaign", "subid", "verdict", "state", "orphans", "period", "from", "to")
            },
        )


# Each tab's CSV columns: (header, the row's field), as the tab's table shows them.
POSTBACK_CSV_COLUMNS = {
    "postbacks": (
        ("Received", "received_at"),
        ("Verdict", "verdict"),
        ("Subid", "subid"),
        ("Tid", "tid"),
        ("Network's word", "raw_status"),
        ("From", "remote_ip"),
        ("Detail", "detail"),
        ("Request", "request"),
        ("Expires", "expires_at"),
    ),
    "refusals": (
        ("Day (UTC)", "day"),
        ("From", "remote_ip"),
        ("Refusals", "refusals"),
        ("First", "first_at"),
        ("Last", "last_at"),
        ("Sample (key masked)", "sample"),
    ),
    "deliveries": (
        ("Created", "created_at"),
        ("State", "state"),
        ("Status", "status"),
        ("Attempts", "attempts"),
        ("Answer", "response_code"),
        ("Error", "error"),
        ("Conversion", "conversion_id"),
        ("Campaign", "campaign"),
        ("URL", "url"),
    ),
}


def csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return csv_text(
            value[:19].replace("T", " ") if value[:4].isdigit() and value[10:11] == "T" else value
        )
    return str(value)


class PostbackCsvResource(PostbackLogResource):
    """`GET /panel/postback-log.csv`: every row of the tab its filters select (all pages, newest first),
    its columns, streamed CSV_CHUNK rows a query; who may open the tab may download it."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        chunk = CSV_CHUNK * (SORTED_CHUNK_FACTOR if asks_sort(req) else 1)
        found = self.tab_query(req, session.principal, chunk + 1, None)
        tab = found.tab
        try:  # The first chunk before the answer starts: a bad filter is a 400, not a cut CSV.
            chunks = self.chunks(found)
            first = next(chunks)
        except LannerError as exc:
            raise refused(exc) from None
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Content-Disposition", f'attachment; filename="lanner-postback-log-{tab}.csv"')
        resp.stream = self.lines(POSTBACK_CSV_COLUMNS[tab], itertools.chain([first], chunks))

    @staticmethod
    def chunks(found: TabQuery) -> Iterator[list[dict[str, Any]]]:
        """The tab's rows CSV_CHUNK at a time newest first by id, or in the sort's order by its keyset
        (CSV_CHUNK * SORTED_CHUNK_FACTOR a query)."""
        if found.sorting.is_sorted:
            order = found.sorting.order()
            while True:
                page = found.read_sorted(order)
                yield page.rows
                if page.after is None:
                    return
                order = order.with_after(page.after)
        rows = found.read(None)[:CSV_CHUNK]
        while True:
            yield rows
            if len(rows) < CSV_CHUNK or "id" not in rows[-1]:
                return
            rows = found.read(rows[-1]["id"])[:CSV_CHUNK]

    @staticmethod
    def lines(columns, chunks: Iterator[list[dict[str, Any]]]) -> Iterator[bytes]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([header for header, _ in columns])
        for rows in chunks:
            for row in rows:
                writer.writerow([csv_cell(row.get(name)) for _, name in columns])
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    sessions, render = panel.sessions, panel.render
    app.add_route("/panel/clicks", ClickLogResource(sessions, render, panel.settings))
    app.add_route("/panel/clicks.csv", ClickCsvResource(sessions, render, panel.settings))
    app.add_route("/panel/clicks/{subid}", ClickPageResource(sessions, render, panel.settings))
    app.add_route("/panel/postback-log", PostbackLogResource(sessions, render))
    app.add_route("/panel/postback-log.csv", PostbackCsvResource(sessions, render))
