"""A campaign's costs page (/panel/campaigns/{id}/costs) in process, on a real migrated database: a spend
spread over the period's clicks (or one source value's), what the report then says, the audit entry,
the refusals, and who may see and set costs; and the admin API's cost route under the same rules."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import test_panel
from test_panel import get, log_in, own, post
from test_panel_editor import token_of

# The panel fixtures of tests/test_panel.py, shared (assigned, not imported: the names are parameters below).
make_panel, panel, users, clicks = (
    test_panel.make_panel,
    test_panel.panel,
    test_panel.users,
    test_panel.clicks,
)
COSTS = "/panel/campaigns/1/costs"


def period() -> dict[str, str]:
    today = datetime.now(UTC).date()
    return {"from": str(today - timedelta(days=2)), "to": str(today)}


def report_total(db, group="campaign", **filters):
    from routes.api import report_from_parameters

    params = {"group": group, "preset": "last_7_days", **{f"f.{k}": v for k, v in filters.items()}}
    return report_from_parameters(db, params, "USD")


def set_cost(app, cookie, **fields):
    token = token_of(get(app, COSTS, cookie)[2])
    return post(
        app, COSTS, {"csrf_token": token, "currency": "", "dimension": "", "value": "", **fields}, cookie
    )


def test_an_admin_spreads_a_spend_over_the_period_s_clicks_and_the_report_and_audit_say_so(
    panel, users, clicks, db
):
    from models.accounts.audit import list_audit

    cookie = log_in(panel)
    before = report_total(db, campaign="1").total
    other = report_total(db, campaign="2").total["cost"]
    status, _, page = set_cost(panel, cookie, amount="1,250.50", **period())
    page = page.decode()
    assert status == 200, page
    assert f"spread over {before['clicks']:,} clicks" in page and "1,250.50 USD" in page
    after = report_total(db, campaign="1").total
    assert after["cost"] == pytest.approx(1250.50) and after["clicks"] == before["clicks"]
    assert report_total(db, campaign="2").total["cost"] == pytest.approx(other)  # Not campaign 2's.
    entry = list_audit(db, entity="campaign", entity_id=1)[0]
    assert (entry.actor, entry.action) == ("anna", "cost")
    assert entry.new_values["amount"] == 1250.5 and entry.new_values["clicks"] == before["clicks"]
    status, _, again = set_cost(
        panel, cookie, amount="1250.50", **period()
    )  # The same form twice: the same costs.
    assert status == 200 and report_total(db, campaign="1").total["cost"] == pytest.approx(1250.50)
    days = get(panel, COSTS, cookie)[2]  # The days table shows each day's share.
    for row in report_total(db, group="day", campaign="1").rows:
        assert (
            f'<td>{row["day"]}</td><td class="n">{row["clicks"]:,}</td><td class="n">{row["cost"]:,.2f} USD'
            in days
        )


def test_a_spend_for_one_source_value_costs_only_its_clicks(panel, users, clicks, db):
    cookie = log_in(panel)
    rows = report_total(db, group="source", campaign="1").rows
    source = max(rows, key=lambda row: row["clicks"])
    status, _, page = set_cost(
        panel, cookie, amount="12", dimension="source", value=source["source"], **period()
    )
    assert status == 200, page
    assert f"spread over {source['clicks']:,} clicks with source" in page.decode()
    costs = {row["source"]: row["cost"] for row in report_total(db, group="source", campaign="1").rows}
    assert costs[source["source"]] == pytest.approx(12.0) and sum(costs.values()) == pytest.approx(12.0)


@pytest.mark.parametrize(
    "fields, sentence",
    [
        ({"amount": "lots"}, "The amount is a number such as 125.50, not &#39;lots&#39;."),
        ({"amount": "-5"}, "The amount must be a number from 0"),
        ({"amount": "5", "dimension": "source"}, "Give the source value the cost is for."),
        (
            {"amount": "5", "dimension": "country", "value": "US"},
            "A cost is for the whole campaign, or for one",
        ),
        (
            {"amount": "5", "from": "2001-01-01", "to": "2001-01-02"},
            "The campaign has no clicks in that period",
        ),
        ({"amount": "5", "from": "yesterday"}, "yesterday"),
        ({"amount": "5", "currency": "XYZ"}, "XYZ"),
    ],
)
def test_a_refused_spend_answers_400_with_the_sentence_and_keeps_what_was_typed(
    panel, users, clicks, db, fields, sentence
):
    cookie = log_in(panel)
    status, _, page = set_cost(panel, cookie, **{**period(), **fields})
    page = page.decode()
    assert status == 400 and sentence in page
    assert f'value="{fields["amount"]}"' in page
    assert report_total(db, campaign="1").total["cost"] == 0


def test_a_value_with_markup_comes_back_escaped(panel, users, clicks):
    cookie = log_in(panel)
    status, _, page = set_cost(
        panel, cookie, amount="5", dimension="sub_id_1", value="<script>x</script>", **period()
    )
    assert status == 400
    assert b"<script>x" not in page and b"&lt;script&gt;x&lt;/script&gt;" in page


def test_who_may_see_and_set_costs(panel, users, clicks, db):
    from test_panel import own

    from models.accounts.sharing import share_campaign

    own(db, 1, users["bert"])
    share_campaign(db, 1, "vera", may_edit=False)
    viewer = log_in(panel, "vera")
    status, _, page = get(panel, COSTS, viewer)
    assert status == 200 and 'id="cost-form"' not in page  # Reads the days, offered no form.
    token = token_of(get(panel, "/panel/campaigns", viewer)[2])
    assert post(panel, COSTS, {"csrf_token": token, "amount": "5", **period()}, viewer)[0] == 403
    bert = log_in(panel, "bert")
    assert set_cost(panel, bert, amount="7", **period())[0] == 200
    assert get(panel, "/panel/campaigns/2/costs", bert)[0] == 404  # Not his.
    frugal = log_in(panel, "frugal")
    own(db, 2, users["frugal"])
    assert get(panel, "/panel/campaigns/2/costs", frugal)[0] == 403  # Sees no amounts.
    assert "/costs" not in get(panel, "/panel/campaigns/2", frugal)[2]
    assert post(panel, COSTS, {"amount": "5", **period()}, log_in(panel))[0] == 403  # No CSRF token.
    assert report_total(db, campaign="1").total["cost"] == pytest.approx(7.0)


def test_the_api_refuses_costs_to_a_user_who_hides_money_and_audits_its_actor(env, db, clicks):
    import time

    from conftest import Clock, InProcessApp
    from test_api_v1 import call

    from app import create_admin_app
    from models.accounts.apikeys import create_api_key
    from models.accounts.audit import list_audit
    from models.accounts.users import add_user
    from settings import load_settings

    add_user(db, "anna", "admin", "anna-password-123")
    add_user(db, "frugal", "admin", "frugal-password-123", hides_money=True)
    keys = {name: create_api_key(db, name, "write")[1] for name in ("anna", "frugal")}
    app = InProcessApp(create_admin_app(load_settings(env), db=db), Clock(time.time()))
    body = {"campaign": "1", **period(), "amount": 9.0}
    status, answer = call(app, "PUT", "/costs", keys["frugal"], body)
    assert status == 403 and answer["description"] == "frugal sees no amounts, so may not set costs."
    assert call(app, "PUT", "/costs", keys["anna"], body)[0] == 200
    entry = list_audit(db, entity="campaign", entity_id=1)[0]
    assert (entry.actor, entry.action, entry.new_values["amount"]) == ("anna", "cost", 9.0)


# -- zones and traffic sources ------------------------------------------------------------------------

ALL_TIME = {"from": "2000-01-01", "to": "2099-12-31"}


def all_time_cost(db) -> float:
    from routes.api import report_from_parameters

    return report_from_parameters(db, {"group": "campaign", "preset": "all_time"}, "USD").total["cost"]


def zone_fields(app, cookie, path, **fields):
    token = token_of(get(app, path, cookie)[2])
    base = {"csrf_token": token, "currency": "", "dimension": "", "value": "", "scope": "campaign"}
    return post(app, path, {**base, **ALL_TIME, **fields}, cookie)


def test_the_form_costs_one_zone_or_the_whole_source_and_lists_the_costs_set(
    panel, users, db, settings, make_tracker
):
    from test_costs import zone_clicks

    zone_clicks(
        db,
        settings,
        make_tracker,
        {
            "north": [("1", False)] * 2 + [("1", True), ("2", False)],
            "south": [("2", False)],
        },
    )
    cookie = log_in(panel)
    html = get(panel, COSTS, cookie)[2]
    assert 'name="sub.zoneid"' in html and 'name="sub.site"' in html  # The source's parameters.
    assert "the clicks of every campaign of Propeller" in html and "No spend set yet" in html
    status, _, page = zone_fields(panel, cookie, COSTS, amount="6", **{"sub.zoneid": "1"})
    page = page.decode()
    assert status == 200, page
    assert "spread over 2 clicks with zoneid=1" in page and "1 bot clicks at 0" in page
    costs = db.execute_sql("SELECT sub_id_1, is_bot, cost FROM click ORDER BY id").fetchall()
    assert [cost for zone, is_bot, cost in costs if zone == "1"] == [3.0, 3.0, 0.0]
    status, _, page = zone_fields(
        panel, cookie, COSTS, amount="9", scope="source", include_bots="1", **{"sub.zoneid": "2"}
    )
    page = page.decode()
    assert status == 200 and "spread over 2 clicks of Propeller's campaigns with zoneid=2" in page
    rows = re.findall(r"<tr><td>(this campaign|every campaign of Propeller)</td><td>([^<]*)</td>", page)
    assert rows == [("every campaign of Propeller", "zoneid=2"), ("this campaign", "zoneid=1")]
    assert all_time_cost(db) == pytest.approx(15.0)
    # A source cost needs every campaign of the source: bert owns north only.
    own(db, 1, users["bert"])
    bert = log_in(panel, "bert")
    status, _, page = zone_fields(panel, bert, COSTS, amount="1", scope="source")
    assert status == 400
    assert "You may not change campaign 2 of traffic source &#39;Propeller&#39;" in page.decode()
    status, _, page = zone_fields(panel, bert, COSTS, amount="1", **{"sub.zoneid": "7"})
    assert status == 400 and "The campaign has no clicks with zoneid=7 in that period" in page.decode()
    assert all_time_cost(db) == pytest.approx(15.0)
