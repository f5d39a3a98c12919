"""What every panel page shares: the period presets, the user's timezone, the reports a principal may
see, the page context and the routes' wiring (`PanelContext`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import falcon

from models.accounts.access import visible_campaign_ids
from routes.api import report_from_parameters
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions

if TYPE_CHECKING:
    from peewee import Database

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


class PanelReports:
    """The reports a principal may see: the admin API's report, limited to their visible campaigns."""

    def __init__(self, db, report_currency: str) -> None:
        self.db = db
        self.report_currency = report_currency

    def __call__(self, principal, group: str, period: str):
        """The report, or None when the principal sees no campaign at all."""
        params = {"group": group, "preset": period, "timezone": timezone_of(principal)}
        visible = visible_campaign_ids(self.db, principal)
        if visible is not None:
            if not visible:
                return None
            params["f.campaign"] = ",".join(str(campaign_id) for campaign_id in sorted(visible))
        return report_from_parameters(self.db, params, self.report_currency)


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
        self.render(resp, template, code, session=session, user=session.principal if session else None,
                    path=req.path, timezone=timezone_of(session.principal) if session else DEFAULT_TIMEZONE, **context)  # fmt: skip


@dataclass(frozen=True)
class PanelContext:
    """What a page module's `add_routes(app, panel)` builds its resources from."""

    db: Database
    settings: Settings
    sessions: PanelSessions
    render: Renderer
    reports: PanelReports
