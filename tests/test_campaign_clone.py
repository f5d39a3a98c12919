"""Cloning a campaign (models/admin/services.py clone_campaign): the service, `lanner campaign clone` and
`POST /api/v1/campaigns/{ref}/clone`, with its access rules."""

from __future__ import annotations

import json

from test_api_v1 import accounts, admin, call, key, make_campaign, make_offer  # noqa: F401 (fixtures)


def summer_with_streams(db):
    """`summer`: its default stream, a filtered intercepting stream with two weighted offers and a
    cap, a disabled stream and a removed one."""
    from models.admin.services import add_stream, create_campaign, create_offer, remove_stream, update_stream

    first = create_offer(db, "A", "https://a.example/?s={subid}")
    second = create_offer(db, "B", "https://b.example/?s={subid}")
    campaign = create_campaign(db, "Summer", "summer", offer_id=first.id, cost_model="cpc", cost_value=0.05)
    add_stream(
        db,
        "summer",
        name="US mobile",
        type="intercepting",
        offers=[(first.id, 70), (second.id, 30)],
        filters=["country=US,GB", "device=mobile"],
        daily_cap=500,
    )
    disabled = add_stream(db, "summer", name="Paused one", offers=[(second.id, 100)])
    update_stream(db, disabled.id, status="disabled")
    removed = add_stream(db, "summer", name="Gone", offers=[(first.id, 100)])
    remove_stream(db, removed.id)
    return campaign


def stream_shapes(db, ref):
    from models.admin.services import describe_filters, list_streams, stream_offers

    return [
        (s.name, s.type, s.position, s.status, s.daily_cap, describe_filters(s), sorted(stream_offers(db, s)))
        for s in list_streams(db, ref)
    ]


def test_a_clone_copies_streams_filters_and_offer_weights_under_a_free_alias(db):
    from models.accounts.audit import list_audit
    from models.admin.services import clone_campaign, get_campaign
    from models.admin.tags import campaign_tags, set_campaign_tags

    original = summer_with_streams(db)
    set_campaign_tags(db, original, ["push", "tier 1"])
    copy = clone_campaign(db, "summer")
    assert (copy.name, copy.alias, copy.status) == ("Summer (copy)", "summer-copy", "active")
    assert campaign_tags(db, [copy.id]) == {copy.id: ["push", "tier 1"]}
    assert (copy.cost_model, copy.cost_value, copy.rotation) == ("cpc", 0.05, original.rotation)
    assert stream_shapes(db, copy.id) == stream_shapes(db, "summer")
    assert [shape[0] for shape in stream_shapes(db, copy.id)] == ["US mobile", "Default", "Paused one"]
    assert len(stream_shapes(db, "summer")) == 3  # The original is untouched.
    # Another copy takes the next free alias; a copy of an archived campaign is paused.
    from models.admin.services import archive_campaign

    archive_campaign(db, "summer")
    again = clone_campaign(db, "summer", name="Autumn")
    assert (again.name, again.alias, again.status) == ("Autumn", "summer-copy-2", "paused")
    assert get_campaign(db, "summer").status == "archived"
    created = list_audit(db, entity="campaign", entity_id=copy.id)
    assert [entry.action for entry in created] == ["create"]
    assert created[0].new_values["cloned_from"] == original.id and created[0].actor == "cli"
    from models.admin.services import list_streams

    copied = {s.id for s in list_streams(db, copy.id) + list_streams(db, again.id)}
    logged = [e for e in list_audit(db, entity="stream", limit=100) if e.entity_id in copied]
    assert len(copied) == 6 and sorted(e.action for e in logged) == ["create"] * 6


def test_a_clone_refuses_a_taken_or_bad_alias(db):
    import pytest

    from models.admin.services import AdminError, clone_campaign

    summer_with_streams(db)
    with pytest.raises(AdminError, match="already exists"):
        clone_campaign(db, "summer", alias="summer")
    with pytest.raises(AdminError, match="letters, digits"):
        clone_campaign(db, "summer", alias="no spaces")
    with pytest.raises(AdminError, match="There is no campaign"):
        clone_campaign(db, "winter")


def test_lanner_campaign_clone_prints_the_copy_s_path(lanner, db):
    summer_with_streams(db)
    assert lanner("campaign", "clone", "summer").stdout.strip() == "/summer-copy"
    result = lanner("campaign", "clone", "summer", "--name", "FB", "--alias", "summer-fb")
    assert result.stdout.strip() == "/summer-fb"
    shown = json.loads(lanner("campaign", "show", "summer-fb", "--json").stdout)
    assert shown["name"] == "FB" and len(shown["streams"]) == 3
    refused = lanner("campaign", "clone", "summer", "--alias", "summer-fb", check=False)
    assert (
        refused.returncode != 0 and "already exists" in refused.stderr and "Traceback" not in refused.stderr
    )


def test_the_api_clones_a_campaign_the_key_may_edit(admin, key):  # noqa: F811
    campaign, offer = make_campaign(admin, key)
    status, copy = call(admin, "POST", "/campaigns/summer/clone", key, {})
    assert status == 201 and copy["alias"] == "summer-copy" and copy["name"] == "Summer (copy)", copy
    status, shown = call(admin, "GET", f"/campaigns/{copy['id']}", key)
    assert [s["offers"] for s in shown["streams"]] == [[{"offer_id": offer["id"], "weight": 100}]]
    status, named = call(
        admin, "POST", f"/campaigns/{campaign['id']}/clone", key, {"name": "B", "alias": "b"}
    )
    assert status == 201 and (named["name"], named["alias"]) == ("B", "b")
    assert call(admin, "POST", "/campaigns/summer/clone", key, {"alias": "b"})[0] == 409
    assert call(admin, "POST", "/campaigns/summer/clone", key, {"alias": 7})[0] == 400
    assert call(admin, "POST", "/campaigns/winter/clone", key, {})[0] == 404


def test_a_buyer_clones_what_they_may_edit_and_owns_the_copy(accounts, key, db):  # noqa: F811
    from models.accounts.sharing import share_campaign
    from models.accounts.users import get_user

    app, keys = accounts
    offer = make_offer(app, keys["anna"])
    body = {"name": "A", "alias": "anna-a", "offer_id": offer["id"]}
    assert call(app, "POST", "/campaigns", keys["anna"], body)[0] == 201
    body = {"name": "B", "alias": "bert-b", "offer_url": "https://b.example/"}  # Anna's offer is not his.
    assert call(app, "POST", "/campaigns", keys["bert"], body)[0] == 201
    assert call(app, "POST", "/campaigns/bert-b/clone", keys["anna"], {})[0] == 404  # Not hers to see.
    share_campaign(db, "bert-b", "anna")  # Read-only.
    assert call(app, "POST", "/campaigns/bert-b/clone", keys["anna"], {})[0] == 403
    share_campaign(db, "bert-b", "anna", may_edit=True)
    status, copy = call(app, "POST", "/campaigns/bert-b/clone", keys["anna"], {})
    assert status == 201 and copy["owner_id"] == get_user(db, "anna").id, copy
    share_campaign(db, "anna-a", "vera")
    assert call(app, "POST", "/campaigns/anna-a/clone", keys["vera"], {})[0] == 403  # A read key.
    # An admin's copy keeps the original's owner.
    status, copy = call(app, "POST", "/campaigns/bert-b/clone", key, {})
    assert status == 201 and copy["owner_id"] == get_user(db, "bert").id
