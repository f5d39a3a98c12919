"""Currencies: the install's report currency, stored exchange rates, and amounts converted into it.

Every money amount a report sums is stored in the report currency when it is recorded, next to
the amount and currency as received: a click's cost (the flusher converts its campaign's cost),
a conversion's `report_payout` and `cost`. The rollups sum only those, so they stay additive and
exact, and no report ever adds two currencies.

The rule: an amount converts at the latest rate stored for its currency when it is recorded
(Keitaro converts at the time of the event); a later rate does not change it. A conversion whose
currency has no rate yet is stored with `report_payout` NULL: it counts as a conversion but not in
revenue, and reports say how many there are. Setting a rate for that currency converts them at
that rate and moves the rollups with them, in the same transaction.

The report currency the stored amounts are in is kept in meta `report_currency` (USD for data from
before currencies existed: every default said USD). `lanner db migrate` adopts
LANNER_REPORT_CURRENCY while the database holds no money yet; after that, changing it would mean
converting every stored amount, which is not done: reports refuse to label USD amounts as EUR.
`lanner currency relabel EUR` is for the install whose USD was never meant: it says the stored
amounts were EUR all along (cheap: offers, campaigns and conversions only; no click is rewritten).
The statements are models/store/currency.py's.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from peewee import Database

from models.errors import LannerError
from models.reporting.rollups import RollupDelta, conversion_metrics
from models.store.currency import CurrencyStore
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.store.rollups import RollupStore
from models.tables.conversion import LEAD, REBILL, SALE

CODE = re.compile(r"^[A-Z]{3}$")
MAX_RATE = 1e9
FEED_TIMEOUT = 10.0
FEED_MAX_BYTES = 1 << 20


class CurrencyError(LannerError, ValueError):
    """A currency or rate that cannot be used; the message is one sentence for the user."""


def check_code(code: str) -> str:
    """An ISO 4217 code, upper-cased; CurrencyError if it is not three letters."""
    upper = (code or "").strip().upper()
    if not CODE.match(upper):
        raise CurrencyError(f"Currency {code[:20]!r} is not a three-letter code such as USD or EUR.")
    return upper


def report_currency(conn) -> str:
    """The currency the stored report amounts are in."""
    return MetaStore(conn).get("report_currency") or "USD"


def rate_of(conn, currency: str, report: str) -> float | None:
    """What one unit of `currency` is worth in `report` now; None when no rate is stored."""
    if currency == report:
        return 1.0
    return CurrencyStore(conn).latest_rate(currency)


def convert(conn, amount: float, currency: str, report: str) -> float | None:
    rate = rate_of(conn, currency, report)
    return None if rate is None else round(amount * rate, 6)


def require_rate(conn, currency: str) -> str:
    """`currency` checked and upper-cased; CurrencyError unless it can be converted now."""
    code = check_code(currency)
    report = report_currency(conn)
    if rate_of(conn, code, report) is None:
        raise CurrencyError(
            f"There is no exchange rate for {code} into the report currency {report}; "
            f"set one first with `lanner currency rate set {code} RATE`."
        )
    return code


def check_report_currency(conn, wanted: str) -> str:
    """The stored report currency, or CurrencyError when it is not the one the settings ask for."""
    stored = report_currency(conn)
    if wanted and wanted != stored:
        raise CurrencyError(
            f"The stored amounts are in {stored} but LANNER_REPORT_CURRENCY is {wanted}; set it back to "
            f"{stored} (converting stored amounts to another report currency is not supported)."
        )
    return stored


def adopt_report_currency(db: Database, wanted: str) -> bool:
    """Make `wanted` the report currency while the database holds no clicks, conversions or rates.

    Returns whether it changed; a database with data keeps its currency (reports then refuse).
    """
    conn = db.connection()
    with write_tx(db):
        meta = MetaStore(conn)
        old = meta.get("report_currency")  # None: migrated only up to before currencies.
        currencies = CurrencyStore(conn)
        if old is None or old == wanted or currencies.holds_money():
            return False
        meta.set("report_currency", wanted)
        # Offers and campaigns made before: their currency was the default, not a choice.
        currencies.relabel_offers_and_campaigns(old, wanted)
    return True


def relabel_report_currency(db: Database, new: str) -> int:
    """Say the amounts stored in the report currency were in `new` all along: offers, campaigns and
    conversions labelled with the old one take the new one, and conversions received in `new` that
    waited for a rate count at 1:1. Refused while rates are stored (they are into the old currency).

    Returns how many conversions changed label or were converted.
    """
    new = check_code(new)
    conn = db.connection()
    with write_tx(db):
        old = report_currency(conn)
        if new == old:
            raise CurrencyError(f"The report currency is {old} already.")
        currencies = CurrencyStore(conn)
        if currencies.has_rates():
            raise CurrencyError(
                f"Exchange rates are stored, into {old}; a relabel would make them wrong. It is for an "
                "install that has not set rates yet."
            )
        MetaStore(conn).set("report_currency", new)
        currencies.relabel_offers_and_campaigns(old, new)
        relabelled = currencies.relabel_conversions(old, new)
        relabelled += _convert_waiting(conn, new, 1.0, new)
    return relabelled


@dataclass
class RateChange:
    currency: str
    rate: float
    converted: int  # Stored conversions that had waited for a rate and now have a report payout.


def check_rate(value: Any) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise CurrencyError(f"Rate {str(value)[:20]!r} is not a number.") from None
    if not math.isfinite(rate) or rate <= 0 or rate > MAX_RATE:
        raise CurrencyError(f"Rate {str(value)[:20]!r} must be a positive number below 1,000,000,000.")
    return rate


def set_rates(
    db: Database, rates: dict[str, Any], *, source: str = "manual", now_ms: int | None = None
) -> list[RateChange]:
    """Store each rate (one unit of the currency in the report currency) from now on, in one
    transaction, converting the conversions that waited for it."""
    valid_from = int(time.time() * 1000) if now_ms is None else now_ms
    conn = db.connection()
    with write_tx(db):
        report = report_currency(conn)
        checked = {}
        for currency, value in rates.items():
            code = check_code(currency)
            if code == report:
                raise CurrencyError(f"{code} is the report currency; its rate is 1.")
            checked[code] = check_rate(value)
        changes = []
        currencies = CurrencyStore(conn)
        for code, rate in checked.items():
            currencies.insert_rate(code, valid_from, rate, source)
            changes.append(RateChange(code, rate, _convert_waiting(conn, code, rate, report)))
    return changes


def _convert_waiting(conn, currency: str, rate: float, report: str) -> int:
    """Give the conversions stored without a rate for `currency` their report payout (and revshare
    cost), moving their part of the rollups; how many."""
    currencies = CurrencyStore(conn)
    rows = currencies.unconverted(currency)
    if not rows:
        return 0
    live = MetaStore(conn).rollups_live()
    rollups = RollupStore(conn)
    delta = RollupDelta()
    campaigns: dict[int, tuple[str, float]] = {}
    for conversion_id, click_id, campaign_id, status, payout, old_cost in rows:
        report_payout = round(payout * rate, 6)
        if campaign_id not in campaigns:
            campaigns[campaign_id] = campaign_cost(conn, campaign_id, report)
        model, value = campaigns[campaign_id]
        cost = conversion_cost(model, value, status, report_payout) if model == "revshare" else old_cost
        currencies.convert(conversion_id, report_payout, cost)
        if live:
            key = rollups.click_key(click_id)
            if key is not None:
                delta.add_conversion(key, conversion_metrics(status, 0.0, old_cost), -1)
                delta.add_conversion(key, conversion_metrics(status, report_payout, cost))
    delta.apply(conn)
    return len(rows)


def campaign_cost(conn, campaign_id: int, report: str) -> tuple[str, float]:
    """The campaign's cost model and value in the report currency (value 0 while its currency has no
    rate: reports say so)."""
    row = CurrencyStore(conn).campaign_cost(campaign_id)
    if row is None:
        return "cpc", 0.0
    model, value, currency = row
    rate = rate_of(conn, currency, report)
    return model, (value * rate if rate is not None else 0.0)


def conversion_cost(cost_model: str, cost_value: float, status: str, payout: float) -> float:
    """What the traffic source charges for this conversion under the campaign's cost model."""
    if cost_model == "cpa":
        return cost_value if status in (LEAD, SALE) else 0.0
    if cost_model == "cps":
        return cost_value if status == SALE else 0.0
    if cost_model == "revshare":
        return round(payout * cost_value / 100, 6) if status in (SALE, REBILL) else 0.0
    return 0.0  # Per-click models: the cost is on the clicks.


def list_rates(db: Database, *, history: bool = False) -> list[dict[str, Any]]:
    conn = db.connection()
    report = report_currency(conn)
    rows = CurrencyStore(conn).rates(history=history)
    return [
        {
            "currency": currency,
            "rate": rate,
            "report_currency": report,
            "valid_from": valid_from,
            "source": source,
        }
        for currency, rate, valid_from, source in rows
    ]


def rates_from_feed(data: Any, report: str) -> dict[str, float]:
    """A feed's rates ({"base": "EUR", "rates": {"USD": 1.08, ...}}, the ECB / exchangerate.host
    shape) as the value of one unit of each currency in `report`."""
    if not isinstance(data, dict) or not isinstance(data.get("rates"), dict):
        raise CurrencyError('The rate feed is not of the form {"base": "EUR", "rates": {"USD": 1.08}}.')
    base = str(data.get("base") or data.get("base_code") or "").upper()
    quoted: dict[str, float] = {}
    for code, value in data["rates"].items():
        if isinstance(code, str) and CODE.match(code):
            try:
                quoted[code] = check_rate(value)
            except CurrencyError:
                continue  # One bad entry does not spoil the others.
    if base:
        quoted[base] = 1.0
    if report not in quoted:
        raise CurrencyError(f"The rate feed has no rate for the report currency {report}.")
    per_base = quoted[report]  # One base unit in the report currency.
    return {code: per_base / value for code, value in quoted.items() if code != report}


def fetch_feed(url: str, timeout: float = FEED_TIMEOUT) -> Any:
    if not url.startswith(("http://", "https://")):
        raise CurrencyError(f"The rate feed URL {url[:80]!r} is not http:// or https://.")
    # Here, not at the top: every CLI command that touches campaigns imports this module, and
    # urllib.request (http.client, email, ssl) would add ~50 ms to each of them.
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "Lanner"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(FEED_MAX_BYTES + 1)
    except OSError as exc:
        raise CurrencyError(f"The rate feed {url[:80]} could not be read: {exc}.") from None
    if len(body) > FEED_MAX_BYTES:
        raise CurrencyError("The rate feed is larger than 1 MB.")
    try:
        return json.loads(body)
    except ValueError:
        raise CurrencyError("The rate feed is not JSON.") from None


def refresh_rates(db: Database, url: str) -> list[RateChange]:
    """Store the feed's rates that differ from the stored ones (source: the feed's host)."""
    data = fetch_feed(url)
    conn = db.connection()
    rates = rates_from_feed(data, report_currency(conn))
    latest = {row["currency"]: row["rate"] for row in list_rates(db)}
    changed = {
        code: round(rate, 10)
        for code, rate in rates.items()
        if code not in latest or not math.isclose(latest[code], rate, rel_tol=1e-9)
    }
    if not changed:
        return []
    return set_rates(db, changed, source=urlparse(url).hostname or "feed")
