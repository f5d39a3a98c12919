"""Status changes per network (`network.status_changes`, `network.rebills`): the changes networks really
send, accepted where the network's settings say so and refused where not, each one's before → after
kept on the conversion, and the reports (rollups and raw rows alike) moving with every change. On both
backends; postbacks through the recorder the postback route calls, and one through a real server."""

from __future__ import annotations

import json

import pytest
from conftest import request
from test_panel import get, log_in, make_panel, panel, users  # noqa: F401

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

PAYOUT = 12.5


@pytest.fixture
def recorder(db):
    from models.conversions.postbacks import ConversionRecorder
    from models.migrations.deferred import run_deferred
    from models.tables.offer import Offer
    from workers.bench.generate import generate_clicks

    assert generate_clicks(db, 20, 1, campaigns=1, seed=3) == 20
    run_deferred(db)  # The rollups live: every change below moves them.
    Offer.update(payout=PAYOUT, currency="USD").execute()
    return ConversionRecorder(db, park_ms=3_600_000)


@pytest.fixture
def subids(db, recorder) -> list[str]:
    """The fixture clicks' subids (after `recorder` made them)."""
    from models.tables.click import Click

    return [row.subid for row in Click.select(Click.subid).order_by(Click.id)]


def network(db, alias: str, **rules: str):
    from models.conversions.networks import create_network

    return create_network(db, alias.title(), alias=alias, subid_macro="{sub1}", **rules)


def send(recorder, subid: str, status: str, *, tid: str = "t1", network: str = "", payout: str | None = None):
    from models.conversions.postbacks import Received, parse_postback

    params = {"subid": subid, "status": status, "tid": tid, "from": network}
    if payout is not None:
        params["payout"] = payout
    return recorder.record(parse_postback(params), Received("GET", "192.0.2.1", "/postback"))


def stored(subid: str, tid: str = "t1"):
    from models.tables.conversion import Conversion

    return Conversion.get((Conversion.subid == subid) & (Conversion.tid == tid))


def totals(db) -> dict:
    """The report's conversion numbers, from the rollups and from the raw rows: they must agree."""
    from models.reporting.reports import ReportQuery, run_report

    shown = ("leads", "sales", "rejected", "trash", "rebills", "revenue")
    answers = []
    for source in ("auto", "raw"):
        total = run_report(db, ReportQuery(preset="all_time", source=source)).total
        answers.append({name: round(total[name], 6) for name in shown})
    assert answers[0] == answers[1], answers
    return answers[0]


def counts(leads=0, sales=0, rejected=0, trash=0, rebills=0, revenue=0.0) -> dict:
    return {
        "leads": leads,
        "sales": sales,
        "rejected": rejected,
        "trash": trash,
        "rebills": rebills,
        "revenue": revenue,
    }


def test_a_forward_network_refuses_a_rejected_conversion_approved_again(db, recorder, subids):
    network(db, "strictnet")
    subid = subids[0]
    assert send(recorder, subid, "approved", network="strictnet").verdict == "created"
    assert send(recorder, subid, "rejected", network="strictnet").verdict == "updated"
    assert totals(db) == counts(rejected=1)
    refused = send(recorder, subid, "approved", network="strictnet")
    assert (refused.verdict, refused.detail) == (
        "refused",
        "A rejected conversion cannot become sale (the network's status changes are `forward`).",
    )
    conversion = stored(subid)
    assert (conversion.status, conversion.previous_status, conversion.original_status) == (
        "rejected",
        "sale",
        "sale",
    )
    assert totals(db) == counts(rejected=1)


def test_a_network_that_corrects_itself_moves_a_conversion_every_way_and_the_revenue_with_it(
    db, recorder, subids, panel, users
):
    network(db, "fixnet", status_changes="any")
    subid = subids[0]
    steps = [
        ("pending", "lead", "", counts(leads=1)),
        ("declined", "rejected", "lead", counts(rejected=1)),
        ("approved", "sale", "rejected", counts(sales=1, revenue=PAYOUT)),
        ("chargeback", "rejected", "sale", counts(rejected=1)),
        ("hold", "lead", "rejected", counts(leads=1)),
        ("trash", "trash", "lead", counts(trash=1)),
        ("approved", "sale", "trash", counts(sales=1, revenue=PAYOUT)),
    ]
    for word, status, before, expected in steps:
        outcome = send(recorder, subid, word, network="fixnet")
        assert outcome.verdict == ("created" if not before else "updated"), (word, outcome.detail)
        conversion = stored(subid)
        assert (conversion.status, conversion.previous_status, conversion.original_status) == (
            status,
            before,
            "lead",
        )
        assert totals(db) == expected, word
    assert send(recorder, subid, "approved", network="fixnet").verdict == "duplicate"
    # The conversion log shows the last change as before → after.
    from models.reporting.conversionlog import LogFilter, list_conversions

    [row] = list_conversions(db, LogFilter(subid=subid))
    assert (row["previous_status"], row["status"]) == ("trash", "sale")
    html = get(panel, "/panel/conversions", log_in(panel))[2]
    assert '<small class="change" title="Its last change; first lead">trash → sale</small>' in html


def test_the_rules_are_the_offer_s_network_s_when_the_postback_names_none(db, recorder, subids):
    from models.tables.offer import Offer

    fixnet = network(db, "fixnet", status_changes="any")
    Offer.update(network_id=fixnet.id).execute()
    first, second = subids[:2]
    send(recorder, first, "rejected")
    assert send(recorder, first, "approved").verdict == "updated"
    # A postback naming another network (forward) is held to that one's rules.
    network(db, "strictnet")
    send(recorder, second, "rejected", network="strictnet")
    assert send(recorder, second, "approved", network="strictnet").verdict == "refused"
    assert totals(db) == counts(sales=1, rejected=1, revenue=PAYOUT)


def test_a_conversion_zeroed_when_rejected_is_paid_its_offer_s_payout_when_approved_again(
    db, recorder, subids
):
    network(db, "fixnet", status_changes="any")
    zeroed, kept, told = subids[:3]
    for subid in (zeroed, kept, told):
        send(recorder, subid, "approved", network="fixnet", payout="20")
    send(recorder, zeroed, "rejected", network="fixnet", payout="0")
    send(recorder, kept, "rejected", network="fixnet")
    send(recorder, told, "rejected", network="fixnet", payout="0")
    assert totals(db) == counts(rejected=3)
    send(recorder, zeroed, "approved", network="fixnet")
    send(recorder, kept, "approved", network="fixnet")
    send(recorder, told, "approved", network="fixnet", payout="7")
    assert [stored(s).payout for s in (zeroed, kept, told)] == [PAYOUT, 20.0, 7.0]
    assert totals(db) == counts(sales=3, revenue=PAYOUT + 20 + 7)


def test_a_network_that_sends_rebills_as_repeat_sales_gets_a_rebill_per_new_tid(db, recorder, subids):
    network(db, "subsnet", rebills="repeat_sale", status_changes="any")
    network(db, "plainnet")
    subid, other = subids[:2]
    assert send(recorder, subid, "approved", tid="order-1", network="subsnet").verdict == "created"
    second = send(recorder, subid, "approved", tid="order-2", network="subsnet")
    assert second.verdict == "created" and second.status == "rebill"
    assert "rebills as repeat sales" in second.detail
    assert send(recorder, subid, "approved", tid="order-2", network="subsnet").verdict == "duplicate"
    assert (stored(subid, "order-1").status, stored(subid, "order-2").status) == ("sale", "rebill")
    assert totals(db) == counts(sales=1, rebills=1, revenue=2 * PAYOUT)
    # A refunded rebill approved again is a rebill again, not a second sale.
    send(recorder, subid, "refund", tid="order-2", network="subsnet")
    assert totals(db) == counts(sales=1, rejected=1, revenue=PAYOUT)
    assert send(recorder, subid, "approved", tid="order-2", network="subsnet").verdict == "updated"
    assert (stored(subid, "order-2").status, stored(subid, "order-2").previous_status) == (
        "rebill",
        "rejected",
    )
    assert totals(db) == counts(sales=1, rebills=1, revenue=2 * PAYOUT)
    # A network without the setting: a second approved tid is a second sale, as before.
    send(recorder, other, "approved", tid="a", network="plainnet")
    assert send(recorder, other, "approved", tid="b", network="plainnet").status == "sale"
    assert totals(db) == counts(sales=3, rebills=1, revenue=4 * PAYOUT)


def test_a_manual_payout_correction_keeps_the_last_status_change(db, recorder, subids):
    from models.conversions.manual import correct_conversion

    network(db, "fixnet", status_changes="any")
    send(recorder, subids[0], "rejected", network="fixnet")
    send(recorder, subids[0], "approved", network="fixnet")
    conversion = stored(subids[0])
    correct_conversion(db, conversion.id, payout=30.0)
    assert (stored(subids[0]).previous_status, stored(subids[0]).payout) == ("rejected", 30.0)
    correct_conversion(db, conversion.id, status="lead")
    assert stored(subids[0]).previous_status == "sale"
    assert totals(db) == counts(leads=1)


def test_a_network_s_rules_are_checked_and_set_from_the_cli_and_the_api(db, lanner, panel):
    from models.conversions.networks import get_network

    refused = lanner(
        "network", "create", "Odd", "--subid-macro", "{s}", "--status-changes", "some", check=False
    )
    assert refused.returncode != 0 and "'some' is not one of 'forward', 'any'" in refused.stderr
    lanner("network", "create", "Subs", "--subid-macro", "{s}", "--rebills", "repeat_sale")
    lanner("network", "update", "subs", "--status-changes", "any")
    subs = get_network(db, "subs")
    assert (subs.status_changes, subs.rebills) == ("any", "repeat_sale")
    shown = json.loads(lanner("network", "show", "subs", "--json").stdout)
    assert (shown["status_changes"], shown["rebills"]) == ("any", "repeat_sale")
    from models.conversions.postbacks import read_secret

    key = {"X-Api-Key": read_secret(db, "api_key"), "Content-Type": "application/json"}
    status, _, body = request(panel, "/api/v1/networks/subs", key, "PATCH", b'{"rebills": "sometimes"}')
    assert status == 400 and b"rebills is one of own_tid, repeat_sale" in body


def test_a_rejected_conversion_approved_again_over_a_real_server(db, start_server, lanner, subids, recorder):
    from models.conversions.postbacks import read_secret

    network(db, "fixnet", status_changes="any")
    live = start_server(workers=1)
    key = read_secret(db, "postback_key")
    for word, verdict in (("approved", "created"), ("rejected", "updated"), ("approved", "updated")):
        status, _, body = request(
            live.port, f"/postback?key={key}&subid={subids[0]}&status={word}&tid=x&from=fixnet"
        )
        assert status == 200 and json.loads(body)["verdict"] == verdict, body
    assert (stored(subids[0], "x").status, stored(subids[0], "x").previous_status) == ("sale", "rejected")
    assert totals(db) == counts(sales=1, revenue=PAYOUT)
