"""Currencies: amounts converted into the report currency when recorded, never summed unconverted.

The rate and report APIs are asked of an in-process app (`start_app`: create_worker_app() here, no socket);
the feed is a real local HTTP server read by a real `lanner worker`.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from models.admin.services import AdminError, create_campaign, create_offer, update_campaign
from models.clicks.record import new_subid, ua_hash
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.conversions.postbacks import ConversionRecorder, PostbackError, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.costs import CostError, spread_cost
from models.reporting.currency import (
    CurrencyError,
    adopt_report_currency,
    list_rates,
    rates_from_feed,
    set_rates,
)
from models.reporting.reports import FALLBACK_NOTE, ReportError, ReportQuery, run_report
from models.tables.click import Click

RECEIVED = Received("GET", "198.51.100.9", "test")


@pytest.fixture
def campaign(db):
    run_deferred(db)  # An empty database: the rollups are live from the start.
    offer = create_offer(db, "Offer", "https://o.example/?s={subid}", payout=5)
    return create_campaign(db, "Mixed", "mixed", offer_id=offer.id)


@pytest.fixture
def recorder(db, clock):
    return ConversionRecorder(db, park_ms=3_600_000, clock=clock)


def store_click(db, campaign, clock) -> str:
    """A click as the flusher lands it, rollups included."""
    from models.clicks.record import CLICK_COLUMNS
    from models.reporting.rollups import RollupDelta

    created = int(clock() * 1000)
    subid = new_subid(created)
    click = Click.create(
        subid=subid,
        created_at=created,
        campaign_id=campaign.id,
        stream_id=1,
        offer_id=1,
        ip="203.0.113.7",
        user_agent="ua",
        ua_hash=ua_hash("ua"),
    )
    delta = RollupDelta()
    stored = Click.get_by_id(click.id)  # Once: not once per column.
    delta.add_clicks([[getattr(stored, column) for column in CLICK_COLUMNS]])
    delta.apply(db.connection())
    clock.advance(60)
    return subid


def post(recorder, subid: str, **params: str):
    return recorder.record(parse_postback({"subid": subid, "tid": "t1", **params}), RECEIVED)


def both_reports(db, **query):
    fast = run_report(db, ReportQuery(preset="all_time", **query))
    raw = run_report(db, ReportQuery(preset="all_time", source="raw", **query))
    assert "raw" not in fast.sources and raw.sources == ["raw"]
    assert (fast.rows, fast.unconverted, fast.notes) == (raw.rows, raw.unconverted, raw.notes)
    return fast


def test_a_eur_and_a_usd_postback_report_in_usd_at_the_stored_rate(db, campaign, recorder, clock):
    set_rates(db, {"EUR": "1.08"})
    post(recorder, store_click(db, campaign, clock), payout="10", currency="EUR")
    post(recorder, store_click(db, campaign, clock), payout="5")  # The offer's currency: USD.
    post(recorder, store_click(db, campaign, clock), payout="2.5", currency="eur", status="lead")
    report = both_reports(db)
    assert report.currency == "USD"
    assert report.total["revenue"] == pytest.approx(15.8, abs=1e-9)
    assert report.total["revenue_pending"] == pytest.approx(2.7, abs=1e-9)
    assert (report.unconverted, report.notes) == ([], [])
    stored = db.execute_sql("SELECT payout, currency, report_payout FROM conversion ORDER BY id").fetchall()
    assert stored == [(10.0, "EUR", pytest.approx(10.8)), (5.0, "USD", 5.0), (2.5, "EUR", pytest.approx(2.7))]
    assert report.as_json()["currency"] == "USD"


def test_a_payout_in_a_currency_without_a_rate_is_listed_not_summed_until_one_is_set(
    db, campaign, recorder, clock
):
    outcome = post(recorder, store_click(db, campaign, clock), payout="20", currency="GBP")
    assert outcome.verdict == "created" and "GBP has no exchange rate" in outcome.detail
    post(recorder, store_click(db, campaign, clock), payout="4", currency="GBP", status="lead")
    post(recorder, store_click(db, campaign, clock), payout="5", currency="USD")
    report = both_reports(db)
    assert report.total["revenue"] == 5.0 and report.total["sales"] == 2  # Counted, not summed.
    assert report.unconverted == [{"currency": "GBP", "conversions": 2, "payout": 24.0}]
    assert len(report.notes) == 1 and "`lanner currency rate set GBP RATE`" in report.notes[0]
    assert report.as_json()["unconverted"] == report.unconverted
    # A status change keeps the conversion waiting; setting the rate converts the waiting ones.
    (change,) = set_rates(db, {"GBP": 1.25})
    assert change.converted == 2
    report = both_reports(db)
    assert report.total["revenue"] == pytest.approx(30.0)
    assert report.total["revenue_pending"] == pytest.approx(5.0)
    assert (report.unconverted, report.notes) == ([], [])


def test_a_conversion_keeps_the_rate_of_its_day_through_status_changes_and_later_days_rates(
    db, campaign, recorder, clock
):
    from datetime import timedelta

    from models.reporting.currency import day_of

    day = day_of(int(clock() * 1000))
    set_rates(db, {"EUR": 1.1}, day=day)
    subid = store_click(db, campaign, clock)
    post(recorder, subid, payout="10", currency="EUR", status="lead")
    (later,) = set_rates(db, {"EUR": 1.2}, day=day + timedelta(days=1))
    assert later.converted == 0  # The conversion's day keeps its own rate.
    post(recorder, subid, payout="10", currency="EUR", status="sale")  # Same amount: same conversion.
    assert both_reports(db).total["revenue"] == pytest.approx(11.0)
    (corrected,) = set_rates(db, {"EUR": 1.3}, day=day)  # The day's rate corrected: converted again.
    assert corrected.converted == 1
    assert both_reports(db).total["revenue"] == pytest.approx(13.0)
    post(recorder, subid, payout="20", currency="EUR", status="rejected")  # A new amount: its day's rate.
    assert db.execute_sql("SELECT report_payout FROM conversion").fetchone()[0] == pytest.approx(26.0)
    assert both_reports(db).total["revenue"] == 0


def test_campaign_costs_in_eur_are_converted_and_warned_of_without_a_rate(
    db, settings, make_tracker, clock, recorder
):
    from models.admin.services import rate_warnings

    create_campaign(db, "Paid", "paid", offer_url="https://o.example/?s={subid}")
    # Accepted...
    campaign = update_campaign(db, "paid", cost_model="cpc", cost_value=0.5, cost_currency="EUR")
    (warning,) = rate_warnings(db, campaign.cost_currency)  # ...and told.
    assert "EUR has no exchange rate into the report currency USD" in warning
    assert "`lanner currency rate set EUR RATE`" in warning
    set_rates(db, {"EUR": 1.1})
    assert rate_warnings(db, "EUR", "USD") == []
    update_campaign(db, "paid", cost_model="cpc", cost_value=0.5, cost_currency="eur")
    run_deferred(db)
    tracker = make_tracker(debounce_seconds=0)
    tracker.refresh()
    subids = [
        tracker.track(tracker.campaign("paid"), Visit(ip=f"198.51.100.{n}", user_agent="UA", cost=cost)).subid
        for n, cost in ((1, 0.0), (2, 0.0), (3, 2.0))  # The last one's URL said cost=2 (EUR).
    ]
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    costs = dict(db.execute_sql("SELECT subid, cost FROM click").fetchall())
    assert [costs[s] for s in subids] == pytest.approx([0.55, 0.55, 2.2])
    assert both_reports(db).total["cost"] == pytest.approx(3.3)
    # Per-conversion costs too: CPA of 3 EUR.
    update_campaign(db, "paid", cost_model="cpa", cost_value=3)
    post(recorder, subids[0], payout="1")
    assert both_reports(db).total["cost"] == pytest.approx(3.3 + 3.3)
    # A spend spread in EUR.
    with pytest.raises(CostError, match="no exchange rate for GBP"):
        spread_cost(db, 1, 0, 1 << 50, 10.0, currency="GBP")
    clicks, per_click = spread_cost(db, 1, 0, 1 << 50, 30.0, currency="EUR")
    assert (clicks, per_click) == (3, pytest.approx(11.0))
    assert both_reports(db).total["cost"] == pytest.approx(33.0 + 3.3)


def test_a_campaign_whose_cost_currency_has_no_rate_lands_its_cost_waiting_and_the_report_says_so(
    db, settings, make_tracker
):
    create_campaign(db, "Old", "old", offer_url="https://o.example/?s={subid}")
    # As a campaign set up before currencies were converted could be.
    db.execute_sql("UPDATE campaign SET cost_model = 'cpc', cost_value = 0.5, cost_currency = 'CHF'")
    run_deferred(db)
    tracker = make_tracker()
    tracker.refresh()
    tracker.track(tracker.campaign("old"), Visit(ip="198.51.100.1", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    report = both_reports(db)
    assert report.total["clicks"] == 1 and report.total["cost"] == 0 and report.total["uncosted"] == 1
    assert report.notes == [
        (
            "Campaign old's costs are in CHF, which has no exchange rate into USD: its clicks' costs wait "
            "in CHF, out of cost, until `lanner currency rate set CHF RATE`."
        )
    ]


def test_postback_and_rate_input_is_checked(db):
    with pytest.raises(PostbackError, match="three-letter code"):
        parse_postback({"subid": new_subid(1_800_000_000_000), "currency": "EURO"})
    with pytest.raises(CurrencyError, match="report currency"):
        set_rates(db, {"USD": 1})
    for bad in ("0", "-1", "nan", "x", "1e12"):
        with pytest.raises(CurrencyError, match="Rate"):
            set_rates(db, {"EUR": bad})
    with pytest.raises(CurrencyError, match="three-letter"):
        set_rates(db, {"EU": 1})
    with pytest.raises(AdminError, match="three-letter"):
        create_offer(db, "Bad", "https://o.example/", currency="dollars")
    assert list_rates(db) == []


def test_the_report_currency_is_adopted_on_an_empty_database_and_fixed_once_it_holds_data(db, clock):
    offer = create_offer(db, "Before", "https://o.example/?s={subid}")
    assert adopt_report_currency(db, "EUR")
    assert create_offer(db, "After", "https://o.example/?s={subid}").currency == "EUR"
    assert type(offer).get_by_id(offer.id).currency == "EUR"  # The default, not a choice.
    assert run_report(db, ReportQuery(preset="all_time", currency="EUR")).currency == "EUR"
    campaign = create_campaign(db, "Data", "data", offer_id=offer.id)
    store_click(db, campaign, clock)
    assert not adopt_report_currency(db, "USD")
    with pytest.raises(ReportError, match="stored amounts are in EUR but LANNER_REPORT_CURRENCY is USD"):
        run_report(db, ReportQuery(preset="all_time", currency="USD"))


def test_feed_rates_are_converted_into_the_report_currency():
    rates = rates_from_feed({"base": "EUR", "rates": {"USD": 1.08, "GBP": 0.86, "bad": 1, "JPY": "x"}}, "USD")
    assert rates == {"EUR": pytest.approx(1.08), "GBP": pytest.approx(1.08 / 0.86)}
    assert rates_from_feed({"base_code": "USD", "rates": {"USD": 1, "EUR": 0.925}}, "USD") == {
        "EUR": pytest.approx(1 / 0.925)
    }
    with pytest.raises(CurrencyError, match="no rate for the report currency USD"):
        rates_from_feed({"base": "EUR", "rates": {"GBP": 0.86}}, "USD")
    with pytest.raises(CurrencyError, match="not of the form"):
        rates_from_feed([1, 2], "USD")


class FeedServer:
    """A local rate feed on a free port; `body` and `status` say what it answers next."""

    def __init__(self) -> None:
        self.body, self.status, self.hits = b"", 200, 0
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                feed.hits += 1
                self.send_response(feed.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(feed.body)))
                self.end_headers()
                self.wfile.write(feed.body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/latest"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def feed():
    server = FeedServer()
    yield server
    server.close()


def test_the_refresh_task_stores_changed_rates_from_the_feed_and_converts_waiting_conversions(
    db, settings, campaign, recorder, clock, feed, caplog
):
    from workers.runtime.tasks import create_huey

    post(recorder, store_click(db, campaign, clock), payout="43", currency="GBP")
    feed.body = json.dumps({"base": "EUR", "rates": {"USD": 1.08, "GBP": 0.86, "JPY": 160.0}}).encode()
    huey = create_huey(settings.replace(exchange_rate_url=feed.url), immediate=True)
    huey.refresh_exchange_rates()
    rates = {row["currency"]: (row["rate"], row["source"]) for row in list_rates(db)}
    assert rates == {
        "EUR": (pytest.approx(1.08), "127.0.0.1"),
        "GBP": (pytest.approx(1.08 / 0.86), "127.0.0.1"),
        "JPY": (pytest.approx(1.08 / 160), "127.0.0.1"),
    }
    assert both_reports(db).total["revenue"] == pytest.approx(43 * 1.08 / 0.86, abs=1e-6)
    huey.refresh_exchange_rates()  # The same rates again: nothing new stored.
    assert len(list_rates(db, history=True)) == 3 and feed.hits == 2
    feed.status, feed.body = 500, b"oops"
    with caplog.at_level(logging.WARNING, logger="workers.runtime.tasks"):
        huey.refresh_exchange_rates()
    assert "exchange rates not refreshed" in caplog.text
    assert len(list_rates(db, history=True)) == 3
    # Without a URL the task does nothing.
    create_huey(settings, immediate=True).refresh_exchange_rates()
    assert feed.hits == 3


def test_currency_commands_set_and_list_rates(lanner, env, feed):
    from conftest import run_lanner

    from models.reporting.currency import day_of, now_ms

    today = day_of(now_ms()).isoformat()
    set_eur = lanner("currency", "rate", "set", "EUR", "1.08")
    assert set_eur.stdout.strip() == f"1 EUR = 1.08 USD from {today}."
    refused = lanner("currency", "rate", "set", "EUR", "cheap", check=False)
    assert refused.returncode != 0 and "Rate 'cheap' is not a number" in refused.stderr
    listed = json.loads(lanner("currency", "rate", "list", "--json").stdout)
    assert [(row["currency"], row["rate"], row["report_currency"]) for row in listed] == [
        ("EUR", 1.08, "USD")
    ]
    csv_lines = lanner("currency", "rate", "list", "--csv").stdout.splitlines()
    assert csv_lines[0] == "currency,rate,report_currency,day,source,is_manual"
    assert csv_lines[1] == f"EUR,1.08,USD,{today},manual,True"
    assert "Report currency: USD" in lanner("currency", "rate", "list").stdout
    feed.body = json.dumps({"base": "USD", "rates": {"GBP": 0.8}}).encode()
    refreshed = run_lanner({**env, "LANNER_EXCHANGE_RATE_URL": feed.url}, "currency", "rate", "fetch")
    assert f"Rates for {today}: 1 new or changed, 0 kept as set by hand" in refreshed.stdout
    assert len(json.loads(lanner("currency", "rate", "list", "--history", "--json").stdout)) == 2
    offer_id = lanner("offer", "create", "EU", "--url", "https://o.example/?s={subid}", "--currency", "eur")
    assert offer_id.stderr == ""  # EUR has a rate: nothing to warn of.
    offers = json.loads(lanner("offer", "list", "--json").stdout)
    assert [(o["id"], o["currency"]) for o in offers] == [(int(offer_id.stdout), "EUR")]
    lanner("offer", "update", offer_id.stdout.strip(), "--currency", "GBP")
    assert json.loads(lanner("offer", "list", "--json").stdout)[0]["currency"] == "GBP"
    report = json.loads(lanner("report", "--preset", "all_time", "--json").stdout)
    # No worker has made the columnar history here: the report says it counted the row store instead.
    notes = [note for note in report["notes"] if not note.startswith(FALLBACK_NOTE)]
    assert (report["currency"], report["unconverted"], notes) == ("USD", [], [])
    assert lanner("report", "--preset", "all_time").stdout.startswith("Amounts in USD.")
    lanner("generate", "clicks", "--count", "100", "--days", "1", "--campaigns", "1", "--seed", "2")
    lanner("db", "run-deferred")
    spread = ("cost", "set", "--campaign", "1", "--from", "2000-01-01", "--to", "2100-01-01")
    spread += ("--amount", "50")
    assert "50 EUR (54 USD) over 100 clicks (0.54 USD each)." in lanner(*spread, "--currency", "EUR").stdout
    assert json.loads(lanner("report", "--preset", "all_time", "--json").stdout)["total"]["cost"] == 54.0
    refused = lanner(*spread, "--currency", "CHF", check=False)
    assert refused.returncode != 0 and "no exchange rate for CHF" in refused.stderr
    offer_ref = offer_id.stdout.strip()
    warned = lanner("campaign", "create", "C", "--alias", "c", "--offer-id", offer_ref, "--cost-currency=CHF")
    assert warned.stderr.startswith("Warning: CHF has no exchange rate into the report currency USD")
    warned = lanner("offer", "update", offer_id.stdout.strip(), "--currency", "JPY")
    assert "Warning: JPY has no exchange rate" in warned.stderr
    lanner("offer", "update", offer_id.stdout.strip(), "--currency", "GBP")
    assert lanner("campaign", "update", "c", "--cost-currency", "USD").stderr == ""
    mismatch = run_lanner({**env, "LANNER_REPORT_CURRENCY": "EUR"}, "report", check=False)
    assert mismatch.returncode != 0 and "stored amounts are in USD" in mismatch.stderr


def test_migrate_adopts_the_report_currency_of_an_empty_database(env):
    from conftest import run_lanner

    environ = {**env, "LANNER_REPORT_CURRENCY": "eur"}
    assert "Report currency: EUR." in run_lanner(environ, "db", "migrate").stdout
    run_lanner(environ, "currency", "rate", "set", "USD", "0.92")
    assert "Report currency: EUR" in run_lanner(environ, "currency", "rate", "list").stdout
    assert run_lanner(environ, "db", "migrate").stdout.strip().endswith("up to date.")


def test_0006_takes_conversions_summed_unconverted_out_of_revenue_until_their_rate_is_set(settings):
    from models.migrations.runner import migrate
    from models.reporting.rollups import RollupDelta, click_key, conversion_metrics, present_tables
    from models.store.database import db as database
    from models.store.database import open_database
    from workers.bench.generate import generate_clicks

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0006_postback_refusals")
        generate_clicks(database, 200, 2, campaigns=2, seed=3, end_ms=1_800_000_000_000)
        run_deferred(database, pause=0)
        # Conversions as the previous release stored them: payouts added to the rollups as they came.
        clicks = database.execute_sql(
            "SELECT id, subid, campaign_id, created_at FROM click LIMIT 3"
        ).fetchall()
        delta = RollupDelta(present_tables(database.connection()))  # The tables of that release.
        for (click_id, subid, campaign_id, created_at), (payout, currency) in zip(
            clicks, [(10.0, "USD"), (20.0, "EUR"), (4.0, "USD")], strict=True
        ):
            database.execute_sql(
                "INSERT INTO conversion (subid, status, original_status, payout, currency, click_id, "
                "campaign_id, "
                "click_created_at, created_at, updated_at) VALUES (?, 'sale', 'sale', ?, ?, ?, ?, ?, ?, ?)",
                (subid, payout, currency, click_id, campaign_id, created_at, created_at, created_at),
            )
            delta.add_conversion(
                click_key(database.connection(), click_id), conversion_metrics("sale", payout, 0)
            )
        delta.apply(database.connection())
        assert (
            database.execute_sql("SELECT SUM(revenue) FROM rollup_day").fetchone()[0] == 34.0
        )  # EUR as USD.
        assert migrate(database, up_to="0007_currencies") == ["0007_currencies"]
        report = both_reports(database)
        assert report.total["revenue"] == 14.0 and report.total["sales"] == 3
        assert report.unconverted == [{"currency": "EUR", "conversions": 1, "payout": 20.0}]
        migrate(database)  # The rate comes with this release's code, which writes every cube.
        set_rates(database, {"EUR": 1.1})
        assert both_reports(database).total["revenue"] == pytest.approx(36.0)
    finally:
        database.close()


def test_the_rate_api_sets_and_lists_rates_with_the_key_and_the_report_api_names_the_currency(
    start_app, lanner
):
    from conftest import request

    # In-process (create_worker_app() here, no socket): the admin worker's resources, served by this app
    # as with LANNER_ADMIN_BIND=off.
    app = start_app(LANNER_ADMIN_BIND="off")
    key = lanner("api", "key", "show").stdout.strip()
    path = "/api/currency/rates"
    assert request(app, path)[0] == 403
    assert request(app, path, {"X-Api-Key": "nope"}, method="POST", body=b'{"rates": {"EUR": 1}}')[0] == 403
    status, _, body = request(app, path, {"X-Api-Key": key}, method="POST", body=b'{"rates": {"EUR": 1.08}}')
    assert status == 200
    assert json.loads(body) == {"currency": "USD", "set": [{"currency": "EUR", "rate": 1.08, "converted": 0}]}
    status, _, body = request(app, path, {"X-Api-Key": key}, method="PUT", body=b'{"rates": {"GBP": "1.27"}}')
    assert status == 200
    listed = json.loads(request(app, path, {"X-Api-Key": key})[2])
    assert listed["currency"] == "USD"
    assert [(row["currency"], row["rate"], row["source"]) for row in listed["rates"]] == [
        ("EUR", 1.08, "api"),
        ("GBP", 1.27, "api"),
    ]
    for bad, message in (
        (b"not json", b"of the form"),
        (b'{"rates": {"EUR": -1}}', b"positive number"),
        (b'{"rates": {"USD": 2}}', b"report currency"),
    ):
        status, _, body = request(app, path, {"X-Api-Key": key}, method="POST", body=bad)
        assert status == 400 and message in body, body
    report = json.loads(request(app, "/api/report?preset=today", {"X-Api-Key": key})[2])
    # No worker has made the columnar history here: the report says it counted the row store instead.
    notes = [note for note in report["notes"] if not note.startswith(FALLBACK_NOTE)]
    assert (report["currency"], report["unconverted"], notes) == ("USD", [], [])
    csv_headers = request(app, "/api/report?preset=today&format=csv", {"X-Api-Key": key})[1]
    assert csv_headers["x-lanner-currency"] == "USD"
    # A postback with a currency that is not a code is refused at the edge.
    postback_key = lanner("postback", "key", "show").stdout.split()[1]
    status, _, body = request(
        app, f"/postback?key={postback_key}&subid={new_subid(1_800_000_000_000)}&currency=EURO"
    )
    assert status == 400 and b"three-letter code" in body


def test_relabel_says_the_stored_amounts_were_another_currency_all_along(db, campaign, recorder, clock, env):
    from conftest import run_lanner

    post(recorder, store_click(db, campaign, clock), payout="5")  # The offer's: USD, as every default said.
    post(recorder, store_click(db, campaign, clock), payout="7", currency="EUR")  # Waits for a rate.
    environ = {**env, "LANNER_REPORT_CURRENCY": "EUR"}
    refused = run_lanner(environ, "report", check=False)
    assert refused.returncode != 0 and "stored amounts are in USD" in refused.stderr
    out = run_lanner(environ, "currency", "relabel", "eur", "--yes").stdout
    assert "Report currency: EUR; 2 conversion(s)" in out
    report = both_reports(db, currency="EUR")
    assert (report.currency, report.total["revenue"], report.unconverted) == ("EUR", 12.0, [])
    assert json.loads(run_lanner(environ, "offer", "list", "--json").stdout)[0]["currency"] == "EUR"
    set_rates(db, {"USD": 0.93})
    again = run_lanner(environ, "currency", "relabel", "GBP", "--yes", check=False)
    assert again.returncode != 0 and "Exchange rates are stored" in again.stderr


def test_a_real_worker_reads_the_rate_feed_when_it_starts(db, start_consumer, feed):
    import time

    feed.body = json.dumps({"base": "USD", "rates": {"USD": 1, "EUR": 0.8}}).encode()
    worker = start_consumer(LANNER_EXCHANGE_RATE_URL=feed.url)
    deadline = time.monotonic() + 30
    while not list_rates(db) and time.monotonic() < deadline:
        assert worker.process.poll() is None, worker.log
        time.sleep(0.1)
    assert [(row["currency"], row["rate"]) for row in list_rates(db)] == [("EUR", 1.25)], worker.log


def test_a_revshare_percentage_is_not_scaled_by_its_campaigns_cost_currency_rate(
    db, campaign, recorder, clock
):
    """50 % of each sale's payout, in a campaign whose cost currency is EUR: the share is a share at any
    EUR rate (it was once multiplied by it, 62.5 % at 1.25), and without one (it was 0 %)."""
    update_campaign(db, "mixed", cost_model="revshare", cost_value=50, cost_currency="EUR")
    post(recorder, store_click(db, campaign, clock), payout="8", currency="GBP")  # Waits for GBP's rate.
    post(recorder, store_click(db, campaign, clock), payout="7")  # USD: no EUR rate yet.
    assert both_reports(db).total["cost"] == pytest.approx(7 * 0.5)
    set_rates(db, {"EUR": 1.25})
    post(recorder, store_click(db, campaign, clock), payout="10", currency="EUR")
    assert both_reports(db).total["cost"] == pytest.approx(7 * 0.5 + 10 * 1.25 * 0.5)
    set_rates(db, {"GBP": 1.5})  # The waiting sale converted, its share with it.
    report = both_reports(db)
    assert report.total["revenue"] == pytest.approx(8 * 1.5 + 7 + 10 * 1.25)
    assert report.total["cost"] == pytest.approx((8 * 1.5 + 7 + 10 * 1.25) * 0.5)
