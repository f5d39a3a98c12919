"""The rollup cubes' layout: their tables, the period each row covers, their dimensions and metrics.

The tables are migration 0004's. The rules that fill them are models/reporting/rollups.py's, the
statements over them models/store/sqlite/rollups.py's; both, and the reports, read the layout here.
"""

from __future__ import annotations

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
DIMENSIONS = (
    "campaign_id",
    "stream_id",
    "offer_id",
    "source",
    "country",
    "device_type",
    "os",
    "browser",
    "language",
)
CLICK_METRICS = ("clicks", "unique_global", "unique_campaign", "unique_stream", "bots", "click_cost")
CONVERSION_METRICS = (
    "leads", "sales", "rejected", "trash", "rebills", "revenue", "revenue_pending", "conversion_cost",
)  # fmt: skip
METRICS = CLICK_METRICS + CONVERSION_METRICS
CAMPAIGN_DIMENSIONS = ("campaign_id", "stream_id", "offer_id")
# cube -> (its dimensions, {granularity: table}); smallest first, reports take the first that fits.
CUBES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "campaign": (CAMPAIGN_DIMENSIONS, {"hour": "rollup_campaign_hour", "day": "rollup_campaign_day"}),
    "detail": (DIMENSIONS, {"hour": "rollup_hour", "day": "rollup_day"}),
}
WIDTHS = {"hour": HOUR_MS, "day": DAY_MS}
# (table, period width, positions of its dimensions in a detail key)
TABLES = tuple(
    (table, WIDTHS[granularity], tuple(DIMENSIONS.index(d) for d in dims))
    for dims, tables in CUBES.values()
    for granularity, table in tables.items()
)
