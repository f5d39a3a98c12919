"""What reports group and filter by, and what the rollup cubes keep: dimensions, metrics, tables.

The rollup tables are migration 0004's (the campaign and detail cubes) and 0011's (the country cube).
The rules that fill them are models/reporting/rollups.py's, the reports' models/reporting/reports.py's;
the statements over both are the store's (models/store/rollups.py, reports.py), which write
their SQL from the names here, so a name this module does not know never becomes an identifier.
"""

from __future__ import annotations

from models.choices import SUB_ID_SLOTS

# Grouping / filter name -> the click column it reads.
DIMENSION_COLUMNS: dict[str, str] = {
    "campaign": "campaign_id",
    "stream": "stream_id",
    "offer": "offer_id",
    # The affiliate network of the click's offer: reports read the offer and group its offers' sums
    # under their network (models/reporting/reports.py), so every cube with offers answers it.
    "network": "offer_id",
    # The traffic source of the click's campaign (models/admin/sources.py), likewise over its campaigns.
    "traffic_source": "campaign_id",
    "lander": "lander_id",  # The lander the click was sent to (no rollup keeps it: raw clicks).
    "source": "source",
    "country": "country",
    "device": "device_type",
    "os": "os",
    "browser": "browser",
    "language": "language",
    **{f"sub_id_{n}": f"sub_id_{n}" for n in range(1, SUB_ID_SLOTS + 1)},
    "referrer_domain": "referrer",  # The referrer URL's host without "www.".
    "domain": "domain",  # The host the click came in on (migration 0016; no rollup keeps it: raw clicks).
}
# The dimensions that are ids of a campaign, stream or offer: their filters take integers, and a
# conversion keeps its own copy of them (indexed), which its filters read.
ID_GROUPS = ("campaign", "stream", "offer", "network", "traffic_source")
# The dimensions whose values are ids of a named object: their filters take integers, reports name them.
NAMED_GROUPS = (*ID_GROUPS, "lander")

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
# lp_views: clicks sent to a lander; lp_clicks: those whose lander's link to the offer was followed
# (migration 0016; an LP click moves its click from offer 0 to the offer chosen then, rollups.py).
CLICK_METRICS = (
    "clicks",
    "unique_global",
    "unique_campaign",
    "unique_stream",
    "bots",
    "click_cost",
    "lp_views",
    "lp_clicks",
)
LP_METRICS = ("lp_views", "lp_clicks")
CONVERSION_METRICS = (
    "leads",
    "sales",
    "rejected",
    "trash",
    "rebills",
    "revenue",
    "revenue_pending",
    "conversion_cost",
)
METRICS = CLICK_METRICS + CONVERSION_METRICS
MONEY_METRICS = ("click_cost", "revenue", "revenue_pending", "conversion_cost")  # The rest are counts.
CAMPAIGN_DIMENSIONS = ("campaign_id", "stream_id", "offer_id")
COUNTRY_DIMENSIONS = (*CAMPAIGN_DIMENSIONS, "country")
# cube -> (its dimensions, {granularity: table}); smallest first, reports take the first that fits.
CUBES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "campaign": (CAMPAIGN_DIMENSIONS, {"hour": "rollup_campaign_hour", "day": "rollup_campaign_day"}),
    # Migration 0011's: the dashboard's top countries and country reports, a few hundred rows a day.
    "country": (
        COUNTRY_DIMENSIONS,
        {"hour": "rollup_campaign_country_hour", "day": "rollup_campaign_country_day"},
    ),
    "detail": (DIMENSIONS, {"hour": "rollup_hour", "day": "rollup_day"}),
}
WIDTHS = {"hour": HOUR_MS, "day": DAY_MS}
# (table, period width, positions of its dimensions in a detail key)
TABLES = tuple(
    (table, WIDTHS[granularity], tuple(DIMENSIONS.index(d) for d in dims))
    for dims, tables in CUBES.values()
    for granularity, table in tables.items()
)
