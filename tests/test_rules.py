"""Automation rules over numbers built by hand: what they match, their limit, log, undo, and refusals."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from conftest import wait_until
from test_api_v1 import VIEWER_KEY, admin, call, key  # noqa: F401 (fixtures)

from models.admin.services import create_campaign, create_offer, update_stream
from models.admin.sources import create_source
from models.clicks.record import CLICK_COLUMNS, new_subid, ua_hash
from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.errors import LannerError
from models.migrations.deferred import run_deferred
from models.optimisation.labels import export_labels, scope_of, set_labels
from models.optimisation.rules import (
    RuleConflict,
    RuleError,
    RuleSpec,
    create_rule,
    get_rule,
    plan_rules,
    rule_log,
    run_rules,
    set_rule_enabled,
    undo_action,
)
from models.reporting.rollups import RollupDelta
from models.tables.campaign import Stream, StreamOffer
from models.tables.click import Click
from models.tables.optimisation import RuleAction

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

RECEIVED = Received("GET", "127.0.0.1", "test")
CLICKED_AT = datetime(2026, 11, 20, 10, 0, tzinfo=UTC).timestamp()  # A Friday morning, UTC.
HOUR = 3600
LAST_ONE = "pausing it would leave a stream nothing to send to, or it is paused already"


def land(
    db, campaign_id: int, clicks: int, cost: float, *, at: float = CLICKED_AT, sales: int = 0, **columns
):
    """`clicks` clicks at `at` costing `cost` in all, `sales` of them converted at 20.00 each."""
    delta = RollupDelta()
    subids = []
    columns = {"stream_id": 1, "offer_id": 1, **columns}
    with db.atomic():  # One commit for them all, as a flush lands them.
        for n in range(clicks):
            created = int(at * 1000) + n
            click = Click.create(
                subid=new_subid(created),
                created_at=created,
                campaign_id=campaign_id,
                ip="203.0.113.7",
                user_agent="ua",
                ua_hash=ua_hash("ua"),
                cost=round(cost / clicks, 6),
                **columns,
            )
            subids.append(click.subid)
            stored = Click.get_by_id(click.id)  # Once: not once per column.
            delta.add_clicks([[getattr(stored, column) for column in CLICK_COLUMNS]])
        delta.apply(db.connection())
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    for subid in subids[:sales]:
        recorder.record(
            parse_postback({"subid": subid, "status": "sale", "payout": "20", "tid": "t"}), RECEIVED
        )


@pytest.fixture
def push_campaign(db):
    """Campaign push from the source PropellerAds (zoneid is sub_id_1), no clicks yet."""
    run_deferred(db)
    source = create_source(db, "PropellerAds", "zoneid={zoneid}")
    return create_campaign(db, "Push", "push", offer_url="https://o.example/?s={subid}", source=source.name)


@pytest.fixture
def push(db, push_campaign):
    """Campaign push (zoneid is sub_id_1): zone 10 spent 10.00 on 20 clicks and 6 spent 6.00, neither
    converting; 7 spent 6.00 and made a sale; 3 spent 1.00."""
    campaign = push_campaign
    stream_id = Stream.get(Stream.campaign == campaign.id).id
    offer_id = StreamOffer.get(StreamOffer.stream == stream_id).offer_id
    for zone, clicks, cost, sales in (
        ("10", 20, 10.0, 0),
        ("6", 10, 6.0, 0),
        ("7", 10, 6.0, 1),
        ("3", 5, 1.0, 0),
    ):
        land(
            db, campaign.id, clicks, cost, sales=sales, sub_id_1=zone, stream_id=stream_id, offer_id=offer_id
        )
    return campaign


def zone_rule(db, **changes) -> RuleSpec:
    fields = dict(
        campaigns=["push"],
        dimension="zoneid",
        window="6h",
        conditions=["cost >= 5 and conversions = 0"],
        action="blacklist",
        max_actions=1,
    )
    return create_rule(db, changes.pop("name", "cut zones"), **{**fields, **changes})


def test_a_rule_acts_on_the_worst_match_first_within_its_limit_never_twice_and_an_undo_sticks(db, push):
    rule = zone_rule(db)
    now = CLICKED_AT + 2 * HOUR
    (dry,) = plan_rules(db, now=now)
    assert [
        (a.target, a.numbers["cost"], a.numbers["clicks"], a.numbers["conversions"]) for a in dry.actions
    ] == [("10", 10.0, 20, 0)]
    assert dry.held_back == 1 and dry.done_before == 0
    assert RuleAction.select().count() == 0  # The dry run changed nothing.

    first = run_rules(db, now=now)
    assert [a.target for a in first.acted] == ["10"]
    scope = scope_of(db, "push", None, "zoneid")
    assert export_labels(db, scope, "blacklist", "plain") == "10\n"
    second = run_rules(db, now=now)
    assert [a.target for a in second.acted] == ["6"] and second.plans[0].done_before == 1
    third = run_rules(db, now=now)
    assert third.acted == [] and third.plans[0].done_before == 2 and third.plans[0].held_back == 0

    log = rule_log(db)
    assert [(row["target"], row["rule"], row["action"]) for row in log] == [
        ("6", "cut zones", "blacklist"),
        ("10", "cut zones", "blacklist"),
    ]
    assert log[1]["reason"] == "cost >= 5 and conversions = 0 over 6h"
    assert log[1]["numbers"]["cost"] == 10.0 and log[1]["numbers"]["roi"] == -100.0

    undone = undo_action(db, log[1]["id"])
    assert undone["target"] == "10" and export_labels(db, scope, "blacklist", "plain") == "6\n"
    with pytest.raises(RuleConflict, match="undone already"):
        undo_action(db, log[1]["id"])
    assert run_rules(db, now=now).acted == []  # The user overruled it: it stays unlabelled.
    assert rule_log(db)[1]["undone_at"] is not None
    assert get_rule(db, rule.id).last_run_at == int(now * 1000)


def test_a_rule_leaves_a_label_set_by_hand_and_its_window_can_end_before_today(db, push):
    set_labels(db, scope_of(db, "push", None, "sub_id_1"), ["10"], "whitelist")
    zone_rule(db, max_actions=5)
    (plan,) = plan_rules(db, now=CLICKED_AT + HOUR)
    assert [a.target for a in plan.actions] == ["6"] and plan.unchanged == 1  # Whitelisted by hand.
    late = zone_rule(db, name="yesterday's", window="1d", exclude_today=True, timezone="Europe/Berlin")
    # On the day of the clicks, a window before today holds none of them; the next day, it holds them all.
    assert plan_rules(db, [late], now=CLICKED_AT + HOUR)[0].actions == []
    next_day = plan_rules(db, [late], now=CLICKED_AT + 20 * HOUR)[0]
    assert sorted(a.target for a in next_day.actions) == ["6"] and next_day.unchanged == 1
    # The same rule's window counts in its own timezone: 00:30 in Berlin on the 21st is 23:30 UTC on the 20th.
    berlin_midnight = datetime(2026, 11, 20, 23, 30, tzinfo=UTC).timestamp()
    assert [a.target for a in plan_rules(db, [late], now=berlin_midnight)[0].actions] == ["6"]


def test_a_pause_rule_sets_an_offers_weight_to_0_but_never_a_streams_last_and_undo_restores_it(db, push):
    stream = Stream.get(Stream.campaign == push.id)
    first_offer = StreamOffer.get(StreamOffer.stream == stream.id).offer_id
    second = create_offer(db, "Second", "https://two.example/?s={subid}")
    update_stream(db, stream.id, offers=[(first_offer, 70), (second.id, 30)])
    land(db, push.id, 10, 8.0, stream_id=stream.id, offer_id=second.id, sub_id_1="99")
    rule = create_rule(
        db,
        "pause offers",
        campaigns=["push"],
        dimension="offer",
        window="6h",
        conditions=["cost >= 5", "cr < 5"],  # Both offers match: the first spent 23.00, cr 2.2 %.
        action="pause",
        max_actions=5,
    )
    result = run_rules(db, now=CLICKED_AT + HOUR)
    assert [a.target for a in result.acted] == [str(first_offer)]
    # The second is now the stream's last offer with a weight: pausing it would leave the stream nothing.
    assert [(planned.target, why) for planned, why in result.skipped] == [(str(second.id), LAST_ONE)]
    assert run_rules(db, now=CLICKED_AT + HOUR).plans[0].unchanged == 1
    weights = {
        link.offer_id: link.weight for link in StreamOffer.select().where(StreamOffer.stream == stream.id)
    }
    assert weights == {first_offer: 0, second.id: 30}
    (action,) = rule_log(db, rule_ref=str(rule.id))
    undo_action(db, action["id"])
    weights = {
        link.offer_id: link.weight for link in StreamOffer.select().where(StreamOffer.stream == stream.id)
    }
    assert weights == {first_offer: 70, second.id: 30}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"conditions": ["conversions = 0", "cr > 1"]}, "can never hold: cr is 0 where conversions are 0"),
        ({"conditions": ["roi < -150"]}, "roi is never below -100"),
        ({"conditions": ["cost = 0", "roi < 0"]}, "roi has no value where cost is 0"),
        ({"conditions": ["clicks > 5", "clicks < 6"]}, "no number meets them all"),
        ({"conditions": ["ctr > 1"]}, "A condition's metric is one of"),
        ({"conditions": ["cost >> 1"]}, "not a condition of the form"),
        ({"window": "2w"}, "A window is hours or days"),
        ({"window": "91d"}, "1 hour to 90 days"),
        ({"dimension": "placement"}, "Campaign 'push' has no 'placement'"),
        ({"action": "pause"}, "cannot be paused in Lanner"),
        ({"dimension": "offer"}, "pauses them"),
        ({"max_actions": 0}, "1 to 1000 times a run"),
        ({"campaigns": ["nope"]}, "There is no campaign 'nope'"),
        ({"timezone": "Mars/Olympus"}, "Unknown timezone"),
    ],
)
def test_a_rule_that_cannot_work_is_refused_at_creation_in_one_sentence(db, push_campaign, changes, message):
    with pytest.raises(LannerError, match=message):  # RuleError, or the campaign lookup's own.
        zone_rule(db, **changes)
    assert list(RuleAction.select()) == [] and plan_rules(db) == []


def test_a_rule_that_would_undo_another_is_refused_until_that_one_is_disabled(db, push):
    zone_rule(db)
    with pytest.raises(RuleConflict, match="each would undo the other"):
        zone_rule(db, name="keep zones", dimension="sub_id_1", action="whitelist")
    other_slot = zone_rule(db, name="keep sub 2", dimension="sub_id_2", action="whitelist")
    set_rule_enabled(db, "cut zones", False)
    keep = zone_rule(db, name="keep zones", dimension="sub_id_1", action="whitelist")
    with pytest.raises(RuleConflict, match="each would undo the other"):
        set_rule_enabled(db, "cut zones", True)
    assert {spec.name for spec in (other_slot, keep)} == {"keep sub 2", "keep zones"}
    with pytest.raises(RuleError, match="named 'keep zones' already"):
        zone_rule(db, name="keep zones")


def test_the_cli_adds_dry_runs_runs_logs_and_undoes_a_rule(lanner, db, push):
    # The CLI runs at the real now: these clicks are in its window, the fixture's long before it.
    land(db, push.id, 8, 9.0, at=time.time() - HOUR, sub_id_1="42")
    refused = lanner(
        "rule",
        "add",
        "x",
        "--campaign",
        "push",
        "--for",
        "zoneid",
        "--window",
        "6h",
        "--when",
        "conversions = 0 and cr > 1",
        "--then",
        "blacklist",
        check=False,
    )
    assert refused.returncode == 1 and "can never hold" in refused.stderr
    added = lanner(
        "rule",
        "add",
        "cut",
        "--campaign",
        "push",
        "--for",
        "zoneid",
        "--window",
        "6h",
        "--when",
        "cost >= 5",
        "--when",
        "conversions = 0",
        "--then",
        "blacklist",
    ).stdout
    assert "blacklist each zoneid where cost >= 5 and conversions = 0 over 6h" in added
    dry = json.loads(lanner("rule", "dry-run", "--json").stdout)
    assert [(a["target"], a["numbers"]["clicks"]) for a in dry[0]["actions"]] == [("42", 8)]
    assert "1 action(s)" in lanner("rule", "run").stdout
    log = json.loads(lanner("rule", "log", "--json").stdout)
    assert [(row["target"], row["action"]) for row in log] == [("42", "blacklist")]
    assert lanner("label", "export", "--campaign", "push", "--param", "zoneid").stdout == "42\n"
    assert "Undone: blacklist of 42." in lanner("rule", "undo", str(log[0]["id"])).stdout
    assert lanner("label", "export", "--campaign", "push", "--param", "zoneid").stdout == ""


def test_lanner_worker_runs_the_rules_as_it_starts(db, push, start_consumer):
    land(db, push.id, 8, 9.0, at=time.time() - HOUR, sub_id_1="77")
    zone_rule(db, max_actions=5)
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    wait_until(
        lambda: RuleAction.select().where(RuleAction.target == "77").count() == 1,
        120,
        "the worker's rule run",
        lambda: consumer.log,
    )


def test_the_api_makes_tries_runs_and_undoes_a_rule_and_only_an_admin_changes_rules(admin, key, db, push):
    land(db, push.id, 8, 9.0, at=time.time() - HOUR, sub_id_1="55")
    body = {
        "name": "cut",
        "campaigns": ["push"],
        "dimension": "zoneid",
        "window": "6h",
        "conditions": ["cost >= 5", "conversions = 0"],
        "action": "blacklist",
    }
    status, error = call(admin, "POST", "/rules", key, {**body, "conditions": ["roi < -150"]})
    assert status == 400 and "roi is never below -100" in error["description"]
    assert call(admin, "POST", "/rules", VIEWER_KEY, body)[0] == 403
    assert call(admin, "GET", "/rules", VIEWER_KEY)[0] == 403
    status, made = call(admin, "POST", "/rules", key, body)
    assert status == 201 and made["conditions"] == ["cost >= 5", "conversions = 0"]
    assert call(admin, "POST", "/rules", key, body)[0] == 409
    status, dry = call(admin, "GET", "/rules/cut/run", key)
    assert status == 200 and [a["target"] for a in dry["actions"]] == ["55"]
    assert RuleAction.select().count() == 0
    status, ran = call(admin, "POST", "/rules/cut/run", key)
    assert status == 200 and [a["target"] for a in ran["actions"]] == ["55"] and ran["skipped"] == []
    status, log = call(admin, "GET", "/rule-actions?rule=cut", key)
    assert [(row["target"], row["numbers"]["clicks"]) for row in log["items"]] == [("55", 8)]
    assert call(admin, "POST", f"/rule-actions/{log['items'][0]['id']}/undo", key)[0] == 200
    assert call(admin, "POST", f"/rule-actions/{log['items'][0]['id']}/undo", key)[0] == 409
    assert call(admin, "POST", "/rule-actions/999/undo", key)[0] == 404
    assert call(admin, "PATCH", "/rules/cut", key, {"enabled": False})[1]["enabled"] is False
    assert call(admin, "GET", "/rules/nope", key)[0] == 404
    assert call(admin, "DELETE", "/rules/cut", key)[0] == 200


def test_one_rule_judges_a_parameter_its_campaigns_sources_keep_in_different_slots(db, push):
    rich = create_source(db, "RichAds", "site={site}&zoneid={zoneid}")  # zoneid is sub_id_2 here.
    other = create_campaign(db, "Rich", "rich", offer_url="https://o.example/?s={subid}", source=rich.name)
    land(db, other.id, 12, 9.0, sub_id_1="site-a", sub_id_2="88")
    zone_rule(db, campaigns=["push", "rich"], max_actions=5)
    (plan,) = plan_rules(db, now=CLICKED_AT + HOUR)
    assert plan.error is None
    assert [(a.campaign_id, a.target) for a in plan.actions] == [
        (push.id, "10"),
        (other.id, "88"),
        (push.id, "6"),
    ]
    run_rules(db, now=CLICKED_AT + HOUR)
    assert export_labels(db, scope_of(db, "rich", None, "zoneid"), "blacklist", "plain") == "88\n"
    assert export_labels(db, scope_of(db, "rich", None, "sub_id_1"), "blacklist", "plain") == ""


def test_a_rule_alone_reads_only_the_rows_that_may_meet_it_and_plans_as_when_it_shares_a_report(
    db, settings, push
):
    """A rule whose report no other rule shares keeps, inside DuckDB, only the zones that may meet its
    conditions (models/reporting/reportpage.py `where`); its plan is the one made from every row (the
    report two rules share), with a condition right on the zones' cost (6.00 >= 6)."""
    from models.reporting.history import HistoryFiles, append_history

    files = HistoryFiles.of(settings)
    append_history(db, files)
    spec = zone_rule(db, conditions=["cost >= 6 and conversions = 0"], max_actions=5)
    other = zone_rule(db, name="other", conditions=["clicks > 1"])
    (alone,) = plan_rules(db, [spec], history=files, now=CLICKED_AT + HOUR)
    shared, _ = plan_rules(db, [spec, other], history=files, now=CLICKED_AT + HOUR)
    assert [(p.target, p.numbers) for p in alone.actions] == [(p.target, p.numbers) for p in shared.actions]
    assert sorted(p.target for p in alone.actions) == ["10", "6"] and alone.error is None
