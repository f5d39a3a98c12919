"""Currencies: the install's report currency, stored exchange rates, and amounts converted into it.

Every money amount a report sums is stored in the report currency when it is recorded, next to
the amount and currency as received: a click's cost (the flusher converts its campaign's cost),
a conversion's `report_payout` and `cost`. The rollups sum only those, so they stay additive and
exact, and no report ever adds two currencies.

The rule: a rate is stored for the UTC day it applies from, and an amount converts at the rate of
the day it is recorded on: the latest rate at or before that moment (the first one stored, for a time
before any). A conversion whose currency has no rate at all is stored with `report_payout` NULL: it
counts as a conversion but not in revenue, and reports say how many there are. Storing a rate for a
day (by hand, or fetched: the ECB publishes the day's rates in its afternoon) converts again the
conversions of that currency recorded in the days it covers, those waiting included, and moves the
rollups with them, in the same transaction; so each day's revenue is its payouts at its rate. A
click's cost and a spread spend keep the rate they were converted at; one that had no rate waited in
its own currency (models/reporting/clickcosts.py) and is converted, in that transaction too, at the
rate of its click's day. A rate set by hand (sources
MANUAL_SOURCES) is never replaced by a fetched one for the same currency and day.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlparse

from peewee import Database

from models.errors import LannerError
from models.reporting.clickcosts import convert_unrated_costs
from models.reporting.rollups import RollupDelta, conversion_metrics
from models.store.currency import MANUAL_SOURCES, CurrencyStore
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.store.rollups import RollupStore
from models.tables.conversion import LEAD, REBILL, SALE

CODE = re.compile(r"^[A-Z]{3}$")
MAX_RATE = 1e9
FEED_TIMEOUT = 10.0
FEED_MAX_BYTES = 1 << 20  # The ECB's 90-day file is ~60 KB; its whole history (~7 MB) is refused.


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


def rate_of(conn, currency: str, report: str, at_ms: int | None = None) -> float | None:
    """What one unit of `currency` is worth in `report` at `at_ms` (default now): the rate of that day
    (the latest stored at or before it; the first stored for a time before any); None when none is."""
    if currency == report:
        return 1.0
    return CurrencyStore(conn).rate_at(currency, now_ms() if at_ms is None else at_ms)


def convert(conn, amount: float, currency: str, report: str, at_ms: int | None = None) -> float | None:
    """`amount` of `currency` in `report` at the rate in force at `at_ms` (default now)."""
    rate = rate_of(conn, currency, report, at_ms)
    return None if rate is None else round(amount * rate, 6)


def now_ms() -> int:
    return int(time.time() * 1000)


def day_of(ms: int) -> date:
    """The UTC day a Unix-ms time falls on: the day whose rate it converts at."""
    return datetime.fromtimestamp(ms / 1000, UTC).date()


def day_start_ms(day: date) -> int:
    """The Unix ms a day's rate applies from: its start, UTC."""
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def parse_day(text: str) -> date:
    """A YYYY-MM-DD day; CurrencyError if it is none."""
    try:
        return date.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        raise CurrencyError(f"Day {str(text)[:20]!r} is not a date such as 2026-12-04.") from None


def missing_rate(conn, currency: str | None) -> str | None:
    """A warning for an offer or a cost in `currency` when it has no exchange rate into the report
    currency (it is accepted: its amounts wait for a rate); None when it has one."""
    if not currency:
        return None
    report = report_currency(conn)
    if rate_of(conn, currency, report) is not None:
        return None
    return (
        f"{currency} has no exchange rate into the report currency {report}: amounts in it are left out "
        f"of revenue and cost until one is fetched (`lanner currency rate fetch`) or set "
        f"(`lanner currency rate set {currency} RATE`)."
    )


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
        convert_unrated_costs(db, new, currency=new)
    return relabelled


@dataclass
class RateChange:
    currency: str
    rate: float
    converted: int  # Stored conversions whose report payout this rate set or changed.
    day: str = ""  # YYYY-MM-DD, UTC: the day it applies from.
    costs: int = 0  # Clicks whose cost waited for a rate of this currency and has it now.

    def summary(self, report: str) -> str:
        """One sentence on the rate set (the CLI's, the panel's)."""
        said = f"1 {self.currency} = {self.rate:g} {report} from {self.day}."
        if self.converted:
            said += f" Converted {self.converted:,} {self.currency} conversion(s) at it."
        if self.costs:
            said += f" {self.costs:,} click cost(s) in {self.currency} that waited for a rate have one."
        return said


def check_rate(value: Any) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise CurrencyError(f"Rate {str(value)[:20]!r} is not a number.") from None
    if not math.isfinite(rate) or rate <= 0 or rate > MAX_RATE:
        raise CurrencyError(f"Rate {str(value)[:20]!r} must be a positive number below 1,000,000,000.")
    return rate


def set_rates(
    db: Database,
    rates: dict[str, Any],
    *,
    source: str = "manual",
    day: date | None = None,
    now_ms: int | None = None,
) -> list[RateChange]:
    """Store each rate (one unit of the currency in the report currency) for `day` (default: today,
    UTC) and the days after it up to the next stored rate, by hand: it replaces any rate of that
    currency and day, fetched or not, and no fetch replaces it. One transaction; the conversions of
    those days are converted again at it (those that waited for a rate too)."""
    if day is None:
        day = day_of(int(time.time() * 1000) if now_ms is None else now_ms)
    valid_from = day_start_ms(day)
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
            changes.append(
                RateChange(code, rate, _reconvert(conn, code, valid_from, rate, report), day.isoformat())
            )
        for change in changes:  # Once all are stored: each waiting cost takes its own day's rate.
            change.costs = convert_unrated_costs(db, report, currency=change.currency)
    return changes


def _reconvert(conn, currency: str, valid_from: int, rate: float, report: str) -> int:
    """The conversions in `currency` recorded while the rate from `valid_from` is in force, converted
    at it; how many changed."""
    start, end = CurrencyStore(conn).rate_span(currency, valid_from)
    rows = CurrencyStore(conn).conversions_between(currency, start, end)
    return _move_conversions(conn, rows, rate, report)


def _convert_waiting(conn, currency: str, rate: float, report: str) -> int:
    """Give the conversions stored without a rate for `currency` their report payout (and revshare
    cost), moving their part of the rollups; how many."""
    rows = [(*row, None) for row in CurrencyStore(conn).unconverted(currency)]
    return _move_conversions(conn, rows, rate, report)


def _move_conversions(conn, rows: list[tuple], rate: float, report: str) -> int:
    """Each (id, click id, campaign id, status, payout, cost, report payout) converted at `rate`, its
    revshare cost with it, moving its part of the rollups; how many changed."""
    currencies = CurrencyStore(conn)
    live = MetaStore(conn).rollups_live()
    rollups = RollupStore(conn)
    delta = RollupDelta()
    campaigns: dict[int, tuple[str, float]] = {}
    changed = 0
    for conversion_id, click_id, campaign_id, status, payout, old_cost, old_report in rows:
        report_payout = round(payout * rate, 6)
        if old_report is not None and math.isclose(old_report, report_payout, rel_tol=1e-12, abs_tol=1e-9):
            continue
        if campaign_id not in campaigns:
            campaigns[campaign_id] = campaign_cost(conn, campaign_id, report)
        model, value = campaigns[campaign_id]
        cost = conversion_cost(model, value, status, report_payout) if model == "revshare" else old_cost
        currencies.convert(conversion_id, report_payout, cost)
        changed += 1
        if live:
            key = rollups.click_key(click_id)
            if key is not None:
                delta.add_conversion(key, conversion_metrics(status, old_report or 0.0, old_cost), -1)
                delta.add_conversion(key, conversion_metrics(status, report_payout, cost))
    delta.apply(conn)
    return changed


def campaign_cost(conn, campaign_id: int, report: str) -> tuple[str, float]:
    """The campaign's cost model and value in the report currency (value 0 while its currency has no
    rate: reports say so); a revshare value is a percentage of the payout, which no rate scales."""
    row = CurrencyStore(conn).campaign_cost(campaign_id)
    if row is None:
        return "cpc", 0.0
    model, value, currency = row
    if model == "revshare":
        return model, value
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
            "day": day_of(valid_from).isoformat(),
            "valid_from": valid_from,
            "source": source,
            "is_manual": source in MANUAL_SOURCES,
        }
        for currency, rate, valid_from, source in rows
    ]


def cross_rates(quoted: dict[str, float], base: str, report: str) -> dict[str, float]:
    """Rates quoted as units per one `base` unit, as the value of one unit of each currency in
    `report` (cross rates through the base)."""
    quoted = {**quoted, base: 1.0} if base else dict(quoted)
    if report not in quoted:
        raise CurrencyError(f"The rate feed has no rate for the report currency {report}.")
    per_base = quoted[report]  # One base unit in the report currency.
    return {code: per_base / value for code, value in quoted.items() if code != report}


def _quoted(pairs: Iterable[tuple[Any, Any]]) -> dict[str, float]:
    quoted: dict[str, float] = {}
    for code, value in pairs:
        if isinstance(code, str) and CODE.match(code):
            try:
                quoted[code] = check_rate(value)
            except CurrencyError:
                continue  # One bad entry does not spoil the others.
    return quoted


def rates_from_feed(data: Any, report: str) -> dict[str, float]:
    """A JSON feed's rates ({"base": "EUR", "rates": {"USD": 1.08, ...}}, the exchangerate.host /
    Frankfurter shape) as the value of one unit of each currency in `report`."""
    if not isinstance(data, dict) or not isinstance(data.get("rates"), dict):
        raise CurrencyError('The rate feed is not of the form {"base": "EUR", "rates": {"USD": 1.08}}.')
    base = str(data.get("base") or data.get("base_code") or "").upper()
    return cross_rates(_quoted(data["rates"].items()), base, report)


# The ECB's reference rates (eurofxref-daily.xml: one day; eurofxref-hist-90d.xml: ninety), per
# https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/html/index.en.html
ECB_NAMESPACE = "{http://www.ecb.int/vocabulary/2002-08-01/eurofxref}"


def rates_from_ecb(body: bytes, report: str) -> dict[date, dict[str, float]]:
    """The ECB's XML (gesmes:Envelope > Cube > Cube time=YYYY-MM-DD > Cube currency= rate=, units per
    one EUR) as each day's value of one unit of each currency in `report`."""
    import xml.etree.ElementTree as ET  # Here: only the feed needs it.

    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:  # No entity tricks: the ECB's file has neither.
        raise CurrencyError("The rate feed's XML declares entities; it is not the ECB's file.")
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise CurrencyError("The rate feed is not well-formed XML.") from None
    days: dict[date, dict[str, float]] = {}
    for cube in root.iter(ECB_NAMESPACE + "Cube"):
        when = cube.get("time")
        if when is None:
            continue
        try:
            day = date.fromisoformat(when)
        except ValueError:
            raise CurrencyError(f"The rate feed's day {when[:20]!r} is not a date.") from None
        quoted = _quoted((child.get("currency"), child.get("rate")) for child in cube)
        days[day] = cross_rates(quoted, "EUR", report)
    if not days:
        raise CurrencyError("The rate feed's XML holds no Cube with a time and rates (the ECB's format).")
    return days


def rates_of_body(body: bytes, report: str, today: date) -> dict[date, dict[str, float]]:
    """A feed's answer, the ECB's XML or a JSON feed (whose "date" says its day; today without one),
    as each day's rates into `report`."""
    if body.lstrip().startswith(b"<"):
        return rates_from_ecb(body, report)
    try:
        data = json.loads(body)
    except ValueError:
        raise CurrencyError("The rate feed is neither the ECB's XML nor JSON.") from None
    rates = rates_from_feed(data, report)
    day = today
    if isinstance(data.get("date"), str):
        try:
            day = date.fromisoformat(data["date"][:10])
        except ValueError:
            raise CurrencyError(f"The rate feed's date {data['date'][:20]!r} is not a date.") from None
    return {day: rates}


def fetch_feed(url: str, timeout: float = FEED_TIMEOUT, max_bytes: int = FEED_MAX_BYTES) -> bytes:
    """The feed's body, read within `timeout` seconds in all and at most `max_bytes` long; CurrencyError
    with one sentence for anything else (no answer, an error status, too slow, too big)."""
    if not url.startswith(("http://", "https://")):
        raise CurrencyError(f"The rate feed URL {url[:80]!r} is not http:// or https://.")
    # Here, not at the top: every CLI command that touches campaigns imports this module, and
    # urllib.request (http.client, email, ssl) would add ~50 ms to each of them.
    import http.client
    import urllib.request

    shown = url[:80]
    request = urllib.request.Request(
        url, headers={"Accept": "application/xml, application/json", "User-Agent": "Lanner"}
    )
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            # A server dripping bytes would pass each read's timeout forever: the deadline is for the whole.
            while size <= max_bytes:
                if time.monotonic() > deadline:
                    raise CurrencyError(f"The rate feed {shown} did not answer within {timeout:g} s.")
                chunk = response.read1(64 * 1024)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except CurrencyError:
        raise
    except OSError as exc:  # URLError, HTTPError (an error status), timeouts, resets.
        raise CurrencyError(f"The rate feed {shown} could not be read: {exc}.") from None
    except (http.client.HTTPException, ValueError) as exc:  # A malformed response.
        raise CurrencyError(f"The rate feed {shown} answered something that is not HTTP: {exc}.") from None
    if size > max_bytes:
        raise CurrencyError(f"The rate feed {shown} is larger than {max_bytes // 1024:,} KB.")
    return b"".join(chunks)


@dataclass
class FetchResult:
    days: list[str]  # The days the feed had rates for, oldest first.
    stored: list[RateChange] = field(default_factory=list)  # New or changed rates.
    kept_manual: int = 0  # Rates the feed had for a currency and day set by hand, which stay.
    costs: int = 0  # Clicks whose cost waited for a rate and has one now.

    def summary(self) -> str:
        """One sentence on what the fetch stored (the CLI's, the panel's)."""
        days = self.days[0] if len(self.days) == 1 else f"{self.days[0]} to {self.days[-1]}"
        converted = sum(change.converted for change in self.stored)
        costs = f"; {self.costs:,} click cost(s) that waited for a rate have one" if self.costs else ""
        return (
            f"Rates for {days}: {len(self.stored)} new or changed, {self.kept_manual} kept as set by hand; "
            f"{converted:,} conversion(s) converted at them{costs}."
        )


def refresh_rates(db: Database, url: str, *, today: date | None = None) -> FetchResult:
    """Read the feed and store each day's rates that are new or changed (source: the feed's host),
    converting that day's conversions at them; a rate set by hand for a currency and day stays."""
    body = fetch_feed(url)
    conn = db.connection()
    report = report_currency(conn)
    days = rates_of_body(body, report, today or day_of(now_ms()))
    return store_fetched(db, days, urlparse(url).hostname or "feed")


def store_fetched(db: Database, days: dict[date, dict[str, float]], source: str) -> FetchResult:
    result = FetchResult([day.isoformat() for day in sorted(days)])
    conn = db.connection()
    with write_tx(db):
        report = report_currency(conn)
        currencies = CurrencyStore(conn)
        for day in sorted(days):
            valid_from = day_start_ms(day)
            for code, value in sorted(days[day].items()):
                rate = round(value, 10)
                stored = currencies.rate_on(code, valid_from)
                if stored is not None and stored[1] in MANUAL_SOURCES:
                    result.kept_manual += 1
                    continue
                if stored is not None and math.isclose(stored[0], rate, rel_tol=1e-9):
                    continue
                if currencies.insert_fetched_rate(code, valid_from, rate, source):
                    converted = _reconvert(conn, code, valid_from, rate, report)
                    result.stored.append(RateChange(code, rate, converted, day.isoformat()))
                else:  # Set by hand between the look and the write.
                    result.kept_manual += 1
        result.costs = convert_unrated_costs(db, report)
    return result
