"""The campaign editor's numbers: per stream and per offer of a stream, today's and the chosen period's
clicks, conversions and revenue, the caps' usage ("1,200 / 1,200") and the share of a stream's clicks
each offer was actually served beside the share its weight asks for.

The sums are the report's, grouped by stream and offer and filtered on the campaign, so they come from
the campaign rollup cube (whole hours and days) and only the current hour's raw clicks, by their time
index: never a scan of the click table. The caps' usage is what the caps are checked against
(models/routing/caps.py: `click_counter`, by its primary key).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from models.routing.caps import OFFER, STREAM, cap_usage
from routes.panel.common import PanelReports, Period

COUNTED = ("clicks", "conversions", "revenue")


@dataclass
class Numbers:
    """Clicks, conversions and revenue of a stream or of an offer in a stream, today and in the period."""

    today: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))
    period: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))

    def add(self, which: str, row: dict) -> None:
        sums = self.today if which == "today" else self.period
        for name in COUNTED:
            sums[name] += row.get(name) or 0


@dataclass(frozen=True)
class CapUsage:
    """A stream's or offer's caps beside its clicks counted against them (none: no such cap)."""

    today: int
    total: int
    daily_cap: int | None
    total_cap: int | None

    @property
    def is_reached(self) -> bool:
        return (self.daily_cap is not None and self.today >= self.daily_cap) or (
            self.total_cap is not None and self.total >= self.total_cap
        )


def usage_of(db, scope: str, item, zone: str, now_ms: int) -> CapUsage | None:
    """The cap usage of a stream or offer that has a cap, else None (nothing to show)."""
    if item.daily_cap is None and item.total_cap is None:
        return None
    today, total = cap_usage(db.connection(), scope, item.id, zone, now_ms)
    return CapUsage(today, total, item.daily_cap, item.total_cap)


class EditorNumbers:
    """The numbers of one campaign's streams and their offers, as a principal may see them."""

    def __init__(self, db, reports: PanelReports, clock=time.time) -> None:
        self.db = db
        self.reports = reports
        self.clock = clock

    def __call__(self, principal, campaign, summaries: list[dict], offers: dict[int, Any], period: Period):
        """{stream id: {"numbers", "cap", "offers": {offer id: {"numbers", "cap", "served"}}}} for the
        editor's stream `summaries` (routes/panel/editor.py stream_summary), plus the report currency."""
        numbers: dict[int, Numbers] = {}
        offer_numbers: dict[tuple[int, int], Numbers] = {}
        currency = self.reports.report_currency
        for which, params in (("today", {"preset": "today"}), ("period", period.report_params)):
            report = self.reports.report(
                principal, {"group": "stream,offer", **params}, {"campaign": str(campaign.id)}
            )
            if report is not None:
                currency = report.currency
                for row in report.rows:
                    stream_id = row.get("stream")
                    if stream_id is None:  # A default-action click: no stream to show it under.
                        continue
                    numbers.setdefault(stream_id, Numbers()).add(which, row)
                    if row.get("offer") is not None:
                        offer_numbers.setdefault((stream_id, row["offer"]), Numbers()).add(which, row)
            if period.key == "today":  # The period is today: the same report, not read twice.
                numbers = {sid: _both(n) for sid, n in numbers.items()}
                offer_numbers = {key: _both(n) for key, n in offer_numbers.items()}
                break
        now_ms = int(self.clock() * 1000)
        shown: dict[int, dict] = {}
        for summary in summaries:
            stream = summary["stream"]
            served_total = sum(
                offer_numbers.get((stream.id, offer["id"]), Numbers()).period["clicks"]
                for offer in summary["offers"]
            )
            shown[stream.id] = {
                "numbers": numbers.get(stream.id, Numbers()),
                "cap": usage_of(self.db, STREAM, stream, campaign.timezone, now_ms),
                "offers": {},
            }
            for offer in summary["offers"]:
                served = offer_numbers.get((stream.id, offer["id"]), Numbers())
                item = offers.get(offer["id"])
                shown[stream.id]["offers"][offer["id"]] = {
                    "numbers": served,
                    "served": served.period["clicks"] / served_total * 100 if served_total else None,
                    "cap": usage_of(self.db, OFFER, item, item.timezone, now_ms) if item else None,
                }
        return shown, currency


def _both(numbers: Numbers) -> Numbers:
    return Numbers(today=numbers.today, period=dict(numbers.today))
