"""Campaign tags outside the panel: `lanner campaign tag add|remove|list`, `campaign list --tag` and its
tags column, and the admin API's tags (in a campaign, `?tag=`, PATCH and PUT), all over
models/admin/tags.py as the panel's editor and list are."""

from __future__ import annotations

import csv
import io
import json

from test_api_v1 import admin, call, key  # noqa: F401 (fixtures)


def make_campaigns(db):
    from models.admin.services import create_campaign

    for alias in ("summer", "winter", "spring"):
        create_campaign(db, alias.title(), alias, offer_url="https://o.example/?c={subid}")


def audited_tags(db):
    from models.tables.account import AuditEntry

    return [
        (json.loads(entry.old_values)["tags"], json.loads(entry.new_values)["tags"], entry.actor)
        for entry in AuditEntry.select().where(AuditEntry.entity == "campaign").order_by(AuditEntry.id)
        if "tags" in json.loads(entry.new_values)
    ]


def test_the_cli_tags_lists_and_filters_campaigns_by_tag(lanner, db):
    make_campaigns(db)
    assert lanner("campaign", "tag", "add", "summer", "Push", "tier  1").stdout.strip() == "Push, tier 1"
    # One it has already, in another case, stays as first spelled.
    assert lanner("campaign", "tag", "add", "summer", "push", "adult").stdout.strip() == "adult, Push, tier 1"
    lanner("campaign", "tag", "add", "winter", "PUSH")
    assert (
        lanner("campaign", "tag", "remove", "summer", "ADULT", "never had").stdout.strip() == "Push, tier 1"
    )

    pushed = json.loads(lanner("campaign", "list", "--tag", "push", "--json").stdout)
    assert [(row["alias"], row["tags"]) for row in pushed] == [
        ("summer", ["Push", "tier 1"]),
        ("winter", ["PUSH"]),
    ]
    table = csv.DictReader(io.StringIO(lanner("campaign", "list", "--csv").stdout))
    assert {row["alias"]: row["tags"] for row in table} == {
        "summer": "Push, tier 1",
        "winter": "PUSH",
        "spring": "",
    }
    assert lanner("campaign", "list", "--tag", "nothing").stdout.strip().splitlines()[1:] == []

    every = json.loads(lanner("campaign", "tag", "list", "--json").stdout)
    assert every == [{"tag": "Push", "campaigns": 2}, {"tag": "tier 1", "campaigns": 1}]
    assert lanner("campaign", "tag", "list", "winter").stdout.split() == ["tag", "PUSH"]
    assert audited_tags(db) == [
        ([], ["Push", "tier 1"], "cli"),
        (["Push", "tier 1"], ["adult", "Push", "tier 1"], "cli"),
        ([], ["PUSH"], "cli"),
        (["adult", "Push", "tier 1"], ["Push", "tier 1"], "cli"),
    ]

    refused = lanner("campaign", "tag", "add", "summer", "x" * 41, check=False)
    assert refused.returncode == 1 and "A tag is at most 40 characters" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "There is no campaign" in lanner("campaign", "tag", "add", "autumn", "x", check=False).stderr


def test_the_api_shows_filters_and_sets_tags_by_patch_and_put(admin, key, db, monkeypatch):  # noqa: F811
    from models.accounts.apikeys import create_api_key
    from models.accounts.sharing import share_campaign
    from models.accounts.users import add_user

    make_campaigns(db)
    status, changed = call(admin, "PATCH", "/campaigns/summer", key, {"tags": ["Push", "push", " tier  1 "]})
    assert status == 200 and changed["tags"] == ["Push", "tier 1"] and changed["name"] == "Summer"
    status, changed = call(admin, "PATCH", "/campaigns/winter", key, {"name": "Cold", "tags": ["push"]})
    assert status == 200 and (changed["name"], changed["tags"]) == ("Cold", ["push"])
    status, put = call(admin, "PUT", "/campaigns/spring/tags", key, {"tags": ["Native"]})
    assert status == 200 and put == {"tags": ["Native"]}

    status, listed = call(admin, "GET", "/campaigns?tag=PUSH", key)
    assert status == 200 and [(c["alias"], c["tags"]) for c in listed["items"]] == [
        ("summer", ["Push", "tier 1"]),
        ("winter", ["push"]),
    ]
    assert [c["tags"] for c in call(admin, "GET", "/campaigns", key)[1]["items"]] == [
        ["Push", "tier 1"],
        ["push"],
        ["Native"],
    ]
    assert call(admin, "GET", "/campaigns/spring", key)[1]["tags"] == ["Native"]
    assert call(admin, "GET", "/campaigns/summer/tags", key) == (200, {"tags": ["Push", "tier 1"]})
    assert call(admin, "PUT", "/campaigns/summer/tags", key, {"tags": []}) == (200, {"tags": []})

    # A bad tag changes nothing, the other fields of its PATCH neither.
    status, answer = call(admin, "PATCH", "/campaigns/winter", key, {"name": "Lost", "tags": ["a,b"]})
    assert status == 400 and "cannot hold a comma" in answer["description"]
    assert call(admin, "GET", "/campaigns/winter", key)[1]["name"] == "Cold"
    # Nor does a PATCH whose tags the database refuses (busy): its name and tags are one transaction.
    from models.store.database import StoreBusy
    from models.tables.campaign import CampaignTag

    def busy(*args, **kwargs):
        raise StoreBusy("The database is busy.")

    monkeypatch.setattr(CampaignTag, "create", busy)
    assert call(admin, "PATCH", "/campaigns/winter", key, {"name": "Torn", "tags": ["pop"]})[0] == 503
    monkeypatch.undo()
    assert call(admin, "GET", "/campaigns/winter", key)[1]["name"] == "Cold"
    status, answer = call(admin, "PUT", "/campaigns/winter/tags", key, {"tags": [f"t{n}" for n in range(21)]})
    assert status == 400 and "at most 20 tags" in answer["description"]
    assert call(admin, "PUT", "/campaigns/winter/tags", key, {"tags": "push"})[0] == 400
    assert call(admin, "PUT", "/campaigns/winter/tags", key, {})[0] == 400
    assert call(admin, "PUT", "/campaigns/autumn/tags", key, {"tags": []})[0] == 404

    # A read-only share reads its campaign's tags but sets none; the viewer sees no other campaign's.
    add_user(db, "vera", "viewer", "correct horse battery")
    share_campaign(db, "winter", "vera")
    _, reader = create_api_key(db, "vera", "read")
    assert call(admin, "GET", "/campaigns?tag=push", reader)[1]["items"][0]["alias"] == "winter"
    assert len(call(admin, "GET", "/campaigns?tag=push", reader)[1]["items"]) == 1
    assert call(admin, "PUT", "/campaigns/winter/tags", reader, {"tags": []})[0] == 403
    assert call(admin, "GET", "/campaigns/summer/tags", reader)[0] == 404
    assert call(admin, "GET", "/campaigns/winter/tags", reader) == (200, {"tags": ["push"]})
    assert [new for _, new, _ in audited_tags(db)] == [["Push", "tier 1"], ["push"], ["Native"], []]
