"""The audit log: every change made through the services, with who made it and the changed fields old ->
new."""

from __future__ import annotations

import json

import pytest

from models.accounts.apikeys import create_api_key, revoke_api_key
from models.accounts.audit import audit_rows, list_audit
from models.accounts.errors import AccountError
from models.accounts.principal import INSTALL_KEY, user_principal
from models.accounts.sharing import share_campaign, unshare_campaign
from models.accounts.users import add_user, remove_user, set_password, update_user
from models.admin.services import (
    AdminError,
    add_stream,
    archive_campaign,
    create_campaign,
    create_offer,
    remove_stream,
    update_campaign,
    update_offer,
    update_stream,
)

PASSWORD = "correct horse battery"


def entries(db, **filters) -> list[tuple]:
    """(actor, entity, entity_id, action, old, new) of the log, oldest first."""
    found = list_audit(db, limit=1000, **filters)
    return [(e.actor, e.entity, e.entity_id, e.action, e.old_values, e.new_values) for e in reversed(found)]


def test_every_offer_campaign_and_stream_change_is_logged_with_the_changed_fields_old_and_new(db):
    offer = create_offer(db, "Shop", "https://shop.example/?c={subid}", payout=2.5)
    update_offer(db, offer.id, payout=3.0, daily_cap=100)
    campaign = create_campaign(db, "Summer", "summer", offer_id=offer.id)
    update_campaign(db, "summer", name="Summer sale", uniqueness_hours=12.0)
    other = create_offer(db, "Other", "https://other.example/")
    stream = add_stream(
        db, "summer", name="US", offers=[(offer.id, 60), (other.id, 40)], filters=["country=US"]
    )
    update_stream(db, stream.id, weight=50, offers=[(offer.id, 70), (other.id, 30)])
    remove_stream(db, stream.id)
    archive_campaign(db, "summer")
    default_stream = stream.id - 1

    logged = entries(db)
    assert [(entity, entity_id, action) for _, entity, entity_id, action, _, _ in logged] == [
        ("offer", offer.id, "create"),
        ("offer", offer.id, "update"),
        ("campaign", campaign.id, "create"),
        ("stream", default_stream, "create"),
        ("campaign", campaign.id, "update"),
        ("offer", other.id, "create"),
        ("stream", stream.id, "create"),
        ("stream", stream.id, "update"),
        ("stream", stream.id, "remove"),
        ("campaign", campaign.id, "archive"),
    ]
    assert {actor for actor, *_ in logged} == {"cli"}
    by_step = {(entity, entity_id, action): (old, new) for _, entity, entity_id, action, old, new in logged}
    assert by_step["offer", offer.id, "update"] == (
        {"payout": 2.5, "daily_cap": None},
        {"payout": 3.0, "daily_cap": 100},
    )
    assert by_step["campaign", campaign.id, "update"] == (
        {"name": "Summer", "uniqueness_hours": 24.0},
        {"name": "Summer sale", "uniqueness_hours": 12.0},
    )
    assert by_step["stream", stream.id, "update"] == (
        {"weight": 100, "offers": [[offer.id, 60], [other.id, 40]]},
        {"weight": 50, "offers": [[offer.id, 70], [other.id, 30]]},
    )
    assert by_step["stream", stream.id, "remove"] == ({"status": "active"}, {"status": "deleted"})
    assert by_step["campaign", campaign.id, "archive"] == ({"status": "active"}, {"status": "archived"})
    created_old, created_new = by_step["campaign", campaign.id, "create"]
    assert created_old == {} and created_new["alias"] == "summer" and created_new["owner_id"] is None
    assert "updated_at" not in created_new and "id" not in created_new
    stream_old, stream_new = by_step["stream", stream.id, "create"]
    assert stream_old == {} and json.loads(stream_new["filters"])[0]["values"] == ["US"]
    assert stream_new["offers"] == [[offer.id, 60], [other.id, 40]]


def test_a_campaign_made_with_a_new_offer_logs_the_campaign_its_offer_and_its_stream(db):
    campaign = create_campaign(db, "Fresh", "fresh", offer_url="https://fresh.example/")
    assert [(entity, action) for _, entity, _, action, _, _ in entries(db)] == [
        ("campaign", "create"),
        ("offer", "create"),
        ("stream", "create"),
    ]
    assert entries(db, entity="campaign", entity_id=campaign.id)[0][5]["name"] == "Fresh"


def test_the_actor_is_named_the_user_the_install_key_or_the_cli(db):
    anna = add_user(db, "anna", "buyer", PASSWORD)
    as_anna = user_principal(anna.id, anna.name, anna.role, anna.hides_money)
    create_campaign(db, "Hers", "hers", offer_url="https://o.example/", actor=as_anna)
    update_campaign(db, "hers", name="Still hers", actor=INSTALL_KEY)
    update_campaign(db, "hers", name="Hers again")
    found = list_audit(db, entity="campaign")
    assert [(e.action, e.actor, e.actor_user_id) for e in found] == [
        ("update", "cli", None),
        ("update", "install key", None),
        ("create", "anna", anna.id),
    ]


def test_a_change_that_changes_nothing_is_not_logged_and_a_refused_one_leaves_no_entry(db):
    create_campaign(db, "A", "a", offer_url="https://o.example/")
    create_campaign(db, "B", "b", offer_url="https://o.example/")
    before = len(entries(db))
    update_campaign(db, "a", name="A")  # Only updated_at moves.
    with pytest.raises(AdminError, match="already exists"):
        update_campaign(db, "a", alias="b")
    with pytest.raises(AdminError):
        update_campaign(db, "a", rotation="random")
    assert len(entries(db)) == before


def test_user_share_and_key_changes_are_logged_and_no_password_or_key_is(db):
    add_user(db, "root", "admin", PASSWORD)
    anna = add_user(db, "anna", "buyer", PASSWORD)
    update_user(db, "anna", hides_money=True)
    set_password(db, "anna", "another long password")
    campaign = create_campaign(db, "S", "s", offer_url="https://o.example/")
    share_campaign(db, "s", "anna")
    share_campaign(db, "s", "anna", may_edit=True)
    unshare_campaign(db, "s", "anna")
    created, key = create_api_key(db, "anna", "read", label="export")
    revoke_api_key(db, created.id)
    remove_user(db, "anna")

    logged = [row for row in entries(db) if row[1] != "offer" and row[1] != "stream"]
    assert [(entity, entity_id, action, old, new) for _, entity, entity_id, action, old, new in logged] == [
        (
            "user",
            1,
            "create",
            {},
            {"name": "root", "role": "admin", "hides_money": False, "is_disabled": False, "timezone": ""},
        ),
        (
            "user",
            anna.id,
            "create",
            {},
            {"name": "anna", "role": "buyer", "hides_money": False, "is_disabled": False, "timezone": ""},
        ),
        ("user", anna.id, "update", {"hides_money": False}, {"hides_money": True}),
        ("user", anna.id, "passwd", {}, {}),
        ("campaign", campaign.id, "create", {}, logged[4][5]),
        ("campaign", campaign.id, "share", {}, {"share:anna": "view"}),
        ("campaign", campaign.id, "share", {"share:anna": "view"}, {"share:anna": "edit"}),
        ("campaign", campaign.id, "unshare", {"share:anna": "edit"}, {}),
        (
            "api_key",
            created.id,
            "create",
            {},
            {"user": "anna", "scope": "read", "label": "export", "prefix": key[:12]},
        ),
        ("api_key", created.id, "revoke", {"revoked": False}, {"revoked": True}),
        (
            "user",
            anna.id,
            "remove",
            {"name": "anna", "role": "buyer", "hides_money": True, "is_disabled": False, "timezone": ""},
            {},
        ),
    ]
    everything = json.dumps(db.connection().execute("SELECT * FROM audit_log").fetchall())
    assert "argon2" not in everything and PASSWORD not in everything and key not in everything


def test_audit_rows_filter_by_entity_type_and_id_since_and_limit(db):
    first = create_campaign(db, "One", "one", offer_url="https://o.example/")
    create_campaign(db, "Two", "two", offer_url="https://o.example/")
    update_campaign(db, "one", name="Uno")
    db.connection().execute("UPDATE audit_log SET created_at = 1767225600000 - 1 WHERE id = 1")  # 2025-12-31
    assert [row["action"] for row in audit_rows(db, entity=f"campaign:{first.id}")] == ["update", "create"]
    assert len(audit_rows(db, entity="campaign")) == 3
    assert len(audit_rows(db, entity="stream")) == 2
    assert [row["id"] for row in audit_rows(db, limit=2)] == [7, 6]
    since = audit_rows(db, since="2026-01-01", entity="campaign")
    assert [row["entity_id"] for row in since] == [first.id, first.id + 1]
    newest = audit_rows(db, limit=1, timezone="Europe/Berlin")[0]
    assert newest["old"] == {"name": "One"} and newest["new"] == {"name": "Uno"}
    assert newest["created_at"].endswith(("+01:00", "+02:00"))
    with pytest.raises(
        AccountError, match=r"^'campaign:x' is not an entity type, or TYPE:ID such as campaign:3\.$"
    ):
        audit_rows(db, entity="campaign:x")
    with pytest.raises(ValueError, match="The limit must be between 1 and 100,000"):
        audit_rows(db, limit=0)


def test_lanner_audit_list_prints_table_json_and_csv_with_filters(lanner):
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", "https://o.example/")
    lanner("campaign", "update", "s", "--name", "Renamed")
    table = lanner("audit", "list").stdout.splitlines()
    assert table[0].split() == ["id", "created_at", "actor", "entity", "entity_id", "action", "old", "new"]
    assert '{"name": "S"}  {"name": "Renamed"}' in table[1] and " cli " in table[1]
    shown = json.loads(lanner("audit", "list", "--json", "--entity", "campaign:1").stdout)
    assert [(row["action"], row["actor"]) for row in shown] == [("update", "cli"), ("create", "cli")]
    assert shown[0]["old"] == {"name": "S"} and shown[0]["new"] == {"name": "Renamed"}
    csv_lines = lanner("audit", "list", "--csv", "--entity", "offer", "--limit", "5").stdout.splitlines()
    assert csv_lines[0] == "id,created_at,actor,entity,entity_id,action,old,new" and len(csv_lines) == 2
    assert json.loads(lanner("audit", "list", "--json", "--actor", "nobody").stdout) == []
    assert len(json.loads(lanner("audit", "list", "--json", "--actor", "CLI").stdout)) == len(table) - 1
    refused = lanner("audit", "list", "--since", "yesterday", check=False)
    assert refused.returncode == 1 and "is not a date (YYYY-MM-DD)" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_actors_are_listed_and_filtered_ignoring_case_the_same_on_every_backend(db):
    """SQLite's NOCASE (ASCII letters folded, then the bytes) on PostgreSQL too; ties by the bytes."""
    from models.accounts.audit import audit_actors, audit_entities, record_change
    from models.store.database import write_tx

    with write_tx(db):
        for number, name in enumerate(["zed", "Bert", "anna", "Anna", "_x", "Zz", "bert"], 1):
            entity = "stream" if name == "bert" else "offer"
            record_change(
                db, user_principal(None, name, "admin", False), entity, number, "create", None, {"n": 1}
            )
    assert audit_actors(db) == ["_x", "Anna", "anna", "Bert", "bert", "zed", "Zz"]  # '_' sorts before 'a'.
    assert [entry.entity_id for entry in list_audit(db, actor="ANNA")] == [4, 3]
    assert [entry.entity for entry in list_audit(db, actor="bErT")] == ["stream", "offer"]
    assert audit_entities(db) == ["offer", "stream"]
