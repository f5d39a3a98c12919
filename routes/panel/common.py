"""What every panel page shares: the period presets, the user's timezone, the reports a principal may
see, the page context and the routes' wiring (`PanelContext`)."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import falcon

from models.accounts.access import visible_campaign_ids
from models.admin.services import list_campaigns
from models.errors import LannerError
from models.reporting.history import HistoryFiles
from models.reporting.notes import without_money_notes
from models.reporting.reportpage import page_report
from models.reporting.reportstream import stream_report
from models.reporting.series import run_series
from routes.api import report_query, run_report_query
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions

if TYPE_CHECKING:
    from peewee import Database

    from models.clicks.tracker import ClickTracker
    from settings import Settings

PERIODS = {
    "today": "Today",
    "yesterday": "Yesterday",
    "last_7_days": "Last 7 days",
    "last_30_days": "Last 30 days",
}
DEFAULT_TIMEZONE = "UTC"  # The report's default, for a user without a timezone of their own.
SUMMED = ("clicks", "unique_clicks", "conversions", "revenue", "cost", "profit")


def timezone_of(principal) -> str:
    """The IANA timezone a principal's periods, charts and times are in."""
    return principal.timezone or DEFAULT_TIMEZONE


def period_of(req: falcon.Request) -> str:
    period = req.get_param("period") or "today"
    if period not in PERIODS:
        raise falcon.HTTPBadRequest(
            title="Unknown period", description=f"The period is one of {', '.join(PERIODS)}."
        )
    return period


DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class Period:
    """A list's period: a preset (PERIODS) or `custom`, local dates `since` to `until` (inclusive; either
    may be open) in the user's timezone, as the reports page takes them."""

    key: str
    since: str = ""
    until: str = ""

    @property
    def report_params(self) -> dict[str, str]:
        if self.key != "custom":
            return {"preset": self.key}
        return {name: value for name, value in (("from", self.since), ("to", self.until)) if value}

    @property
    def query(self) -> dict[str, str]:
        """The query parameters that ask for it again (a link keeps the period)."""
        if self.key != "custom":
            return {"period": self.key}
        return {"period": "custom", **{name: value for name, value in self.report_params.items()}}

    @property
    def label(self) -> str:
        if self.key != "custom":
            return PERIODS[self.key]
        return f"{self.since or '…'} to {self.until or '…'}"

    @property
    def slug(self) -> str:
        """The period in a file name."""
        return self.key if self.key != "custom" else f"{self.since or 'start'}-to-{self.until or 'now'}"


def chosen_period(req: falcon.Request) -> Period:
    """The period a list page asks for: `?period=` a preset, or `custom` with `from` and/or `to` dates
    (YYYY-MM-DD; `from`/`to` alone mean custom); 400 in one sentence for anything else."""
    since, until = (req.get_param("from") or "").strip(), (req.get_param("to") or "").strip()
    key = req.get_param("period") or ("custom" if since or until else "today")
    if key != "custom":
        return Period(period_of(req))
    for value in (since, until):
        if value and not DATE.fullmatch(value):
            raise falcon.HTTPBadRequest(title="Bad date", description="Give dates as YYYY-MM-DD.")
    if not since and not until:
        raise falcon.HTTPBadRequest(
            title="Bad period", description="A custom period needs a from or a to date."
        )
    if since and until and since > until:
        raise falcon.HTTPBadRequest(
            title="Bad period", description="The from date must not be after the to date."
        )
    return Period("custom", since, until)


MAX_BACK = 2000  # A list's state (filters, sort, columns, period) is far shorter; more is no one's link.


def back_to(path: str, query: str) -> str:
    """A link back to the list at `path` as `query` (the list's own query, carried through a page such
    as a bulk edit) showed it: its filters, sort, columns and period. Only the query is taken from the
    request, re-encoded pair by pair, so the link cannot lead off `path`."""
    pairs = urllib.parse.parse_qsl(query[:MAX_BACK])
    kept = urllib.parse.urlencode(pairs, safe=",")
    return f"{path}?{kept}" if kept else path


class FormError(LannerError, ValueError):
    """A field a form cannot be saved with; the message is one sentence shown next to the form."""


class ListFilter:
    """A list page's status filter and search box: `?status=` (`current`: all but archived, `all`, or one
    status) and `?q=`, a case-blind substring of the texts the page searches."""

    def __init__(self, req: falcon.Request, statuses: tuple[str, ...]) -> None:
        self.choices = ("current", *statuses, "all")
        self.status = req.get_param("status") or "current"
        if self.status not in self.choices:
            raise falcon.HTTPBadRequest(
                title="Unknown status", description=f"The status is one of {', '.join(self.choices)}."
            )
        self.search = (req.get_param("q") or "").strip()

    def keeps(self, status: str, *texts: str) -> bool:
        if self.status == "current" and status == "archived":
            return False
        if self.status not in ("current", "all") and status != self.status:
            return False
        return not self.search or self.search.lower() in "\n".join(texts).lower()


class PanelReports:
    """The reports a principal may see: the admin API's report, limited to their visible campaigns."""

    def __init__(self, db, report_currency: str, history: HistoryFiles | None = None) -> None:
        self.db = db
        self.report_currency = report_currency
        self.history = history  # The columnar history's files (None: the rollups and row store only).

    def __call__(self, principal, group: str, period: str | Period):
        """The report, or None when the principal sees no campaign at all."""
        params = period.report_params if isinstance(period, Period) else {"preset": period}
        return self.report(principal, {"group": group, **params})

    def report(self, principal, params: dict[str, str], exact: dict[str, str] | None = None):
        """The report `params` ask for (the report language: group, preset or from/to, f.<name>) in the
        principal's timezone, or None when they may see none of the campaigns it would count.

        `exact`: filters on one value each, taken as written (a drill-down step's: a sub id may hold a
        comma); each replaces a filter on the same name. A campaign filter is intersected with the
        visible campaigns, so naming another user's campaign counts nothing."""
        query = self._visible_query(principal, params, exact)
        return None if query is None else run_report_query(self.db, query, self.history)

    def page(self, principal, params: dict[str, str], exact: dict[str, str] | None, page):
        """One page of the report report() makes (models/reporting/reportpage.py: `page` a PageQuery),
        with its row count and totals over every row, or None."""
        query = self._visible_query(principal, params, exact)
        if query is None:
            return None
        return run_report_query(
            self.db, query, self.history, run=lambda db, q, history: page_report(db, q, page, history=history)
        )

    def series(
        self, principal, params: dict[str, str], exact: dict[str, str] | None, rows: list[tuple[str, ...]]
    ):
        """The time series of `rows` of the report `params` and `exact` ask for (as report()), or None."""
        query = self._visible_query(principal, params, exact)
        if query is None:
            return None
        return run_report_query(
            self.db, query, self.history, run=lambda db, q, history: run_series(db, q, rows, history=history)
        )

    def stream(self, principal, params: dict[str, str], exact: dict[str, str] | None = None):
        """The report as report() makes it, its rows read as they are iterated (a CSV's), or None."""
        query = self._visible_query(principal, params, exact)
        return None if query is None else run_report_query(self.db, query, self.history, run=stream_report)

    def _visible_query(self, principal, params: dict[str, str], exact: dict[str, str] | None):
        query = report_query({**params, "timezone": timezone_of(principal)}, self.report_currency)
        filters = {**query.filters, **{name: (value,) for name, value in (exact or {}).items()}}
        visible = visible_campaign_ids(self.db, principal)
        if visible is not None:
            allowed = visible
            if "campaign" in filters:
                ids = {}
                for campaign in list_campaigns(self.db, include_archived=True):
                    if campaign.id in visible:
                        ids[str(campaign.id)] = ids[campaign.alias] = campaign.id
                allowed = {ids[ref] for ref in filters["campaign"] if ref in ids}
            if not allowed:
                return None
            filters["campaign"] = tuple(str(campaign_id) for campaign_id in sorted(allowed))
        return dataclasses.replace(query, filters=filters)


def report_notes(report, hides_money: bool) -> list[str]:
    """The report's notes but the one on the history's fallback (the page says that itself), and but
    those naming payouts or costs for a user who hides money."""
    notes = without_money_notes(report.notes) if hides_money else report.notes
    return [note for note in notes if not report.fallback or not note.endswith(report.fallback)]


def fallback_notes(*reports) -> list[str]:
    """The note on the history's fallback of each report that has one, once (a page of several reports)."""
    notes: list[str] = []
    for report in reports:
        if report is not None and report.fallback:
            note = next(note for note in report.notes if note.endswith(report.fallback))
            if note not in notes:
                notes.append(note)
    return notes


def totals(rows: list[dict]) -> dict:
    total = {name: sum(row.get(name) or 0 for row in rows) for name in SUMMED}
    total["cr"] = total["conversions"] / total["clicks"] * 100 if total["clicks"] else None
    total["roi"] = total["profit"] / total["cost"] * 100 if total["cost"] else None
    return total


class PanelResource:
    """What every page has: the session rules, the renderer, the common context."""

    def __init__(self, sessions: PanelSessions, render: Renderer) -> None:
        self.sessions = sessions
        self.render = render

    def page(self, req, resp, template: str, session, code=200, **context) -> None:
        self.render(
            resp,
            template,
            code,
            session=session,
            user=session.principal if session else None,
            path=req.path,
            timezone=timezone_of(session.principal) if session else DEFAULT_TIMEZONE,
            **context,
        )


def tcp_port(bind: str) -> int | None:
    host, _, port = bind.rpartition(":")
    return int(port) if host and not bind.startswith("unix:") and port.isdigit() else None


class CampaignBase:
    """Where campaign URLs start, as this browser reaches the tracker (the list and the editor show
    them to copy): the panel's own host (nginx serves both), but the web workers' port when the panel
    is opened on the admin worker's."""

    def __init__(self, sessions: PanelSessions, settings: Settings) -> None:
        self.sessions = sessions
        self.admin_port = tcp_port(settings.admin_address)
        self.web_port = tcp_port(settings.bind)

    def __call__(self, req: falcon.Request) -> str:
        host = req.get_header("Host") or req.host
        if self.admin_port and self.web_port and req.port == self.admin_port:
            host = f"{req.host}:{self.web_port}"
        return f"{'https' if self.sessions.is_https(req) else 'http'}://{host}/"


@dataclass(frozen=True)
class PanelContext:
    """What a page module's `add_routes(app, panel)` builds its resources from."""

    db: Database
    settings: Settings
    sessions: PanelSessions
    render: Renderer
    reports: PanelReports
    build_tracker: Callable[[Database, Settings], ClickTracker]  # The simulate page's pipeline (app.py).
    conversion_csv_chunk: int | None = None  # None: routes/panel/conversions.py's CSV_CHUNK.
