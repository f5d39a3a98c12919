"""The dashboard, /panel: the period's totals, a chart of the metrics chosen and the top campaigns, offers
and countries, over the reports a principal may see (routes/panel/common.py PanelReports).

Everything the page shows is in its URL, so it is what a bookmark or a reload gives back: the period (a
preset, or `custom` with `from`/`to` dates in the user's timezone), the chart's metrics (`chart=clicks,
profit`) and the opt-in auto-refresh (`refresh=60`: htmx asks for the same URL every minute and swaps
the page's #dashboard for the answer's; the Refresh button does it at once). A poll that finds the
session ended sends the browser to the login page (HX-Redirect) rather than swapping a login form in.
"""

from __future__ import annotations

import urllib.parse
from datetime import datetime

import falcon

from models.admin.services import list_campaigns
from models.reporting.reports import time_buckets
from models.reporting.timerange import zone
from routes.panel.common import (
    PERIODS,
    PanelContext,
    PanelReports,
    PanelResource,
    fallback_notes,
    report_notes,
    timezone_of,
    totals,
)
from routes.panel.render import Renderer
from routes.panel.session import LOGIN_PATH, PanelSessions

TOP_ROWS = 10
CUSTOM = "custom"
# What the chart may draw, in the legend's order; the amounts are hidden from a hide-money user.
CHART_METRICS = {
    "clicks": "Clicks",
    "unique_clicks": "Unique clicks",
    "conversions": "Conversions",
    "revenue": "Revenue",
    "cost": "Cost",
    "profit": "Profit",
}
MONEY = frozenset({"revenue", "cost", "profit"})
DEFAULT_CHART = ("clicks", "conversions", "revenue", "cost", "profit")
# Seconds between polls a user may choose; none is the default (a dashboard left open costs nothing).
REFRESH_CHOICES = {"": "Off", "10": "10 s", "30": "30 s", "60": "1 min", "300": "5 min"}
HOURLY_DAYS = 3  # A period up to this long is charted by the hour, a longer one by the day.


def bad_request(description: str, title: str = "Bad dashboard") -> falcon.HTTPBadRequest:
    return falcon.HTTPBadRequest(title=title, description=description)


def chart_metrics(req: falcon.Request, principal) -> tuple[str, ...]:
    """The metrics `chart=` names (repeated or comma-separated), or the default's; 400 for another."""
    allowed = [name for name in CHART_METRICS if not (principal.hides_money and name in MONEY)]
    given = [part.strip() for value in req.get_param_as_list("chart") or () for part in value.split(",")]
    given = [name for name in given if name]
    for name in given:
        if name not in allowed:
            raise bad_request(f"The chart draws {', '.join(allowed)}, not {name[:40]!r}.")
    return tuple(dict.fromkeys(given)) or chart_metrics_default(principal)


def refresh_of(req: falcon.Request) -> str:
    refresh = req.get_param("refresh") or ""
    if refresh not in REFRESH_CHOICES:
        choices = ", ".join(choice for choice in REFRESH_CHOICES if choice)
        raise bad_request(f"Auto-refresh is every {choices} seconds, or off.")
    return refresh


def chart_data(report, group: str, principal, metrics: tuple[str, ...]) -> dict:
    """The time series the dashboard draws: every bucket of the period in the user's timezone, empty
    ones as zeros, x as each bucket's first instant (panel.js labels the axis in `timezone`)."""
    by_label = {row[group]: row for row in report.rows} if report else {}
    name = timezone_of(principal)
    buckets = []
    if report and report.start_ms is not None:
        buckets = time_buckets(group, zone(name), report.start_ms, report.end_ms)
    return {
        "x": [start_ms // 1000 for _, start_ms in buckets],
        "series": {
            column: [round(by_label.get(label, {}).get(column) or 0, 2) for label, _ in buckets]
            for column in metrics
        },
        "metrics": list(metrics),  # The legend's order (the page's JSON has its keys sorted).
        "labels": {column: CHART_METRICS[column] for column in metrics},
        "currency": report.currency if report else "",
        "timezone": name,
    }


def top_rows(report, rows: int = TOP_ROWS) -> list[dict]:
    if report is None:
        return []
    return sorted(report.rows, key=lambda row: (-row["clicks"], str(row)))[:rows]


class DashboardResource(PanelResource):
    def __init__(self, sessions: PanelSessions, render: Renderer, reports: PanelReports) -> None:
        super().__init__(sessions, render)
        self.reports = reports

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.get_header("HX-Request") and self.sessions.current(req) is None:
            # A poll after the session ended: the whole page goes to the login, not a swap of its form.
            resp.set_header(
                "HX-Redirect", LOGIN_PATH + "?" + urllib.parse.urlencode({"next": req.relative_uri})
            )
            resp.status = falcon.HTTP_204
            return
        session = self.sessions.require(req)
        principal = session.principal
        since, until = (req.get_param("from") or "").strip(), (req.get_param("to") or "").strip()
        # Dates typed in the options form win over the preset it carries along.
        period = CUSTOM if since else req.get_param("period") or "today"
        if period not in (*PERIODS, CUSTOM):
            raise bad_request(f"The period is one of {', '.join((*PERIODS, CUSTOM))}.", "Unknown period")
        if period == CUSTOM and not since:
            raise bad_request("A custom period needs a from date.")
        metrics, refresh = chart_metrics(req, principal), refresh_of(req)

        def report(group: str):
            if period != CUSTOM:
                return self.reports(principal, group, period)
            return self.reports.report(principal, {"group": group, "from": since, "to": until or since})

        by_campaign = report("campaign")
        if period == CUSTOM:
            span_ms = by_campaign.end_ms - by_campaign.start_ms if by_campaign else 0
            group = "hour" if span_ms <= HOURLY_DAYS * 86_400_000 else "day"
        else:
            group = "hour" if period in ("today", "yesterday") else "day"
        series = report(group)
        kept = [("chart", ",".join(metrics))] if metrics != chart_metrics_default(principal) else []
        kept += [("refresh", refresh)] if refresh else []
        here = [("period", period)] + ([("from", since), ("to", until or since)] if period == CUSTOM else [])
        self.page(
            req,
            resp,
            "dashboard.html",
            session,
            period=period,
            periods=PERIODS,
            since=since,
            until=until or since,
            extra_query="&" + urllib.parse.urlencode(kept) if kept else "",
            self_url="/panel?" + urllib.parse.urlencode(here + kept),
            chart=chart_data(series, group, principal, metrics),
            chart_metrics={
                name: label
                for name, label in CHART_METRICS.items()
                if not (principal.hides_money and name in MONEY)
            },
            chosen=metrics,
            refresh=refresh,
            refresh_choices=REFRESH_CHOICES,
            updated=datetime.now(zone(timezone_of(principal))).strftime("%H:%M:%S"),
            total=by_campaign.total if by_campaign else totals([]),
            currency=(by_campaign or series).currency
            if (by_campaign or series)
            else self.reports.report_currency,
            campaigns=top_rows(by_campaign),
            notes=[]
            if by_campaign is None
            else report_notes(by_campaign, principal.hides_money) + fallback_notes(series, by_campaign),
            campaign_names={c.id: c.name for c in list_campaigns(self.sessions.db, include_archived=True)},
            offers=top_rows(report("offer")),
            countries=top_rows(report("country")),
        )


def chart_metrics_default(principal) -> tuple[str, ...]:
    return tuple(name for name in DEFAULT_CHART if not (principal.hides_money and name in MONEY))


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel", DashboardResource(panel.sessions, panel.render, panel.reports))
