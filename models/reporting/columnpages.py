"""The panel pages whose columns a user chooses (column sets, models/reporting/columnsets.py): each
page's columns, which of them say money, the columns shown before any choice, and the built-in presets.

Keys only: the pages (routes/panel/) give them headers and cells. A page's first column (the report's
group, a campaign's name) is always shown and not among these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.reporting.reports import REPORT_METRICS

# The report's amounts and the shares of them (ROI says profit): hidden, with the amounts, from a user
# who hides money.
MONEY_METRICS = frozenset({"revenue", "revenue_pending", "cost", "profit", "roi", "epc", "cpc", "cpa"})


@dataclass(frozen=True)
class Preset:
    name: str
    columns: tuple[str, ...]
    sort: str = ""  # As a saved set's: up to two keys, `-` before one for descending.


@dataclass(frozen=True)
class ColumnPage:
    name: str
    columns: tuple[str, ...]  # Every column a user may choose, in the chooser's order.
    defaults: tuple[str, ...]  # Shown before the user chooses (no set).
    first: str  # The sort key of the always-shown first column.
    presets: tuple[Preset, ...] = ()
    money: frozenset[str] = field(default=MONEY_METRICS)
    has_groups: bool = False  # The report builder: a set keeps its grouping too.

    def choosable(self, hides_money: bool) -> tuple[str, ...]:
        return tuple(c for c in self.columns if not (hides_money and c in self.money))

    def shown(self, columns: tuple[str, ...], hides_money: bool) -> tuple[str, ...]:
        """`columns` as a user sees them: their money ones gone for one who hides money, and any the page
        no longer has (a set saved before) left out."""
        allowed = set(self.choosable(hides_money))
        return tuple(c for c in columns if c in allowed)

    def preset(self, name: str) -> Preset | None:
        return next((p for p in self.presets if p.name.lower() == name.lower()), None)


TRAFFIC = ("clicks", "unique_clicks", "bots", "conversions", "cr", "lp_views", "lp_clicks", "lp_ctr")
MONEY = ("clicks", "conversions", "cr", "revenue", "cost", "profit", "roi", "epc", "cpc", "cpa")
LANDERS = ("clicks", "lp_views", "lp_clicks", "lp_ctr", "conversions", "cr", "epc")

REPORTS = ColumnPage(
    "reports",
    REPORT_METRICS,
    ("clicks", "unique_clicks", "conversions", "cr", "revenue", "cost", "profit", "roi", "epc"),
    "group",
    (
        Preset("Traffic", TRAFFIC, "-clicks"),
        Preset("Money", MONEY, "-profit,-clicks"),
        Preset("Landers", LANDERS, "-lp_ctr,-clicks"),
    ),
    has_groups=True,
)
CAMPAIGNS = ColumnPage(
    "campaigns",
    ("status", *REPORT_METRICS),
    ("status", "clicks", "unique_clicks", "conversions", "cr", "revenue", "cost", "profit", "roi"),
    "name",
    (
        Preset("Traffic", ("status", *TRAFFIC), "-clicks"),
        Preset("Money", ("status", *MONEY), "-profit,-clicks"),
        Preset("Landers", ("status", *LANDERS), "-lp_ctr,-clicks"),
    ),
)
# The lists of routes/panel/listtable.py: their columns as the pages' ListTables name them (the first,
# the object's name, apart; what only the CSV carries rides with the column before it).
OFFER_COLUMNS = ("status", "network", "payout", "daily_cap", "total_cap", "clicks", "conversions", "cr")
OFFERS = ColumnPage(
    "offers",
    (*OFFER_COLUMNS, "revenue", "epc"),
    (*OFFER_COLUMNS, "revenue", "epc"),
    "name",
    (
        Preset("Traffic", ("status", "network", "clicks", "conversions", "cr"), "-clicks"),
        Preset(
            "Money", ("status", "network", "payout", "clicks", "conversions", "revenue", "epc"), "-revenue"
        ),
        Preset("Caps", ("status", "daily_cap", "total_cap", "clicks"), "-clicks"),
    ),
    frozenset({"payout", "revenue", "epc"}),
)
SOURCE_NUMBERS = ("clicks", "conversions", "cr", "cost", "revenue", "profit", "roi", "cpc")
SOURCES = ColumnPage(
    "sources",
    ("status", "campaigns", "postback", *SOURCE_NUMBERS),
    ("status", "campaigns", "postback", *SOURCE_NUMBERS),
    "name",
    (
        Preset("Traffic", ("status", "campaigns", "clicks", "conversions", "cr"), "-clicks"),
        Preset("Money", ("clicks", "conversions", "cost", "revenue", "profit", "roi", "cpc"), "-profit"),
    ),
)
NETWORK_MACROS = ("subid_macro", "payout_macro", "status_macro", "tid_macro")
NETWORKS = ColumnPage(
    "networks",
    ("alias", "status", "offers", "clicks", "conversions", "cr", "revenue", "epc", *NETWORK_MACROS),
    ("alias", "status", "offers", "clicks", "conversions", "cr", "revenue", "epc", *NETWORK_MACROS),
    "name",
    (
        Preset("Traffic", ("status", "offers", "clicks", "conversions", "cr"), "-clicks"),
        Preset("Money", ("offers", "clicks", "conversions", "revenue", "epc"), "-revenue"),
        Preset("Macros", ("alias", *NETWORK_MACROS)),
    ),
)
LANDERS_PAGE = ColumnPage(
    "landers",
    ("kind", "status", "streams", "uses"),
    ("kind", "status", "streams", "uses"),
    "name",
    (Preset("Usage", ("status", "streams", "uses"), "-streams"), Preset("Compact", ("kind", "status"))),
    frozenset(),
)
# The logs: a click's or conversion's time first, always.
CLICK_COLUMNS = (
    "subid",
    "campaign",
    "stream",
    "offer",
    "ip",
    "country",
    "device",
    "os",
    "browser",
    "unique",
    "bot",
)
CLICKS = ColumnPage(
    "clicks",
    CLICK_COLUMNS,
    CLICK_COLUMNS,
    "time",
    (
        Preset("Routing", ("subid", "campaign", "stream", "offer", "bot")),
        Preset("Visitor", ("subid", "ip", "country", "device", "os", "browser", "unique", "bot")),
    ),
    frozenset(),
)
CONVERSION_COLUMNS = ("subid", "tid", "status", "raw_status", "campaign", "stream", "offer", "network")
CONVERSIONS = ColumnPage(
    "conversions",
    (*CONVERSION_COLUMNS, "payout", "report_payout", "cost"),
    (*CONVERSION_COLUMNS, "payout", "report_payout", "cost"),
    "time",
    (
        Preset("Status", ("subid", "tid", "status", "raw_status", "campaign", "network")),
        Preset("Money", ("subid", "status", "campaign", "offer", "payout", "report_payout", "cost")),
    ),
    frozenset({"payout", "report_payout", "cost"}),
)
PAGES = {
    page.name: page
    for page in (REPORTS, CAMPAIGNS, OFFERS, SOURCES, NETWORKS, LANDERS_PAGE, CLICKS, CONVERSIONS)
}


def page_of(name: str) -> ColumnPage | None:
    return PAGES.get(name)
