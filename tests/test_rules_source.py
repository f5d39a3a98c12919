"""Rules that pause a zone at its traffic source: PropellerAds' excluded zones (the local fake in
tests/spend_fakes.py enforcing the endpoint's contract) through a spend connection's mapping, by the real
client code; refusals, a missing connection, undo, the limit, and the CLI and API."""

from __future__ import annotations

import functools
import time

import pytest
from conftest import Clock, InProcessApp
from platform_fakes import Scripted
from spend_fakes import PROPELLER_TOKEN, SpendFake
from test_api_v1 import call, key  # noqa: F401 (fixtures)
from test_panel import PASSWORD, csrf_token, get, log_in
from test_panel import post as post_bytes
from test_rules import CLICKED_AT, HOUR, land, push, push_campaign  # noqa: F401 (fixtures)

from models.optimisation.labels import scope_of, set_labels
from models.optimisation.rules import (
    RuleConflict,
    RuleError,
    create_rule,
    rule_log,
    run_rules,
    undo_action,
)
from models.optimisation.sourcepause import SourceAccess
from models.optimisation.sourcezones import http_send
from models.reporting.spend.connections import create_spend_connection, map_ids, set_spend_status
from models.tables.optimisation import RuleAction

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

PLATFORM_CAMPAIGN = "5001"
NOW = CLICKED_AT + 2 * HOUR


@pytest.fixture(scope="module")
def fake():
    server = SpendFake()
    yield server
    server.close()


@pytest.fixture
def propeller(fake):
    fake.reset()
    fake.excluded[PLATFORM_CAMPAIGN] = [99]  # A zone the buyer excluded by hand stays excluded.
    return fake


@pytest.fixture
def access(propeller):
    # A short timeout so that the slow-source case costs a second, not the production twenty.
    return SourceAccess({"propellerads": propeller.base}, functools.partial(http_send, timeout=1.0))


def connect(db, *, mapped: bool = True) -> None:
    create_spend_connection(
        db, "propeller", "propellerads", source="PropellerAds", credentials={"api_token": PROPELLER_TOKEN},
        parameter="zoneid",
    )  # fmt: skip
    if mapped:
        map_ids(db, "propeller", {PLATFORM_CAMPAIGN: "push"})


def source_rule(db, **changes):
    fields = dict(
        campaigns=["push"],
        dimension="zoneid",
        window="6h",
        conditions=["cost >= 5 and conversions = 0"],
        action="pause_at_source",
        max_actions=1,
    )
    return create_rule(db, "cut at source", **{**fields, **changes})


def states() -> list[tuple[str, str]]:
    return [(a.target, a.state) for a in RuleAction.select().order_by(RuleAction.target)]


def test_a_zone_is_skipped_until_a_connection_maps_its_campaign_then_excluded_once_and_undone(
    db, push, propeller, access
):
    with pytest.raises(RuleError, match="pause_at_source is for zones"):
        source_rule(db, dimension="offer")
    rule = source_rule(db)
    assert len(rule.warnings) == 1 and "no active PropellerAds spend connection" in rule.warnings[0]
    skipped = run_rules(db, now=NOW, sources=access)
    assert skipped.acted == [] and "no active PropellerAds spend connection" in skipped.skipped[0][1]
    assert states() == [("10", "skipped")]
    connect(db, mapped=False)
    assert "maps a platform campaign onto 'push'" in run_rules(db, now=NOW, sources=access).skipped[0][1]
    map_ids(db, "propeller", {PLATFORM_CAMPAIGN: "push"})
    set_spend_status(db, "propeller", "paused")
    assert run_rules(db, now=NOW, sources=access).acted == [] and propeller.paths == []
    set_spend_status(db, "propeller", "active")

    first = run_rules(db, now=NOW, sources=access)
    assert [a.target for a in first.acted] == ["10"] and first.plans[0].held_back == 1
    assert states() == [("10", "done")]
    assert propeller.paths[0] == f"/v5/adv/campaigns/{PLATFORM_CAMPAIGN}/targeting/exclude/zone"
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [10, 99]  # The union: the hand-made 99 stays.
    second = run_rules(db, now=NOW, sources=access)
    assert [a.target for a in second.acted] == ["6"]
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [6, 10, 99]
    third = run_rules(db, now=NOW, sources=access)
    assert third.acted == [] and third.plans[0].done_before == 2
    assert len(propeller.puts) == 2  # Never twice for the same zone.

    log = {row["target"]: row for row in rule_log(db)}
    assert log["10"]["state"] == "done" and log["10"]["action"] == "pause_at_source"
    assert log["10"]["answer"].startswith(f"campaign {PLATFORM_CAMPAIGN}: 200")
    assert log["10"]["numbers"]["cost"] == 10.0

    undone = undo_action(db, log["10"]["id"], sources=access)
    assert undone["answer"].startswith(f"campaign {PLATFORM_CAMPAIGN}: 200")
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [6, 99]
    with pytest.raises(RuleConflict, match="undone already"):
        undo_action(db, log["10"]["id"], sources=access)
    assert run_rules(db, now=NOW, sources=access).acted == []  # The user overruled it: it stays.
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [6, 99]


def test_a_refusing_slow_or_garbled_source_leaves_a_failed_row_and_the_next_run_does_it(
    db, push, propeller, access
):
    connect(db)
    source_rule(db)
    for answer, said in (
        (Scripted(500, b'{"message": "Server Error"}'), "answered 500 for campaign 5001: Server Error"),
        (Scripted(200, b"<html>maintenance</html>"), "not a list of zone ids"),
        (Scripted(200, b'{"zone": [99]}', hang=3), "did not answer"),
        (Scripted(401, b'{"message": "Unauthenticated."}'), "answered 401"),
    ):
        propeller.script(answer)
        result = run_rules(db, now=NOW, sources=access)
        assert result.acted == [] and said in result.skipped[0][1]
        assert states() == [("10", "failed")] and said in RuleAction.get().answer
        assert propeller.excluded[PLATFORM_CAMPAIGN] == [99] and propeller.puts == []
    # The read answered, the write refused: nothing is recorded as done, the next run sends it again.
    propeller.script(Scripted(200, b'{"zone": [99]}'), Scripted(422, b'{"errors": {"zone": ["bad"]}}'))
    assert run_rules(db, now=NOW, sources=access).acted == []
    assert states() == [("10", "failed")] and "answered 422" in RuleAction.get().answer
    with pytest.raises(RuleConflict, match="was failed, not done: nothing to undo"):
        undo_action(db, RuleAction.get().id, sources=access)
    # Two platform campaigns; the second refuses after the first took the zone: the undo knows both.
    map_ids(db, "propeller", {"5002": "push"})
    propeller.excluded.pop("5002", None)
    assert "answered 404 for campaign 5002" in run_rules(db, now=NOW, sources=access).skipped[0][1]
    assert states() == [("10", "failed")] and propeller.excluded[PLATFORM_CAMPAIGN] == [10, 99]
    propeller.excluded["5002"] = []
    done = run_rules(db, now=NOW, sources=access)
    assert [a.target for a in done.acted] == ["10"] and states() == [("10", "done")]
    assert propeller.excluded == {PLATFORM_CAMPAIGN: [10, 99], "5002": [10]}
    assert "campaign 5001: excluded already; campaign 5002: 200" in RuleAction.get().answer
    propeller.script(Scripted(503, b"down"))
    action_id = RuleAction.get().id
    with pytest.raises(RuleConflict, match="answered 503.*Nothing undone"):
        undo_action(db, action_id, sources=access)
    assert RuleAction.get().undone_at is None and propeller.excluded["5002"] == [10]
    undo_action(db, action_id, sources=access)
    assert propeller.excluded == {PLATFORM_CAMPAIGN: [99], "5002": []}


def test_the_cli_the_api_and_the_panel_make_run_and_undo_source_pauses_and_push_a_blacklist(
    lanner, env, db, push, propeller
):
    from app import create_admin_app
    from models.conversions.postbacks import read_secret
    from settings import load_settings

    env["LANNER_PROPELLERADS_API_URL"] = propeller.base
    land(db, push.id, 8, 9.0, at=time.time() - HOUR, sub_id_1="42")
    rule = ["rule", "add", "cut", "--campaign", "push", "--for", "zoneid", "--window", "6h"]
    added = lanner(*rule, "--when", "cost >= 5", "--then", "pause_at_source")
    assert "pause_at_source each zoneid" in added.stdout
    assert "Warning: Traffic source 'PropellerAds' has no active PropellerAds" in added.stderr
    connect(db)
    assert "1 action(s)" in lanner("rule", "run").stdout
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [42, 99]
    log = rule_log(db)
    assert [(row["target"], row["state"]) for row in log] == [("42", "done")]
    undone = lanner("rule", "undo", str(log[0]["id"])).stdout
    assert "Undone: pause_at_source of 42 (the source answered: campaign 5001: 200" in undone
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [99]

    admin = InProcessApp(create_admin_app(load_settings(env), db=db), Clock(time.time()))
    api_key = read_secret(db, "api_key")
    land(db, push.id, 8, 20.0, at=time.time() - HOUR, sub_id_1="43")
    body = {
        "name": "api cut",
        "campaigns": ["push"],
        "dimension": "zoneid",
        "window": "6h",
        "conditions": ["cost >= 15"],
        "action": "pause_at_source",
    }
    status, made = call(admin, "POST", "/rules", api_key, body)
    assert status == 201 and made["action"] == "pause_at_source" and "warnings" not in made
    status, ran = call(admin, "POST", "/rules/api cut/run", api_key)
    assert status == 200 and [a["target"] for a in ran["actions"]] == ["43"]
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [43, 99]
    status, log = call(admin, "GET", "/rule-actions?rule=api%20cut", api_key)
    assert [(row["target"], row["state"]) for row in log["items"]] == [("43", "done")]
    propeller.script(Scripted(502, b"bad gateway"))
    status, refused = call(admin, "POST", f"/rule-actions/{log['items'][0]['id']}/undo", api_key)
    assert status == 409 and "answered 502" in refused["description"]
    assert call(admin, "POST", f"/rule-actions/{log['items'][0]['id']}/undo", api_key)[0] == 200
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [99]

    # A blacklist pushed to the source: its zone ids, in a union with what the campaign excludes.
    set_labels(db, scope_of(db, "push", None, "zoneid"), ["43", "7", "site-x"], "blacklist")
    pushed = lanner("label", "export", "--campaign", "push", "--param", "zoneid", "--push")
    assert f"Campaign {PLATFORM_CAMPAIGN}: 2 zone(s) added: 200" in pushed.stdout
    assert "Not zone ids, not sent: site-x" in pushed.stderr
    assert propeller.excluded[PLATFORM_CAMPAIGN] == [7, 43, 99]
    push_body = {"campaign": "push", "param": "zoneid"}
    status, again = call(admin, "POST", "/labels/push", api_key, push_body)
    assert status == 200 and again["campaigns"] == {PLATFORM_CAMPAIGN: "excluded all of them already"}
    propeller.script(Scripted(429, b'{"message": "Too Many Attempts."}', {"Retry-After": "60"}))
    status, refused = call(admin, "POST", "/labels/push", api_key, push_body)
    assert status == 409 and "answered 429 for campaign 5001: Too Many Attempts." in refused["description"]
    status, refused = call(
        admin, "POST", "/labels/push", api_key, {"source": "PropellerAds", "param": "sub_id_2"}
    )
    assert status == 409 and "nothing to push the blacklist to" in refused["description"]
    assert len(propeller.puts) == 5  # Two rule actions, two undos, one push: a push again sent nothing.

    # The panel: the action in the form, the warning on the rule's page, the answer in its log, undo.
    from models.accounts.users import add_user

    add_user(db, "anna", "admin", PASSWORD)
    cookie = log_in(admin)
    form = get(admin, "/panel/rules", cookie)[2]
    assert "<option>pause_at_source</option>" in form
    set_spend_status(db, "propeller", "paused")
    fields = {
        "name": "panel cut",
        "campaigns": "push",
        "dimension": "zoneid",
        "window": "6h",
        "conditions": "cost >= 25",
        "action": "pause_at_source",
        "max_actions": "1",
        "timezone": "UTC",
        "notify": "",
        "csrf_token": csrf_token(form),
    }
    status, headers, _ = post_bytes(admin, "/panel/rules", fields, cookie=cookie)
    assert status == 303
    page = get(admin, headers["location"], cookie)[2]
    assert "no active PropellerAds spend connection to pause zones through" in page
    set_spend_status(db, "propeller", "active")
    land(db, push.id, 8, 30.0, at=time.time() - HOUR, sub_id_1="44")
    assert [a.target for a in run_one_rule(db, "panel cut", propeller).acted] == ["44"]
    page = get(admin, headers["location"].partition("?")[0], cookie)[2]
    assert "no active PropellerAds" not in page and f"campaign {PLATFORM_CAMPAIGN}: 200" in page
    action_id = RuleAction.get(RuleAction.target == "44").id
    undo = {"do": "undo", "action_id": str(action_id), "csrf_token": csrf_token(page)}
    status, _, _ = post_bytes(admin, headers["location"].partition("?")[0], undo, cookie=cookie)
    assert status == 303 and propeller.excluded[PLATFORM_CAMPAIGN] == [7, 43, 99]


def run_one_rule(db, name: str, propeller: SpendFake):
    from models.optimisation.rules import RuleSpec, get_rule

    return run_rules(
        db, [RuleSpec.of(get_rule(db, name))], sources=SourceAccess({"propellerads": propeller.base})
    )
