"""Alerts: channels (secrets masked, bad input refused), each service's contract enforced by a local fake
(tests/alert_fakes.py), failures logged and retried with nothing lost or sent twice, a rule's one message
a run, operations alerts once when a condition starts and once when it clears, and a real `lanner worker`
delivering through failures."""

from __future__ import annotations

import json
import time

import pytest
from alert_fakes import BOT_TOKEN, CHAT_ID, SIGNING_SECRET, SLACK_PATH, AlertFake, Scripted
from conftest import wait_until
from test_api_v1 import VIEWER_KEY, admin, call, key  # noqa: F401 (fixtures)
from test_rules import CLICKED_AT, HOUR, land, push_campaign  # noqa: F401 (fixtures)

from models.admin.errors import AdminConflict, AdminError
from models.alerts.channels import change_channel, create_channel, list_channels, set_channel_status
from models.alerts.delivery import MAX_ATTEMPTS, alert_log, due_alerts, queue_alert, send_alert
from models.alerts.ops import Verdict, check_certificates, check_disk, check_platforms, record_verdicts
from models.alerts.senders import TELEGRAM_MAX_TEXT, AlertConfig, telegram_text
from models.optimisation.rules import RuleError, create_rule, run_rules
from models.tables.alerts import Alert
from models.tables.conversion import PlatformConnection
from models.tables.domain import Domain

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)


@pytest.fixture
def zones(db, push_campaign):
    """Campaign push (zoneid is sub_id_1) with few clicks: zone 10 spent 10.00 on 2 clicks and 6 spent 6.00
    on 1, neither converting; 7 spent 6.00 on 1 and made a sale; 3 spent 1.00."""
    from models.tables.campaign import Stream, StreamOffer

    stream_id = Stream.get(Stream.campaign == push_campaign.id).id
    offer_id = StreamOffer.get(StreamOffer.stream == stream_id).offer_id
    for zone, clicks, cost, sales in (
        ("10", 2, 10.0, 0),
        ("6", 1, 6.0, 0),
        ("7", 1, 6.0, 1),
        ("3", 1, 1.0, 0),
    ):
        land(
            db,
            push_campaign.id,
            clicks,
            cost,
            sales=sales,
            sub_id_1=zone,
            stream_id=stream_id,
            offer_id=offer_id,
        )
    return push_campaign


@pytest.fixture(scope="module")
def fake():
    server = AlertFake()
    yield server
    server.close()


@pytest.fixture
def config(fake) -> AlertConfig:
    fake.reset()
    return AlertConfig(fake.base, fake.base, timeout=5.0)  # Generous: a busy box answers late.


def channels(db, config, *, token: str = BOT_TOKEN, ops: bool = False) -> dict[str, int]:
    """One channel of each kind pointed at the fake; their ids by kind."""
    made = {
        "telegram": create_channel(
            db, "tg", "telegram", {"bot_token": token, "chat_id": CHAT_ID}, is_ops=ops, config=config
        ),
        "slack": create_channel(
            db,
            "sl",
            "slack",
            {"webhook_url": config.slack_webhook_url + SLACK_PATH},
            is_ops=ops,
            config=config,
        ),
        "webhook": create_channel(
            db,
            "wh",
            "webhook",
            {"url": config.telegram_api_url + "/hook", "signing_secret": SIGNING_SECRET},
            is_ops=ops,
            config=config,
        ),
    }
    return {kind: view.id for kind, (view, _) in made.items()}


def test_channels_keep_their_secrets_masked_and_refuse_what_their_service_would(db, config):
    ids = channels(db, config)
    shown = {view.kind: view for view in list_channels(db)}
    assert shown["telegram"].secrets == {"bot_token": "****" + BOT_TOKEN[-4:]}
    assert shown["telegram"].options == {"chat_id": CHAT_ID}
    assert SLACK_PATH not in json.dumps(shown["slack"].fields())
    assert shown["webhook"].secrets == {"signing_secret": "****" + SIGNING_SECRET[-4:]}
    view, made = create_channel(db, "wh2", "webhook", {"url": "https://example.com/in"}, config=config)
    assert len(made) == 64 and view.secrets["signing_secret"] == "****" + made[-4:]
    refused = [
        ("telegram", {"bot_token": "nope", "chat_id": CHAT_ID}, "bot token looks like"),
        ("telegram", {"bot_token": BOT_TOKEN}, "needs its chat_id"),
        ("telegram", {"bot_token": BOT_TOKEN, "chat_id": "a b"}, "chat id is a number"),
        ("slack", {"webhook_url": "https://evil.example/services/x"}, "starts with"),
        ("webhook", {"url": "ftp://x", "signing_secret": SIGNING_SECRET}, "http:// or https://"),
        ("webhook", {"url": "https://x.example", "signing_secret": "short"}, "at least 16"),
        ("webhook", {"url": "https://x.example", "chat_id": "1"}, "has no chat_id"),
        ("pager", {}, "one of telegram, slack, webhook"),
    ]
    for kind, fields, said in refused:
        with pytest.raises(AdminError, match=said):
            create_channel(db, "bad", kind, fields, config=config)
    with pytest.raises(AdminConflict, match="already"):
        create_channel(db, "tg", "telegram", {"bot_token": BOT_TOKEN, "chat_id": CHAT_ID}, config=config)
    assert len(list_channels(db)) == len(ids) + 1


def test_each_service_gets_the_message_its_contract_asks_for_and_the_log_says_sent(db, config, fake):
    ids = channels(db, config)
    before = {service: len(fake.messages(service)) for service in ids}
    body = "zone <10> & friends: cost 10.00"
    with db.atomic():
        queued = {
            kind: queue_alert(db, i, "k1", "rule", "Rule <cut>", body, {"n": 1}) for kind, i in ids.items()
        }
        assert queue_alert(db, ids["telegram"], "k1", "rule", "again", "again", {}) is None  # Once per key.
    for alert_id in queued.values():
        assert send_alert(db, alert_id, config=config, retry_base=1).state == "sent"
        assert send_alert(db, alert_id, config=config, retry_base=1).state == "sent"  # Never again.
    telegram = fake.messages("telegram")[before["telegram"] :]
    assert [m["text"] for m in telegram] == [
        "<b>Rule &lt;cut&gt;</b>\nzone &lt;10&gt; &amp; friends: cost 10.00"
    ] and telegram[0]["parse_mode"] == "HTML"
    assert fake.messages("slack")[before["slack"] :] == [
        {"text": "*Rule &lt;cut&gt;*\nzone &lt;10&gt; &amp; friends: cost 10.00"}
    ]
    (hook,) = fake.messages("webhook")[before["webhook"] :]
    assert hook["id"] == queued["webhook"] and hook["text"] == body and hook["data"] == {"n": 1}
    assert {row["state"] for row in alert_log(db)} == {"sent"} and fake.repeats == []


def test_failures_are_logged_and_retried_until_sent_and_a_bad_token_is_never_shown(db, config, fake):
    ids = channels(db, config)
    now = [time.time()]
    clock = lambda: now[0]  # noqa: E731
    with db.atomic():
        alert_id = queue_alert(db, ids["telegram"], "k", "ops", "Disk", "full", {}, now_ms=int(now[0] * 1000))
    fake.script(
        Scripted(500, b"<html>oops</html>"),
        Scripted(200, b"not json at all"),
        Scripted(
            429, json.dumps({"ok": False, "error_code": 429, "parameters": {"retry_after": 7}}).encode()
        ),
        Scripted(200, b'{"ok": true}', hang=8.0),  # Slower than the sender's timeout.
    )
    errors = []
    for _ in range(4):
        result = send_alert(db, alert_id, config=config, retry_base=10, clock=clock)
        assert result.state == "pending"
        errors.append(result.error)
        assert send_alert(db, alert_id, config=config, retry_base=10, clock=clock).state == "busy"  # Not due.
        now[0] += result.retry_in
    assert errors[0] == "Telegram answered 500 with something that is not its JSON."
    assert "not its JSON" in errors[1] and "429" in errors[2] and "timed out" in errors[3]
    assert send_alert(db, alert_id, config=config, retry_base=10, clock=clock).state == "sent"
    (row,) = [r for r in alert_log(db) if r["id"] == alert_id]
    assert row["state"] == "sent" and row["attempts"] == 5 and row["error"] == ""
    assert len([m for m in fake.messages("telegram") if m["text"] == "<b>Disk</b>\nfull"]) == 1

    # A token Telegram does not know: every attempt logged, retried, then given up; the token never shown.
    wrong = "987654321:AAE-wrong-token-abcdefghijklmnopq"
    (bad, _) = create_channel(
        db, "tg-bad", "telegram", {"bot_token": wrong, "chat_id": CHAT_ID}, config=config
    )
    with db.atomic():
        bad_id = queue_alert(db, bad.id, "k", "ops", "Disk", "full", {}, now_ms=int(now[0] * 1000))
    for attempt in range(1, MAX_ATTEMPTS + 1):
        result = send_alert(db, bad_id, config=config, retry_base=1, clock=clock)
        assert result.state == ("failed" if attempt == MAX_ATTEMPTS else "pending")
        assert result.error == "Telegram answered 401: Unauthorized" and wrong not in result.error
        now[0] += result.retry_in or 0
    assert Alert.get_by_id(bad_id).attempts == MAX_ATTEMPTS and fake.repeats == []

    # The token fixed: what waits for a retry goes at once.
    with db.atomic():
        held_id = queue_alert(db, bad.id, "k2", "ops", "Disk", "still full", {}, now_ms=int(now[0] * 1000))
    assert send_alert(db, held_id, config=config, retry_base=600, clock=clock).state == "pending"
    assert held_id not in due_alerts(db, clock=clock)
    fixed = change_channel(db, "tg-bad", {"bot_token": BOT_TOKEN}, config=config)
    assert fixed.secrets == {"bot_token": "****" + BOT_TOKEN[-4:]} and fixed.options == {"chat_id": CHAT_ID}
    assert held_id in due_alerts(db, clock=clock)
    assert send_alert(db, held_id, config=config, retry_base=600, clock=clock).state == "sent"
    with pytest.raises(AdminError, match="chat id is a number"):
        change_channel(db, "tg-bad", {"chat_id": "two words"}, config=config)


def test_a_paused_channel_holds_its_alerts_and_resumed_sends_them(db, config, fake):
    ids = channels(db, config)
    set_channel_status(db, "wh", "paused")
    with db.atomic():
        alert_id = queue_alert(db, ids["webhook"], "held", "ops", "Held", "it waits", {})
    assert send_alert(db, alert_id, config=config, retry_base=1).state == "held"
    assert alert_id not in due_alerts(db) and Alert.get_by_id(alert_id).attempts == 0
    set_channel_status(db, "wh", "active")
    assert alert_id in due_alerts(db)
    assert send_alert(db, alert_id, config=config, retry_base=1).state == "sent"


def test_a_rule_tells_its_channel_once_a_run_of_all_it_did_and_never_twice_of_one_zone(
    db, zones, config, fake
):
    ids = channels(db, config)
    now = CLICKED_AT + 2 * HOUR
    create_rule(
        db,
        "cut zones",
        campaigns=["push"],
        dimension="zoneid",
        window="6h",
        conditions=["cost >= 5 and conversions = 0"],
        action="blacklist",
        max_actions=10,
        notify="tg",
    )
    create_rule(
        db,
        "watch zones",
        campaigns=["push"],
        dimension="zoneid",
        window="6h",
        conditions=["cost >= 5"],
        action="notify",
        max_actions=10,
        notify="wh",
    )
    with pytest.raises(RuleError, match="needs the alert channel"):
        create_rule(
            db,
            "mute",
            campaigns=["push"],
            dimension="zoneid",
            window="6h",
            conditions=["clicks > 1"],
            action="notify",
        )
    with pytest.raises(RuleError, match="no alert channel 'nope'"):
        create_rule(
            db,
            "x",
            campaigns=["push"],
            dimension="zoneid",
            window="6h",
            conditions=["clicks > 1"],
            action="notify",
            notify="nope",
        )
    result = run_rules(db, now=now)
    assert sorted((a.rule, a.target) for a in result.acted) == [
        ("cut zones", "10"),
        ("cut zones", "6"),
        ("watch zones", "10"),
        ("watch zones", "6"),
        ("watch zones", "7"),
    ]
    assert len(result.alert_ids) == 2
    cut, watch = (Alert.get_by_id(i) for i in result.alert_ids)
    assert cut.channel_id == ids["telegram"] and cut.title == "Rule cut zones: 2 zoneid blacklisted"
    assert cut.body.splitlines() == [
        "When cost >= 5 and conversions = 0 over 6h:",
        "- push: zoneid 10 blacklisted (clicks 2, conversions 0, cost 10.00, revenue 0.00, roi -100.0%)",
        "- push: zoneid 6 blacklisted (clicks 1, conversions 0, cost 6.00, revenue 0.00, roi -100.0%)",
    ]
    data = json.loads(watch.data)
    assert [(a["target"], a["numbers"]["clicks"]) for a in data["actions"]] == [
        ("10", 2),
        ("6", 1),
        ("7", 1),
    ]
    assert run_rules(db, now=now + 300).alert_ids == []  # Nothing new: no message.
    for alert_id in result.alert_ids:
        assert send_alert(db, alert_id, config=config, retry_base=1).state == "sent"
    assert any("zoneid 10 blacklisted" in m["text"] for m in fake.messages("telegram"))
    assert any(m["data"].get("rule") == "watch zones" for m in fake.messages("webhook"))


def test_operations_alerts_tell_once_when_a_condition_starts_and_once_when_it_clears(db, config, tmp_path):
    ids = channels(db, config, ops=True)
    create_channel(db, "quiet", "webhook", {"url": "https://x.example/h"}, config=config)  # Not an ops one.
    now = time.time()
    Domain.create(name="t.example", cert_state="valid", cert_expires_at=int((now + 5 * 86400) * 1000))
    Domain.create(name="fine.example", cert_state="valid", cert_expires_at=int((now + 60 * 86400) * 1000))
    (far, near) = check_certificates(db, 14, now)  # By name.
    assert (near.name, near.is_firing, far.is_firing) == ("certificate:t.example", True, False)
    assert "expires in 5.0 days" in near.detail
    full, roomy = check_disk(tmp_path, "a", 100.0), check_disk(tmp_path, "a", 0.0001)
    assert full.is_firing and not roomy.is_firing and "% free" in full.detail

    assert record_verdicts(db, [far, roomy], now=now) == []  # First seen clear: nothing to say.
    (started,) = record_verdicts(db, [near, far], now=now)
    assert len(started.alert_ids) == len(ids)  # One to each operations channel, none to `quiet`.
    titles = {Alert.get_by_id(i).title for i in started.alert_ids}
    assert titles == {"Certificate of t.example expiring: started"}
    for minute in range(1, 4):  # Still firing: no storm.
        assert record_verdicts(db, [near, far], now=now + 300 * minute) == []
    cleared = Verdict(near.name, False, near.title, "it expires in 89.0 days (alert under 14)")
    (change,) = record_verdicts(db, [cleared], now=now + 1200)
    assert {Alert.get_by_id(i).title for i in change.alert_ids} == {
        "Cleared: Certificate of t.example expiring"
    }
    assert record_verdicts(db, [cleared], now=now + 1500) == []
    (again,) = record_verdicts(db, [near], now=now + 1800)  # Starting again is a new alert.
    assert len(again.alert_ids) == len(ids)
    (gone,) = record_verdicts(db, [roomy], now=now + 2100)  # The domain removed: its alert clears.
    assert gone.verdict.name == near.name and not gone.verdict.is_firing
    assert "no longer checked" in Alert.get_by_id(gone.alert_ids[0]).body
    assert record_verdicts(db, [roomy], now=now + 2400) == []
    for alert_id in due_alerts(db):
        assert send_alert(db, alert_id, config=config, retry_base=1).state in ("sent", "pending")


def test_the_worker_delivers_operations_alerts_through_failures_once_each(lanner, start_consumer, fake):
    fake.reset()
    environ = {
        "LANNER_TELEGRAM_API_URL": fake.base,
        "LANNER_ALERT_RETRY_SECONDS": "0.2",
        "LANNER_ALERT_DISK_FREE_PERCENT": "100",  # Any disk is "nearly full": the condition starts.
    }
    added = lanner(
        "alert",
        "channel",
        "add",
        "tg",
        "--kind",
        "telegram",
        "--bot-token",
        BOT_TOKEN,
        "--chat-id",
        CHAT_ID,
        "--ops",
    )
    assert "bot_token: ****" + BOT_TOKEN[-4:] in added.stdout and BOT_TOKEN not in added.stdout
    fake.script(Scripted(500, b"{}"), Scripted(200, b"garbage"))
    worker = start_consumer(**environ)
    wait_until(lambda: fake.messages("telegram"), 60, "the alert at Telegram", worker.log)
    (message,) = fake.messages("telegram")
    assert message["text"].startswith("<b>Disk nearly full on node") and "% free" in message["text"]
    log = json.loads(lanner("alert", "log", "--json").stdout)
    assert [(row["state"], row["attempts"]) for row in log] == [("sent", 3)] and fake.repeats == []
    assert [code for _, code in fake.requests] == [500, 200, 200]
    status = json.loads(lanner("status", "--json").stdout)
    assert status["alerts"] == {"firing": f"disk:{status['nodes'][0]['node']}", "pending": 0, "failed": 0}


@pytest.fixture
def alert_admin(env, fake, request):
    """The admin app with Telegram at the fake."""
    fake.reset()
    env["LANNER_TELEGRAM_API_URL"] = fake.base
    return request.getfixturevalue("admin")


def test_the_api_adds_masks_tests_pauses_and_logs_channels_and_sets_a_rules_channel(
    db, alert_admin, key, push_campaign, fake
):
    admin = alert_admin
    body = {"name": "tg", "kind": "telegram", "bot_token": BOT_TOKEN, "chat_id": CHAT_ID, "ops": True}
    assert call(admin, "POST", "/alert-channels", VIEWER_KEY, body)[0] == 403
    status, made = call(admin, "POST", "/alert-channels", key, body)
    assert status == 201 and made["secrets"] == {"bot_token": "****" + BOT_TOKEN[-4:]} and made["ops"] is True
    assert BOT_TOKEN not in json.dumps(call(admin, "GET", "/alert-channels", key)[1])
    status, error = call(admin, "POST", "/alert-channels", key, {**body, "name": "x", "chat_id": "two words"})
    assert status == 400 and "chat id is a number" in error["description"]
    assert call(admin, "POST", "/alert-channels", key, body)[0] == 409
    status, hook = call(
        admin, "POST", "/alert-channels", key, {"name": "wh", "kind": "webhook", "url": "https://x.example"}
    )
    assert status == 201 and len(hook["signing_secret"]) == 64  # Made, and answered this once.
    assert "signing_secret" not in call(admin, "GET", "/alert-channels/wh", key)[1]
    status, tested = call(admin, "POST", "/alert-channels/tg/test", key)
    assert status == 200 and tested["state"] == "sent" and len(fake.messages("telegram")) == 1
    assert call(admin, "PATCH", "/alert-channels/tg", key, {"status": "paused"})[1]["status"] == "paused"
    assert call(admin, "POST", "/alert-channels/tg/test", key)[1]["state"] == "held"
    assert call(admin, "PATCH", "/alert-channels/tg", key, {"status": "off"})[0] == 400
    status, error = call(admin, "PATCH", "/alert-channels/tg", key, {"chat_id": "two words"})
    assert status == 400 and "chat id is a number" in error["description"]
    status, changed = call(admin, "PATCH", "/alert-channels/tg", key, {"chat_id": "@lanner_ops"})
    assert status == 200 and changed["options"] == {"chat_id": "@lanner_ops"}
    status, log = call(admin, "GET", "/alerts?channel=tg", key)
    assert [(row["state"], row["attempts"]) for row in log["items"]] == [("pending", 0), ("sent", 1)]
    assert call(admin, "GET", "/alerts?limit=0", key)[0] == 400
    assert call(admin, "GET", "/alert-channels/nope", key)[0] == 404
    assert call(admin, "GET", "/ops-checks", key) == (200, {"items": [], "next": None})
    rule = {
        "name": "cut",
        "campaigns": ["push"],
        "dimension": "zoneid",
        "window": "6h",
        "conditions": ["cost >= 5"],
        "action": "notify",
    }
    status, error = call(admin, "POST", "/rules", key, rule)
    assert status == 400 and "needs the alert channel" in error["description"]
    assert call(admin, "POST", "/rules", key, {**rule, "notify": "tg"})[1]["notify"] == "tg"
    status, error = call(admin, "PATCH", "/rules/cut", key, {"notify": ""})
    assert status == 400 and "only notifies" in error["description"]
    assert call(admin, "PATCH", "/rules/cut", key, {"notify": "wh"})[1]["notify"] == "wh"


def test_a_conversion_api_failing_fires_at_its_threshold_and_clears_once_an_event_is_sent(db, zones):
    from models.conversions.platforms.connections import create_connection
    from models.tables.conversion import Conversion, PostbackDelivery

    create_connection(
        db,
        "fb",
        "meta",
        campaign="push",
        credentials={"pixel_id": "1", "access_token": "EAAB-token-0123456789"},
    )
    connection_id = PlatformConnection.get(PlatformConnection.name == "fb").id
    conversion = Conversion.get()
    now = time.time()
    at = int(now * 1000) - 60_000
    failing = PostbackDelivery.create(
        conversion_id=conversion.id,
        connection_id=connection_id,
        status="sale",
        attempts=2,
        error="Meta answered 500.",
        next_attempt_at=at,
        created_at=at,
        updated_at=at,
    )
    (verdict,) = check_platforms(db, 3, now)
    assert verdict.name == "platform:fb" and not verdict.is_firing  # 2 failed attempts: under 3.
    PostbackDelivery.update(attempts=3).where(PostbackDelivery.id == failing.id).execute()
    (verdict,) = check_platforms(db, 3, now)
    assert verdict.is_firing and "3 failed attempt(s) within the hour" in verdict.detail
    assert "Meta answered 500." in verdict.detail
    PostbackDelivery.update(state="sent", error="", updated_at=at + 1000).where(
        PostbackDelivery.id == failing.id
    ).execute()
    (verdict,) = check_platforms(db, 3, now)
    assert not verdict.is_firing


def test_a_long_telegram_message_is_cut_where_no_entity_is_split():
    for filler in range(8):  # Every alignment of an entity across the cut.
        text = telegram_text("T", "x" * filler + "&" * 2000)
        assert len(text) <= TELEGRAM_MAX_TEXT and text.endswith(" …")
        assert text.removesuffix(" …").endswith(("&amp;", "x")), text[-12:]
