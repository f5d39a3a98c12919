"""Labels: zones whitelisted and blacklisted per campaign or source, reports by label, the lists exported."""

from __future__ import annotations

import csv
import io
import re
import time

import pytest
from test_api_v1 import VIEWER_KEY, admin, call, key  # noqa: F401 (fixtures)
from test_panel import csrf_token, get, log_in, make_panel, post, users  # noqa: F401 (fixtures)

from models.admin.services import create_campaign
from models.admin.sources import create_source
from models.clicks.record import CLICK_COLUMNS, new_subid, ua_hash
from models.migrations.deferred import run_deferred
from models.optimisation.labels import (
    LabelError,
    LabelNotFound,
    export_labels,
    list_labels,
    remove_labels,
    scope_of,
    set_labels,
)
from models.reporting.reports import ReportError, ReportQuery, run_report
from models.reporting.rollups import RollupDelta
from models.tables.click import Click

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)


def land_clicks(db, rows: list[dict]) -> None:
    """Clicks as the flusher lands them (rollups included): each row's campaign_id, sub_id_1, cost."""
    now = int(time.time() * 1000) - 3_600_000
    delta = RollupDelta()
    with db.atomic():  # One commit for them all, as a flush lands them.
        for n, row in enumerate(rows):
            created = now + n
            click = Click.create(
                subid=new_subid(created),
                created_at=created,
                stream_id=row.get("stream_id", 1),
                offer_id=row.get("offer_id", 1),
                ip="203.0.113.7",
                user_agent="ua",
                ua_hash=ua_hash("ua"),
                **{k: v for k, v in row.items() if k not in ("stream_id", "offer_id")},
            )
            stored = Click.get_by_id(click.id)  # Once: not once per column.
            delta.add_clicks([[getattr(stored, column) for column in CLICK_COLUMNS]])
        delta.apply(db.connection())


@pytest.fixture
def zones(db):
    """Two campaigns of a source whose zoneid is sub_id_1, a third with no source; clicks in zones."""
    run_deferred(db)
    source = create_source(db, "PropellerAds", "zoneid={zoneid}")
    push = create_campaign(db, "Push", "push", offer_url="https://o.example/?s={subid}", source=source.name)
    pop = create_campaign(db, "Pop", "pop", offer_url="https://o.example/?s={subid}", source=source.name)
    bare = create_campaign(db, "Bare", "bare", offer_url="https://o.example/?s={subid}")
    rows = (
        [{"campaign_id": push.id, "sub_id_1": "111", "cost": 0.5}] * 4
        + [{"campaign_id": push.id, "sub_id_1": "222", "cost": 0.25}] * 2
        + [{"campaign_id": push.id, "sub_id_1": "333", "cost": 0.1}]
        + [{"campaign_id": pop.id, "sub_id_1": "111", "cost": 1.0}] * 3
        + [{"campaign_id": bare.id, "sub_id_1": "111", "cost": 2.0}]
    )
    land_clicks(db, rows)
    return source, push, pop, bare


def report(db, group_by, **filters) -> list[dict]:
    query = ReportQuery(group_by=group_by, filters=filters, preset="last_7_days")
    return run_report(db, query).rows


def test_a_campaigns_own_label_wins_over_its_sources_and_reports_group_and_filter_by_it(db, zones):
    source, push, pop, bare = zones
    assert set_labels(db, scope_of(db, None, source.name, "zoneid"), ["111", "222"], "blacklist") == 2
    assert set_labels(db, scope_of(db, "push", None, "sub_id_1"), ["222"], "whitelist") == 1

    rows = report(db, ("campaign", "zoneid", "label"))
    labels = {(row["campaign"], row["zoneid"]): (row["label"], row["clicks"]) for row in rows}
    assert labels == {
        (push.id, "111"): ("blacklist", 4),  # The source's.
        (push.id, "222"): ("whitelist", 2),  # The campaign's own wins.
        (push.id, "333"): ("", 1),
        (pop.id, "111"): ("blacklist", 3),
    }
    # The bare campaign has no source: by slot, its zone 111 is no source's and has no label.
    by_slot = report(db, ("sub_id_1", "label"))
    assert {(row["sub_id_1"], row["label"]): row["clicks"] for row in by_slot} == {
        ("111", "blacklist"): 7,
        ("111", ""): 1,
        ("222", "whitelist"): 2,
        ("333", ""): 1,
    }
    # Filtering by label alone keeps the rows grouped as asked, and the totals follow.
    blacklisted = run_report(
        db, ReportQuery(group_by=("zoneid",), filters={"label": ("blacklist",)}, preset="last_7_days")
    )
    assert [(row["zoneid"], row["clicks"], row["cost"]) for row in blacklisted.rows] == [("111", 7, 5.0)]
    assert blacklisted.total["clicks"] == 7
    unlabelled = report(db, ("sub_id_1",), label=("none",))
    assert [(row["sub_id_1"], row["clicks"]) for row in unlabelled] == [("111", 1), ("333", 1)]


def test_a_label_report_needs_one_sub_id_group_and_known_label_words(db, zones):
    with pytest.raises(ReportError, match="group the report by one sub id"):
        report(db, ("campaign", "label"))
    with pytest.raises(ReportError, match="group the report by one sub id"):
        report(db, ("sub_id_1", "sub_id_2", "label"))
    with pytest.raises(ReportError, match="label filter takes whitelist, blacklist, none"):
        report(db, ("sub_id_1",), label=("green",))


def test_labels_export_as_a_source_takes_them_and_come_off_again(db, zones):
    scope = scope_of(db, "push", None, "zoneid")
    set_labels(db, scope, ["333", "111", "4417"], "blacklist")
    assert set_labels(db, scope, ["111"], "blacklist") == 0  # Already so: nothing changes.
    assert export_labels(db, scope, "blacklist", "plain") == "111\n333\n4417\n"
    assert export_labels(db, scope, "blacklist", "comma") == "111,333,4417\n"
    table = list(csv.reader(io.StringIO(export_labels(db, scope, "blacklist", "csv"))))
    assert table == [
        ["value", "label", "zoneid"],
        ["111", "blacklist", "zoneid"],
        ["333", "blacklist", "zoneid"],
        ["4417", "blacklist", "zoneid"],
    ]
    assert export_labels(db, scope, "whitelist", "comma") == ""
    assert remove_labels(db, scope, ["111", "999"]) == 1
    assert [row["value"] for row in list_labels(db, campaign_ids=[zones[1].id])] == ["333", "4417"]
    with pytest.raises(LabelNotFound):
        remove_labels(db, scope, ["999"])


@pytest.mark.parametrize(
    ("campaign", "source", "parameter", "values", "label", "message"),
    [
        ("push", None, "placement", ["1"], "blacklist", "'placement' is no parameter of campaign 'push'"),
        ("bare", None, "zoneid", ["1"], "blacklist", "'zoneid' is no parameter of campaign 'bare'"),
        ("push", None, "sub_id_31", ["1"], "blacklist", "sub_id_1 to sub_id_30"),
        ("push", "PropellerAds", "zoneid", ["1"], "blacklist", "one of them"),
        ("push", None, "zoneid", ["a,b"], "blacklist", "holds a comma"),
        ("push", None, "zoneid", ["  "], "blacklist", "at least one value"),
        ("push", None, "zoneid", ["x" * 501], "blacklist", "at most 500 characters"),
        ("push", None, "zoneid", ["1"], "green", "whitelist or blacklist"),
    ],
)
def test_a_label_that_cannot_be_set_is_refused_in_one_sentence(
    db, zones, campaign, source, parameter, values, label, message
):
    with pytest.raises(LabelError, match=message):
        set_labels(db, scope_of(db, campaign, source, parameter), values, label)
    assert list_labels(db) == []


def test_the_cli_sets_lists_exports_and_removes_labels(lanner, zones, tmp_path):
    listed = tmp_path / "zones.txt"
    listed.write_text("222\n\n333\n")
    out = lanner(
        "label", "set", "--campaign", "push", "--param", "zoneid", "--blacklist", "111", "--file", str(listed)
    ).stdout
    assert "3 value(s) of zoneid blacklisted in campaign push." in out
    assert lanner(
        "label", "export", "--campaign", "push", "--param", "zoneid", "--format", "comma"
    ).stdout == ("111,222,333\n")
    table = lanner("label", "list", "--campaign", "push").stdout
    assert "zoneid" in table and "sub_id_1" in table and table.count("blacklist") == 3
    refused = lanner("label", "set", "--source", "nope", "--param", "zoneid", "--whitelist", "1", check=False)
    assert refused.returncode == 1 and "There is no traffic source 'nope'" in refused.stderr
    assert (
        "1 label(s) removed"
        in lanner("label", "remove", "--campaign", "push", "--param", "zoneid", "222").stdout
    )
    report_out = lanner(
        "report", "-g", "zoneid", "-g", "label", "--campaign", "push", "--preset", "last_7_days", "--csv"
    ).stdout
    rows = list(csv.DictReader(io.StringIO(report_out)))
    assert {(row["zoneid"], row["label"]) for row in rows} == {
        ("111", "blacklist"),
        ("222", ""),
        ("333", "blacklist"),
    }


def test_the_api_sets_lists_exports_and_removes_labels_and_refuses_bad_input(admin, key, zones):
    body = {"source": "PropellerAds", "param": "zoneid", "values": ["111", "9"], "label": "blacklist"}
    assert call(admin, "PUT", "/labels", key, body) == (
        200,
        {"changed": 2, "scope": "source", "slot": "sub_id_1"},
    )
    status, listed = call(admin, "GET", "/labels?campaign=pop", key)
    assert status == 200 and [(i["scope"], i["value"]) for i in listed["items"]] == [
        ("source", "111"),
        ("source", "9"),
    ]
    status, text = call(admin, "GET", "/labels/export?source=PropellerAds&param=zoneid&format=comma", key)
    assert (status, text) == (200, "111,9\n")
    status, error = call(admin, "PUT", "/labels", key, {**body, "label": "green"})
    assert status == 400 and "whitelist or blacklist" in error["description"]
    status, error = call(admin, "PUT", "/labels", key, {**body, "values": "111"})
    assert status == 400
    status, error = call(admin, "GET", "/labels/export?campaign=push&param=zoneid&format=xml", key)
    assert status == 400 and "plain, comma, csv" in error["description"]
    assert call(admin, "PUT", "/labels", VIEWER_KEY, body)[0] == 403
    remove = {"campaign": "push", "param": "zoneid", "values": ["111"]}
    assert call(admin, "POST", "/labels/remove", key, remove)[0] == 404  # The source's label, not push's own.
    assert (
        call(admin, "POST", "/labels/remove", key, {**remove, "source": "PropellerAds", "campaign": None})[0]
        == 400
    )
    del remove["campaign"]
    assert call(admin, "POST", "/labels/remove", key, {**remove, "source": "PropellerAds"}) == (
        200,
        {"removed": 1},
    )


def test_the_panel_ticks_rows_of_a_campaigns_zones_blacklists_them_and_exports_the_list(
    make_panel,
    users,
    zones,
):
    panel = make_panel()
    anna = log_in(panel, "anna")
    level = "/panel/reports?g1=zoneid&f.campaign=push"
    status, _, html = get(panel, level, anna)
    assert status == 200 and "<th>Label</th>" in html
    assert re.findall(r'name="values" value="([^"]+)"', html) == ["111", "222", "333"]  # By clicks.
    fields = [
        ("csrf_token", csrf_token(html)),
        ("campaign", str(zones[1].id)),
        ("param", "zoneid"),
        ("back", level),
        ("values", "111"),
        ("values", "333"),
        ("label", "blacklist"),
    ]
    status, headers, _ = post(panel, "/panel/labels", fields, cookie=anna)
    assert status == 303 and headers["location"].endswith(level)
    html = get(panel, level, anna)[2]
    assert re.findall(r'<td class="label ([a-z]*)">', html) == ["blacklist", "", "blacklist"]
    export = re.search(r'href="(/panel/labels.txt\?[^"]*format=plain)"', html).group(1)
    status, headers, body = get(panel, export.replace("&amp;", "&"), anna)
    assert (status, body) == (200, "111\n333\n") and "attachment" in headers["content-disposition"]
    # A buyer who may not see the campaign gets no label column, and may not label its values.
    bert = log_in(panel, "bert")
    html = get(panel, level, bert)[2]
    assert "<th>Label</th>" not in html and 'name="values"' not in html
    theirs = [(k, csrf_token(html) if k == "csrf_token" else v) for k, v in fields]
    assert post(panel, "/panel/labels", theirs, cookie=bert)[0] == 404
    assert "<th>Label</th>" not in get(panel, "/panel/reports?g1=zoneid", anna)[2]
    green = [(k, "green" if k == "label" else v) for k, v in fields]
    assert post(panel, "/panel/labels", green, cookie=anna)[0] == 400
    unticked = [(k, v) for k, v in fields if k != "values"]
    status, _, body = post(panel, "/panel/labels", unticked, cookie=anna)
    assert status == 400 and "Tick the rows" in body.decode()
