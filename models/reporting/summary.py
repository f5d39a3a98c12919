"""A summary row without some of its rows (Binom's subtraction: tick the rows to leave out): every
count and amount is the total's less the ticked rows' own, and the ratios are computed again from those
sums, as models/reporting/reports.py computes a row's, never averaged from the rows' ratios."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from models.reporting.reports import REPORT_METRICS

# Each ratio: (numerator, denominator, scale), as a report row computes it.
RATIO_PARTS = {
    "cr": ("conversions", "clicks", 100.0),
    "roi": ("profit", "cost", 100.0),
    "epc": ("revenue", "clicks", 1.0),
    "cpc": ("cost", "clicks", 1.0),
    "cpa": ("cost", "conversions", 1.0),
    "lp_ctr": ("lp_clicks", "lp_views", 100.0),
}
SUMS = tuple(name for name in REPORT_METRICS if name not in RATIO_PARTS)
AMOUNTS = frozenset({"revenue", "revenue_pending", "cost", "profit"})


def with_ratios(sums: dict[str, Any]) -> dict[str, Any]:
    """`sums` with every ratio computed from them (None where its denominator is 0)."""
    row = {name: sums.get(name) or 0 for name in SUMS}
    for name in AMOUNTS:
        row[name] = round(row[name], 6)
    for name, (numerator, denominator, scale) in RATIO_PARTS.items():
        row[name] = round(row[numerator] / row[denominator] * scale, 4) if row[denominator] else None
    return row


def total_without(total: dict[str, Any], left_out: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The summary `total` less the rows `left_out` (rows of the same report)."""
    sums = {name: total.get(name) or 0 for name in SUMS}
    for row in left_out:
        for name in SUMS:
            sums[name] -= row.get(name) or 0
    return with_ratios(sums)


def total_of(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The summary of `rows`: their sums and the ratios of those."""
    sums = dict.fromkeys(SUMS, 0)
    for row in rows:
        for name in SUMS:
            sums[name] += row.get(name) or 0
    return with_ratios(sums)
