"""The cost API (/api/v1/costs) of a real `lanner serve`: a batch per zone and per traffic source, set twice
with the same result, refused item by item with nothing set, bounded, and only by those who may."""

from __future__ import annotations

import json

import pytest
from conftest import request
from test_costs import zone_clicks

from models.accounts.apikeys import create_api_key
from models.accounts.users import add_user
from models.admin.services import update_campaign

PASSWORD = "correct horse battery"
RANGE = {"from": "2000-01-01", "to": "2100-01-01"}


def call(server, method: str, path: str, key: str | None, body=None, *, raw: bytes | None = None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["X-Api-Key"] = key
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    status, _, text = request(server.extra["admin_port"], "/api/v1" + path, headers, method, data)
    return status, (json.loads(text) if text else None)


@pytest.fixture
def costs_server(db, settings, make_tracker, start_server):
    """Campaigns north (zones 1, 1, 1 and a bot in zone 1; zone 2) and south (zone 2, twice) of traffic source
    Propeller (zoneid is sub_id_1), a buyer anna owning north only, and the server."""
    from models.conversions.postbacks import read_secret

    zone_clicks(
        db,
        settings,
        make_tracker,
        {
            "north": [("1", False)] * 3 + [("1", True), ("2", False)],
            "south": [("2", False)] * 2,
        },
    )
    add_user(db, "anna", "buyer", PASSWORD)
    update_campaign(db, "north", owner_id=1)
    anna = create_api_key(db, "anna", "write")[1]
    return start_server(workers=1, admin=True), read_secret(db, "api_key"), anna


def zone_costs(server, key) -> dict[str, float]:
    status, report = call(server, "GET", "/reports?group=zoneid&preset=all_time", key)
    assert status == 200, report
    return {row["zoneid"]: row["cost"] for row in report["rows"]}


def total_cost(server, key) -> float:
    return call(server, "GET", "/reports?preset=all_time", key)[1]["total"]["cost"]


def test_a_batch_sets_zone_and_source_costs_and_sending_it_twice_changes_nothing(costs_server):
    server, key, _ = costs_server
    batch = {
        "costs": [
            {"source": "Propeller", **RANGE, "amount": 70},  # 7 clicks, the bot at 0: 6 paid.
            {"campaign": "north", **RANGE, "amount": 0.1, "sub_ids": {"zoneid": "1"}},
            {"campaign": "south", **RANGE, "amount": 5, "sub_ids": {"sub_id_1": "2"}, "currency": "USD"},
        ]
    }
    status, answer = call(server, "POST", "/costs", key, batch)
    assert status == 200, answer
    assert [(s["clicks"], s["unpaid_clicks"], s["per_click"]) for s in answer["items"]] == [
        (6, 1, pytest.approx(11.666667)),
        (3, 1, pytest.approx(0.033333)),
        (2, 0, 2.5),
    ]
    after = zone_costs(server, key)
    # Zone 1 got north's zone cost; zone 2 keeps north's share of the source cost plus south's own.
    assert after == {"1": pytest.approx(0.1, abs=1e-9), "2": pytest.approx(70 / 6 + 5, abs=1e-6)}
    assert round(total_cost(server, key), 2) == round(0.1 + 70 / 6 + 5, 2)
    listed = call(server, "GET", "/costs", key)[1]["items"]
    status, again = call(server, "POST", "/costs", key, batch)
    # The source set covers the three sets before it (its campaigns' too), then the zones are set again.
    assert [item["replaced"] for item in answer["items"]] == [0, 0, 0]
    assert status == 200 and again["items"] == [{**answer["items"][0], "replaced": 3}, *answer["items"][1:]]
    assert zone_costs(server, key) == after
    relisted = call(server, "GET", "/costs", key)[1]["items"]

    def strip(entries):
        return [{k: v for k, v in e.items() if k not in ("id", "created_at")} for e in entries]

    assert strip(relisted) == strip(listed) and len(listed) == 3
    assert [(e["scope"], e["filters"]) for e in relisted] == [
        ("campaign 2", {"sub_id_1": "2"}),
        ("campaign 1", {"sub_id_1": "1"}),
        ("source 1", {}),
    ]


def test_bots_are_charged_only_when_asked(costs_server):
    server, key, _ = costs_server
    item = {"campaign": "north", **RANGE, "amount": 8, "sub_ids": {"zoneid": "1"}}
    assert call(server, "PUT", "/costs", key, item)[1]["clicks"] == 3
    status, spread = call(server, "PUT", "/costs", key, {**item, "include_bots": True})
    assert status == 200 and (spread["clicks"], spread["unpaid_clicks"], spread["per_click"]) == (4, 0, 2.0)
    assert zone_costs(server, key)["1"] == pytest.approx(8.0)


def test_a_batch_with_bad_items_sets_nothing_and_names_each(costs_server):
    server, key, _ = costs_server
    good = {"campaign": "north", **RANGE, "amount": 10}
    bad = [
        good,
        {**good, "campaign": "nowhere"},
        {**good, "sub_ids": {"zone": "1"}},
        {**good, "amount": -1},
        {**good, "sub_ids": {"zoneid": "9"}},
        {**good, "source": "Propeller"},
        {**good, "currency": "GBP"},
        {**good, "from": "2001-02-30"},
        {**good, "amount": "10"},
        "not an object",
    ]
    status, answer = call(server, "POST", "/costs", key, {"costs": bad})
    assert status == 400 and answer["description"] == "9 of the 10 costs are refused; none was set."
    errors = {error["index"]: (error["status"], error["description"]) for error in answer["errors"]}
    assert errors[1] == (404, "There is no campaign 'nowhere'.")
    assert errors[2][0] == 400
    assert errors[2][1].startswith("'zone' is neither sub_id_1 … sub_id_30, source, nor")
    assert errors[3] == (400, "The amount must be a number from 0 to 1,000,000,000,000.")
    assert errors[4] == (
        400,
        "The campaign has no clicks with zoneid=9 in that period; nothing to spread the cost over.",
    )
    assert errors[5] == (400, "Give campaign or source (one of them).")
    assert errors[6][0] == 400 and errors[6][1].startswith("There is no exchange rate for GBP")
    assert errors[7][0] == 400 and set(errors) == set(range(1, 10))
    assert errors[8] == (400, "Field 'amount' must be a finite number.")
    assert errors[9] == (400, "Cost 9 must be a JSON object.")
    assert total_cost(server, key) == 0 and call(server, "GET", "/costs", key)[1]["items"] == []
    status, answer = call(server, "POST", "/costs", key, {"costs": [good] * 101})
    assert status == 400 and answer["description"] == "Send 1 to 100 costs in one batch, not 101."
    status, answer = call(server, "POST", "/costs", key, {"costs": []})
    assert status == 400
    status, _ = call(server, "POST", "/costs", key, raw=b'{"costs": [' + b" " * (1 << 20) + b"]}")
    assert status == 413
    status, answer = call(server, "POST", "/costs", key, raw=b'{"costs": [{"amount": NaN}]}')
    assert status == 400 and answer["title"] == "Bad JSON"


def test_a_buyer_sets_costs_of_own_campaigns_only_and_no_key_sets_none(costs_server):
    server, _, anna = costs_server
    assert call(server, "POST", "/costs", None, {"costs": []})[0] == 401
    status, answer = call(
        server,
        "POST",
        "/costs",
        anna,
        {
            "costs": [
                {"campaign": "north", **RANGE, "amount": 3},
                {"campaign": "south", **RANGE, "amount": 3},
                {"source": "Propeller", **RANGE, "amount": 3},
            ]
        },
    )
    assert status == 400
    assert [(e["index"], e["status"]) for e in answer["errors"]] == [(1, 404), (2, 403)]
    assert answer["errors"][1]["description"] == (
        "anna may not change campaign 2 of traffic source 'Propeller', so may not set the source's cost."
    )
    own = {"costs": [{"campaign": "north", **RANGE, "amount": 3}]}
    status, answer = call(server, "POST", "/costs", anna, own)
    assert status == 200 and answer["items"][0]["clicks"] == 4
    assert [e["scope"] for e in call(server, "GET", "/costs", anna)[1]["items"]] == ["campaign 1"]


def test_the_batch_is_in_the_openapi_document(costs_server):
    server, key, _ = costs_server
    document = call(server, "GET", "/openapi.json", None)[1]
    post = document["paths"]["/api/v1/costs"]["post"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]["properties"]["costs"]
    assert schema["type"] == "array" and {"campaign", "source", "sub_ids", "include_bots"} <= set(
        schema["items"]["properties"]
    )
    assert "get" in document["paths"]["/api/v1/costs"] and "put" in document["paths"]["/api/v1/costs"]


def test_a_key_that_hides_money_neither_sets_nor_lists_costs(costs_server, db):
    from models.accounts.users import update_user

    server, _, anna = costs_server
    update_user(db, "anna", hides_money=True)
    batch = {"costs": [{"campaign": "north", **RANGE, "amount": 3}]}
    assert call(server, "POST", "/costs", anna, batch) == (
        403,
        {"title": "Not allowed", "description": "anna sees no amounts, so may not set costs."},
    )
    assert call(server, "GET", "/costs", anna)[0] == 403
