"""Exchange rates kept current: the ECB's reference rates read from a local fake of its feed, each day's
conversions converted at that day's rate, rates set by hand kept, a failing feed logged and read again.

The fake serves the ECB's documented format (eurofxref-daily.xml / eurofxref-hist-90d.xml: a
gesmes:Envelope whose Cube holds one Cube per day, time="YYYY-MM-DD", each with Cube currency= rate=
entries, units of the currency per one EUR), as described at
https://www.ecb.europa.eu/stats/policy_and_exchange_rates/euro_reference_exchange_rates/html/index.en.html
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from models.admin.services import create_campaign, create_offer
from models.clicks.record import CLICK_COLUMNS, new_subid, ua_hash
from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.currency import (
    CurrencyError,
    day_of,
    day_start_ms,
    fetch_feed,
    list_rates,
    rates_from_ecb,
    set_rates,
)
from models.reporting.reports import ReportQuery, run_report
from models.reporting.rollups import RollupDelta
from models.tables.click import Click

RECEIVED = Received("GET", "198.51.100.9", "test")
DAY_1 = date(2027, 1, 13)  # A Wednesday, a Thursday and a Friday (the ECB publishes on working days).
DAY_2, DAY_3 = DAY_1 + timedelta(days=1), DAY_1 + timedelta(days=2)


def ecb_xml(days: dict[date, dict[str, float]]) -> bytes:
    """The ECB's file, newest day first as it publishes it, with its namespaces and its quoting."""
    cubes = "".join(
        f"\t\t<Cube time='{day.isoformat()}'>\n"
        + "".join(f"\t\t\t<Cube currency='{code}' rate='{rate}'/>\n" for code, rate in rates.items())
        + "\t\t</Cube>\n"
        for day, rates in sorted(days.items(), reverse=True)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01" '
        'xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">\n'
        "\t<gesmes:subject>Reference rates</gesmes:subject>\n"
        "\t<gesmes:Sender>\n\t\t<gesmes:name>European Central Bank</gesmes:name>\n\t</gesmes:Sender>\n"
        f"\t<Cube>\n{cubes}\t</Cube>\n</gesmes:Envelope>\n"
    ).encode()


class FakeEcb:
    """The ECB's rate feed on a free local port: `body`, `status` and `drip` (seconds between single
    bytes, for a server that answers too slowly) say what it answers next; `hits` counts requests."""

    def __init__(self) -> None:
        self.body, self.status, self.drip, self.hits = b"", 200, 0.0, 0
        self.stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.hits += 1
                self.send_response(fake.status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(fake.body)))
                self.end_headers()
                if not fake.drip:
                    self.wfile.write(fake.body)
                    return
                for byte in fake.body:
                    if fake.stop.wait(fake.drip):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/stats/eurofxref/eurofxref-daily.xml"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ecb():
    server = FakeEcb()
    yield server
    server.close()


def at(day: date, hour: int) -> float:
    """Unix seconds of `hour`:00 UTC on `day`."""
    return day_start_ms(day) / 1000 + hour * 3600


def store_click(db, campaign, offer, created_ms: int) -> str:
    """A click on `offer` as the flusher lands it, rollups included."""
    subid = new_subid(created_ms)
    click = Click.create(
        subid=subid,
        created_at=created_ms,
        campaign_id=campaign.id,
        stream_id=1,
        offer_id=offer.id,
        ip="203.0.113.7",
        user_agent="ua",
        ua_hash=ua_hash("ua"),
    )
    delta = RollupDelta()
    stored = Click.get_by_id(click.id)  # Once: not once per column.
    delta.add_clicks([[getattr(stored, column) for column in CLICK_COLUMNS]])
    delta.apply(db.connection())
    return subid


class Shop:
    """Three offers (EUR, GBP, USD) in one campaign; `sell` records a sale of one on a day at an hour."""

    def __init__(self, db, clock) -> None:
        run_deferred(db)  # An empty database: the rollups are live from the start.
        self.db, self.clock = db, clock
        self.offers = {
            code: create_offer(
                db, f"Offer {code}", "https://o.example/?s={subid}", payout=payout, currency=code
            )
            for code, payout in (("EUR", 10.0), ("GBP", 20.0), ("USD", 7.0))
        }
        self.campaign = create_campaign(db, "Shop", "shop", offer_id=self.offers["USD"].id)
        self.recorder = ConversionRecorder(db, park_ms=3_600_000, clock=clock)

    def sell(self, code: str, day: date, hour: int) -> None:
        self.clock.now = at(day, hour)
        subid = store_click(self.db, self.campaign, self.offers[code], int(self.clock() * 1000))
        self.clock.advance(60)  # The sale comes a minute after its click, on the same day.
        outcome = self.recorder.record(parse_postback({"subid": subid, "status": "sale"}), RECEIVED)
        assert outcome.verdict == "created", outcome.detail


def revenue_by_day(db) -> dict[str, float]:
    """Each day's revenue as the rollups and as the raw rows count it (they must agree)."""
    reports = [
        run_report(db, ReportQuery(preset="all_time", group_by=("day",), source=source))
        for source in ("auto", "raw")
    ]
    days = [{row["day"]: row["revenue"] for row in report.rows} for report in reports]
    assert days[0] == pytest.approx(days[1], abs=1e-9)
    assert reports[0].total["revenue"] == pytest.approx(reports[1].total["revenue"], abs=1e-9)
    return days[0]


def test_the_ecb_format_is_read_as_each_days_cross_rates_into_the_report_currency():
    body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8, "JPY": 160.0}, DAY_2: {"USD": 1.1, "GBP": 0.88}})
    days = rates_from_ecb(body, "USD")
    assert days == {
        DAY_1: {"EUR": pytest.approx(1.25), "GBP": pytest.approx(1.5625), "JPY": pytest.approx(1.25 / 160)},
        DAY_2: {"EUR": pytest.approx(1.1), "GBP": pytest.approx(1.25)},
    }
    assert rates_from_ecb(body, "EUR")[DAY_2] == {
        "USD": pytest.approx(1 / 1.1),
        "GBP": pytest.approx(1 / 0.88),
    }
    for bad, message in (
        (b"<html><body>Maintenance</body></html>", "holds no Cube"),
        (b"<gesmes:Envelope", "not well-formed"),
        (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>', "declares entities"),
        (ecb_xml({DAY_1: {"GBP": 0.8}}), "no rate for the report currency USD"),
        (body.replace(b"2027-01-13", b"13.01.2027"), "not a date"),
    ):
        with pytest.raises(CurrencyError, match=message):
            rates_from_ecb(bad, "USD")


def test_reports_with_eur_gbp_and_usd_offers_equal_the_calculation_at_each_days_rate(
    db, settings, clock, ecb
):
    """Sales recorded before any rate, then after each day's; the feed's days and a rate set by hand
    for a day; every day's revenue checked against payouts times that day's rates, worked out here."""
    from workers.runtime.tasks import create_huey

    shop = Shop(db, clock)
    huey = create_huey(settings.replace(exchange_rate_url=ecb.url), immediate=True)
    # Day 1 and day 2: sales with no rate yet (counted, not in revenue).
    shop.sell("EUR", DAY_1, 9)
    shop.sell("GBP", DAY_1, 10)
    shop.sell("USD", DAY_1, 11)
    shop.sell("EUR", DAY_2, 9)
    assert revenue_by_day(db) == {DAY_1.isoformat(): 7.0, DAY_2.isoformat(): 0.0}
    # The ECB's rates for both days (per EUR): day 1 USD 1.25, GBP 0.8; day 2 USD 1.1, GBP 0.88.
    # In USD: day 1 EUR 1.25, GBP 1.5625; day 2 EUR 1.1, GBP 1.25.
    ecb.body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8}, DAY_2: {"USD": 1.1, "GBP": 0.88}})
    huey.refresh_exchange_rates()
    day_1 = 10 * 1.25 + 20 * 1.5625 + 7  # 50.75
    assert revenue_by_day(db) == {
        DAY_1.isoformat(): pytest.approx(day_1),
        DAY_2.isoformat(): pytest.approx(10 * 1.1),
    }
    # More sales on day 2 (its rate is known now) and on day 3 (none published yet: day 2's applies).
    shop.sell("GBP", DAY_2, 15)
    shop.sell("EUR", DAY_3, 9)
    shop.sell("GBP", DAY_3, 10)
    shop.sell("USD", DAY_3, 11)
    day_2 = 10 * 1.1 + 20 * 1.25  # 36
    assert revenue_by_day(db)[DAY_3.isoformat()] == pytest.approx(10 * 1.1 + 20 * 1.25 + 7)
    # GBP set by hand for day 3; then the ECB publishes day 3 with another GBP rate: the hand's stays.
    (manual,) = set_rates(db, {"GBP": 1.3}, day=DAY_3)
    assert manual.converted == 1  # Day 3's GBP sale; day 2's keep day 2's rate.
    ecb.body = ecb_xml({DAY_3: {"USD": 1.2, "GBP": 0.5}})  # GBP would be 2.4 USD.
    huey.refresh_exchange_rates()
    day_3 = 10 * 1.2 + 20 * 1.3 + 7  # 45
    assert revenue_by_day(db) == {
        DAY_1.isoformat(): pytest.approx(day_1),
        DAY_2.isoformat(): pytest.approx(day_2),
        DAY_3.isoformat(): pytest.approx(day_3),
    }
    report = run_report(db, ReportQuery(preset="all_time", group_by=("offer",)))
    by_offer = {row["offer"]: row["revenue"] for row in report.rows}
    assert by_offer == {
        shop.offers["EUR"].id: pytest.approx(10 * 1.25 + 10 * 1.1 + 10 * 1.2),
        shop.offers["GBP"].id: pytest.approx(20 * 1.5625 + 20 * 1.25 + 20 * 1.3),
        shop.offers["USD"].id: pytest.approx(7 * 2),
    }
    assert report.total["revenue"] == pytest.approx(day_1 + day_2 + day_3)
    assert (report.unconverted, report.notes) == ([], [])
    rates = {
        (row["currency"], row["day"]): (row["rate"], row["is_manual"]) for row in list_rates(db, history=True)
    }
    assert rates[("GBP", DAY_3.isoformat())] == (1.3, True)
    assert rates[("EUR", DAY_3.isoformat())] == (pytest.approx(1.2), False)
    assert len(rates) == 6
    # The same feed again changes nothing.
    huey.refresh_exchange_rates()
    assert len(list_rates(db, history=True)) == 6 and ecb.hits == 3


def test_a_feed_that_fails_is_logged_in_one_sentence_keeps_the_rates_and_is_read_again_next_run(
    db, settings, ecb, caplog
):
    from workers.runtime.tasks import create_huey

    set_rates(db, {"EUR": 1.05}, day=DAY_1)
    huey = create_huey(settings.replace(exchange_rate_url=ecb.url), immediate=True)
    huge = ecb_xml({DAY_2: {"USD": 1.1}}) + b"<!--" + b"x" * (1 << 20) + b"-->"
    for status, body, message in (
        (500, b"Internal Server Error", "HTTP Error 500"),
        (200, b"\x00\xff garbage", "neither the ECB's XML nor JSON"),
        (200, b"<html>We are down</html>", "holds no Cube"),
        (200, huge, "larger than 1,024 KB"),
    ):
        ecb.status, ecb.body = status, body
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="workers.runtime.tasks"):
            huey.refresh_exchange_rates()
        (record,) = caplog.records
        assert (
            record.getMessage().startswith("exchange rates not refreshed: ")
            and message in record.getMessage()
        )
        assert "Traceback" not in caplog.text
        assert [(row["currency"], row["rate"]) for row in list_rates(db)] == [("EUR", 1.05)]
    ecb.status, ecb.body = 200, ecb_xml({DAY_2: {"USD": 1.1}})  # The next run: the feed is back.
    huey.refresh_exchange_rates()
    assert [(row["currency"], row["rate"], row["day"]) for row in list_rates(db)] == [
        ("EUR", pytest.approx(1.1), DAY_2.isoformat())
    ]


def test_a_slow_or_silent_feed_is_given_up_on_within_the_timeout(ecb):
    ecb.body, ecb.drip = ecb_xml({DAY_1: {"USD": 1.1}}), 0.2  # A byte every 0.2 s: minutes in all.
    with pytest.raises(CurrencyError, match="did not answer within 1 s"):
        fetch_feed(ecb.url, timeout=1.0)
    with socket.socket() as silent:  # Accepts the connection (the backlog) and never answers.
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        with pytest.raises(CurrencyError, match="could not be read: .*timed out"):
            fetch_feed(f"http://127.0.0.1:{silent.getsockname()[1]}/", timeout=1.0)
    with pytest.raises(CurrencyError, match="not http"):
        fetch_feed("file:///etc/passwd")


def test_a_real_worker_fetches_the_ecb_rates_and_converts_the_sales_that_waited(
    db, clock, ecb, start_consumer
):
    shop = Shop(db, clock)
    shop.sell("GBP", DAY_1, 12)
    ecb.body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8}})
    worker = start_consumer(LANNER_EXCHANGE_RATE_URL=ecb.url)
    deadline = time.monotonic() + 60
    while len(list_rates(db)) < 2 and time.monotonic() < deadline:
        assert worker.process.poll() is None, worker.log
        time.sleep(0.1)
    assert [(row["currency"], row["day"], row["source"]) for row in list_rates(db)] == [
        ("EUR", DAY_1.isoformat(), "127.0.0.1"),
        ("GBP", DAY_1.isoformat(), "127.0.0.1"),
    ], worker.log
    assert revenue_by_day(db) == {DAY_1.isoformat(): pytest.approx(20 * 1.5625)}


def test_rates_by_day_through_the_cli(lanner, env, ecb):
    from conftest import run_lanner

    ecb.body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8}, DAY_2: {"USD": 1.1, "GBP": 0.88}})
    assert lanner("currency", "rate", "set", "GBP", "1.5", "--day", DAY_2.isoformat()).stdout.startswith(
        f"1 GBP = 1.5 USD from {DAY_2.isoformat()}."
    )
    fetched = lanner("currency", "rate", "fetch", "--url", ecb.url).stdout
    assert (
        f"Rates for {DAY_1.isoformat()} to {DAY_2.isoformat()}: 3 new or changed, 1 kept as set by hand"
        in fetched
    )
    csv_lines = lanner("currency", "rate", "list", "--history", "--csv").stdout.splitlines()
    assert csv_lines == [
        "currency,rate,report_currency,day,source,is_manual",
        f"EUR,1.25,USD,{DAY_1.isoformat()},127.0.0.1,False",
        f"EUR,1.1,USD,{DAY_2.isoformat()},127.0.0.1,False",
        f"GBP,1.5625,USD,{DAY_1.isoformat()},127.0.0.1,False",
        f"GBP,1.5,USD,{DAY_2.isoformat()},manual,True",
    ]
    refused = lanner("currency", "rate", "set", "GBP", "1.5", "--day", "yesterday", check=False)
    assert refused.returncode == 1 and "Day 'yesterday' is not a date such as" in refused.stderr
    ecb.status = 503
    failed = lanner("currency", "rate", "fetch", "--url", ecb.url, check=False)
    assert failed.returncode == 1 and "could not be read: HTTP Error 503" in failed.stderr
    assert "Traceback" not in failed.stderr
    unset = run_lanner(
        env, "currency", "rate", "fetch", check=False
    )  # The tests' LANNER_EXCHANGE_RATE_URL is empty.
    assert unset.returncode == 1 and "give the feed with --url" in unset.stderr


def test_the_api_lists_rates_for_everyone_and_lets_only_admins_set_or_fetch_them(env, db, ecb):
    import json

    from conftest import Clock, InProcessApp, request

    from app import create_admin_app
    from models.conversions.postbacks import read_secret
    from routes.v1.auth import Principal, principal_for
    from settings import load_settings

    viewer = "viewer-key-0123456789"

    def find_principal(database, key):
        if key == viewer:
            return Principal(user_id=7, name="viewer 7", role="viewer", can_write=False, hides_money=True)
        return principal_for(database, key)

    settings = load_settings({**env, "LANNER_EXCHANGE_RATE_URL": ecb.url})
    app = InProcessApp(create_admin_app(settings, db=db, find_principal=find_principal), Clock(time.time()))
    admin = read_secret(db, "api_key")

    def call(method, path, key, body=None):
        data = None if body is None else json.dumps(body).encode()
        status, _, text = request(app, "/api/v1" + path, {"X-Api-Key": key}, method, data)
        return status, json.loads(text)

    status, answer = call("PUT", "/currency/rates", admin, {"rates": {"GBP": 1.3}, "day": DAY_1.isoformat()})
    assert status == 200, answer
    assert answer == {
        "currency": "USD",
        "set": [{"currency": "GBP", "rate": 1.3, "day": "2027-01-13", "converted": 0}],
    }
    assert call("PUT", "/currency/rates", viewer, {"rates": {"GBP": 2}})[0] == 403
    assert call("POST", "/currency/rates/fetch", viewer)[0] == 403
    for bad, message in (
        ({"rates": {"GBP": -1}}, "positive number"),
        ({"rates": {"GBP": "1.2"}}, "an object of numbers"),
        ({"rates": {}}, "at least one rate"),
        ({"rates": {"GBP": 1}, "day": "2027-13-01"}, "not a date"),
        ({"rates": {"USD": 1}}, "report currency"),
    ):
        status, answer = call("PUT", "/currency/rates", admin, bad)
        assert status == 400 and message in answer["description"], answer
    ecb.body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8}})
    status, answer = call("POST", "/currency/rates/fetch", admin)
    assert status == 200 and answer["days"] == [DAY_1.isoformat()] and answer["kept_manual"] == 1, answer
    assert [(c["currency"], c["rate"]) for c in answer["stored"]] == [("EUR", pytest.approx(1.25))]
    ecb.status = 500
    status, answer = call("POST", "/currency/rates/fetch", admin)
    assert status == 400 and "HTTP Error 500" in answer["description"]
    status, listed = call("GET", "/currency/rates", viewer)  # Read-only, for everyone (no amounts in it).
    assert status == 200 and listed["currency"] == "USD"
    assert [(r["currency"], r["rate"], r["is_manual"]) for r in listed["items"]] == [
        ("EUR", pytest.approx(1.25), False),
        ("GBP", 1.3, True),
    ]
    # An offer or a cost in a currency without a rate: accepted, with a warning.
    status, offer = call(
        "POST", "/offers", admin, {"name": "CH", "url": "https://o.example/?s={subid}", "currency": "CHF"}
    )
    assert status == 201 and offer["currency"] == "CHF"
    assert offer["warnings"] == [
        "CHF has no exchange rate into the report currency USD: amounts in it are left out of revenue "
        "and cost until one is fetched (`lanner currency rate fetch`) or set "
        "(`lanner currency rate set CHF RATE`)."
    ]
    status, offer = call("PATCH", f"/offers/{offer['id']}", admin, {"currency": "EUR"})
    assert status == 200 and offer["warnings"] == []
    status, campaign = call(
        "POST",
        "/campaigns",
        admin,
        {"name": "C", "alias": "c", "offer_id": offer["id"], "cost_currency": "SEK"},
    )
    assert (
        status == 201 and len(campaign["warnings"]) == 1 and campaign["warnings"][0].startswith("SEK has no")
    )


def test_day_of_and_its_start_agree_at_the_edges_of_a_utc_day():
    start = day_start_ms(DAY_2)
    assert (day_of(start - 1), day_of(start), day_of(start + 86_399_999)) == (DAY_1, DAY_2, DAY_2)


def test_each_report_row_names_its_sales_without_a_rate_by_currency_and_day_in_every_report(
    db, env, clock, lanner
):
    """EUR has rates for days 1 and 3 (day 2, with none of its own, takes day 1's: the rule); GBP has
    none. Each day's and each offer's revenue is the calculation at each day's rate, worked out here,
    and a row holding GBP sales says how many and on which days, in run_report, both APIs (JSON and
    CSV) and the CLI; from one not shown money, the note (it names payouts) is hidden with the rest.
    """
    import csv
    import io
    import json

    from conftest import Clock, InProcessApp, request

    from app import create_admin_app
    from models.conversions.postbacks import read_secret
    from routes.v1.auth import Principal, principal_for
    from settings import load_settings

    shop = Shop(db, clock)
    set_rates(db, {"EUR": 1.25}, day=DAY_1)
    set_rates(db, {"EUR": 1.2}, day=DAY_3)
    for code, day in (("EUR", DAY_1), ("GBP", DAY_1), ("USD", DAY_1), ("EUR", DAY_2), ("USD", DAY_2)):
        shop.sell(code, day, 9)
    shop.sell("EUR", DAY_3, 9)
    shop.sell("GBP", DAY_3, 10)

    def gap(count: int, days: list[date]) -> str:
        return (
            f"{count} conversion{'s' if count != 1 else ''} without an exchange rate into USD, not in "
            f"revenue, profit or ROI: {count} in GBP (payout {20 * count} GBP) on "
            f"{', '.join(day.isoformat() for day in days)} (UTC days)."
        )

    by_day = {
        source: run_report(db, ReportQuery(preset="all_time", group_by=("day",), source=source))
        for source in ("auto", "raw")
    }
    assert by_day["auto"].rows == by_day["raw"].rows and by_day["auto"].total == by_day["raw"].total
    assert {
        row["day"]: (row["sales"], row["revenue"], row["unconverted"], row["unconverted_note"])
        for row in by_day["auto"].rows
    } == {
        DAY_1.isoformat(): (3, pytest.approx(10 * 1.25 + 7), 1, gap(1, [DAY_1])),
        DAY_2.isoformat(): (2, pytest.approx(10 * 1.25 + 7), 0, ""),
        DAY_3.isoformat(): (2, pytest.approx(10 * 1.2), 1, gap(1, [DAY_3])),
    }
    total = by_day["auto"].total
    assert (total["unconverted"], total["unconverted_note"]) == (2, gap(2, [DAY_1, DAY_3]))
    assert by_day["auto"].unconverted == [{"currency": "GBP", "conversions": 2, "payout": 40.0}]
    by_offer = {
        row["offer"]: (row["revenue"], row["unconverted"], row["unconverted_note"])
        for row in run_report(db, ReportQuery(preset="all_time", group_by=("offer",))).rows
    }
    assert by_offer == {
        shop.offers["EUR"].id: (pytest.approx(10 * 1.25 * 2 + 10 * 1.2), 0, ""),
        shop.offers["GBP"].id: (0, 2, gap(2, [DAY_1, DAY_3])),
        shop.offers["USD"].id: (pytest.approx(7 * 2), 0, ""),
    }

    # The APIs, JSON and CSV (the CSV is the streamed report's).
    frugal = "frugal-key-0123456789"  # An admin who is not shown money.

    def find_principal(database, key):
        if key == frugal:
            return Principal(user_id=8, name="admin 8", role="admin", can_write=True, hides_money=True)
        return principal_for(database, key)

    app = InProcessApp(
        create_admin_app(load_settings(env), db=db, find_principal=find_principal), Clock(time.time())
    )
    admin = read_secret(db, "api_key")
    query = "preset=all_time&group=offer"
    for path, key in ((f"/api/v1/reports?{query}", admin), (f"/api/report?{query}", admin)):
        status, _, body = request(app, path, {"X-Api-Key": key})
        assert status == 200, body
        rows = {
            row["offer"]: (row["unconverted"], row["unconverted_note"]) for row in json.loads(body)["rows"]
        }
        assert rows == {offer: gaps[1:] for offer, gaps in by_offer.items()}, path
        status, _, body = request(app, f"{path}&format=csv", {"X-Api-Key": key})
        assert status == 200, body
        rows = {
            int(row["offer"]): (int(row["unconverted"]), row["unconverted_note"])
            for row in csv.DictReader(io.StringIO(body.decode()))
        }
        assert rows == {offer: gaps[1:] for offer, gaps in by_offer.items()}, path
    # The report-wide notes name payouts too: the admin shown money reads them, the frugal one neither in
    # JSON nor in the CSV's X-Lanner-Notes header.
    money_note = "2 conversions in GBP (payout 40 GBP) have no exchange rate into USD"
    status, headers, body = request(app, f"/api/v1/reports?{query}&format=csv", {"X-Api-Key": admin})
    assert money_note in {k.lower(): v for k, v in headers.items()}["x-lanner-notes"], headers
    assert [
        note
        for note in json.loads(request(app, f"/api/v1/reports?{query}", {"X-Api-Key": admin})[2])["notes"]
        if note.startswith(money_note)
    ]
    status, _, body = request(app, f"/api/v1/reports?{query}", {"X-Api-Key": frugal})
    shown = json.loads(body)
    assert status == 200 and shown["rows"] and "unconverted" not in shown, body
    assert not [
        row for row in (*shown["rows"], shown["total"]) if {"unconverted", "unconverted_note"} & set(row)
    ]
    assert not [note for note in shown["notes"] if "payout" in note or "GBP" in note], shown["notes"]
    status, headers, body = request(app, f"/api/v1/reports?{query}&format=csv", {"X-Api-Key": frugal})
    assert status == 200 and b"unconverted" not in body and b"payout" not in body, body
    assert "payout" not in {k.lower(): v for k, v in headers.items()}.get("x-lanner-notes", ""), headers

    # The CLI's table: the count in a column, each row's sentence below it.
    shown = lanner("report", "--preset", "all_time", "--group", "offer").stdout.splitlines()
    header = shown[1].split()
    assert header[-1] == "unconverted"
    counts = {int(line.split()[0]): int(line.split()[-1]) for line in shown[2:5]}
    assert counts == {offer: gaps[1] for offer, gaps in by_offer.items()}
    notes = [line for line in shown if line.startswith("Note: ")]
    assert notes[:2] == [
        f"Note: {shop.offers['GBP'].id}: {gap(2, [DAY_1, DAY_3])}",
        f"Note: total: {gap(2, [DAY_1, DAY_3])}",
    ]
    assert len(notes) == 3 and notes[2].startswith("Note: 2 conversions in GBP (payout 40 GBP) have no")

    # GBP's rate set for day 1: its day 3 sale takes it too (the latest at or before); no row has a gap.
    set_rates(db, {"GBP": 1.5}, day=DAY_1)
    report = run_report(db, ReportQuery(preset="all_time", group_by=("day",)))
    assert [(row["revenue"], row["unconverted"], row["unconverted_note"]) for row in report.rows] == [
        (pytest.approx(10 * 1.25 + 20 * 1.5 + 7), 0, ""),
        (pytest.approx(10 * 1.25 + 7), 0, ""),
        (pytest.approx(10 * 1.2 + 20 * 1.5), 0, ""),
    ]
    assert (report.total["unconverted"], report.total["unconverted_note"], report.notes) == (0, "", [])
