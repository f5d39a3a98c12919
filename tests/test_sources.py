"""Traffic sources: parameter templates and their sub_id slots, the services (postback targets that
follow the source, refusals, the audit log), report names, the admin API and the panel's pages, and one
end-to-end run through `lanner serve` and the Huey consumer: a click read into the source's slots, a
`{zoneid}` offer macro, the source's postback sent, `lanner report -g zoneid`."""

from __future__ import annotations

import json
import re
import zlib
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import click, request
from test_api_v1 import admin, call, key  # noqa: F401
from test_outbound import target_server  # noqa: F401
from test_panel import csrf_token, get, log_in, make_panel, panel, post, users  # noqa: F401

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

ZONES = "zoneid={zoneid}&cost={cost}&external_id={clickid}&campaignid={campaignid}"


# -- parameter templates (pure rules) ----------------------------------------------------------


def test_builtin_names_fill_themselves_and_others_take_the_next_free_slot_or_the_one_given():
    from models.routing.sources import campaign_url, macro_renames, parse_template, slot_of, template_text

    parameters = parse_template(ZONES, {"campaignid": 1})
    assert [(p["name"], p["placeholder"], p["field"]) for p in parameters] == [
        ("zoneid", "{zoneid}", "sub_id_2"),
        ("cost", "{cost}", "cost"),
        ("external_id", "{clickid}", "external_id"),
        ("campaignid", "{campaignid}", "sub_id_1"),
    ]
    assert slot_of(parameters) == {"zoneid": 2, "campaignid": 1}
    assert macro_renames(parameters) == {"zoneid": "sub_id_2", "campaignid": "sub_id_1"}
    assert template_text(parameters) == ZONES
    assert campaign_url("summer", parameters) == "/summer?" + ZONES
    assert campaign_url("summer", []) == "/summer"
    # Odd but real placeholders pass as they are.
    odd = parse_template("a=${SUBID}&b=[CLICK_ID]&c={{ad.id}}&d=__AID__")
    assert [p["placeholder"] for p in odd] == ["${SUBID}", "[CLICK_ID]", "{{ad.id}}", "__AID__"]


@pytest.mark.parametrize(
    ("template", "slots", "sentence"),
    [
        ("sub1={zone}", None, "already fills a sub_id slot"),
        ("sub_id_4={zone}", None, "already fills a sub_id slot"),
        ("country={geo}", None, "one of Lanner's own macros"),
        ("ZoneId={zoneid}", None, "lowercase letters"),
        ("zoneid={zoneid}&zoneid={z}", None, "appears twice"),
        ("zoneid", None, "not a parameter of the form"),
        ("zoneid={zone id}", None, "without spaces"),
        ("zoneid=", None, "needs the network's placeholder"),
        ("zoneid={zoneid}", {"other": 2}, "not in the template"),
        ("cost={cost}", {"cost": 2}, "takes no sub_id slot"),
        ("a={a}&b={b}", {"a": 3, "b": 3}, "same sub_id slot"),
        ("&".join(f"p{n}={{p{n}}}" for n in range(31)), None, "more parameters than the 30"),
    ],
)
def test_an_unusable_template_is_refused_with_one_sentence(template, slots, sentence):
    from models.routing.sources import SourceError, parse_template

    with pytest.raises(SourceError, match=re.escape(sentence)):
        parse_template(template, slots)


def test_slot_mappings_are_name_equals_a_slot_from_1_to_30():
    from models.routing.sources import SourceError, parse_slots

    assert parse_slots(["zoneid=3", "cid=sub_id_30"]) == {"zoneid": 3, "cid": 30}
    for bad in ("zoneid", "zoneid=0", "zoneid=31", "zoneid=x", "zoneid=²"):
        with pytest.raises(SourceError, match="slot mapping"):
            parse_slots([bad])


def test_a_slot_the_source_maps_is_filled_from_its_name_only_and_the_others_as_always():
    from routes.click import ClientAddress, VisitParser, with_source_slots

    parser = VisitParser(ClientAddress((), "X-Real-IP", is_unix_socket=False), {"zone": 3, "aff": 5}, 1.0)

    def sub_ids(query, slots):
        visit = parser({"REMOTE_ADDR": "203.0.113.7", "QUERY_STRING": query}, slots)
        return visit.sub_ids[:5]

    source = {"zoneid": 3}
    assert sub_ids("sub3=a&zoneid=z&sub4=b&aff=c", None) == ["", "", "a", "b", "c"]
    assert sub_ids("zoneid=z&sub3=a&zone=q&sub4=b&aff=c", source) == ["", "", "z", "b", "c"]
    assert sub_ids("sub3=a&zone=q", source) == ["", "", "", "", ""]
    reloaded = {"zoneid": 4}  # A configuration reload's new dict: resolved again, not the old one's.
    assert sub_ids("zoneid=z&sub3=a", reloaded) == ["", "", "a", "z", ""]
    assert sub_ids("zoneid=z&sub3=a", source) == ["", "", "z", "", ""]
    # `lanner simulate` applies a campaign's source after parsing, to the same effect.
    visit = parser({"REMOTE_ADDR": "203.0.113.7", "QUERY_STRING": "sub3=a&sub4=b"})
    assert with_source_slots(visit, source).sub_ids[:4] == ["", "", "", "b"]


def test_the_catalogue_s_templates_all_parse_and_each_entry_says_where_it_stands():
    from models.admin.sources import catalogue
    from models.routing.sources import parse_template

    data = catalogue()
    assert "check" in data["about"]
    keys = [entry["key"] for entry in data["sources"]]
    for wanted in (
        "propellerads",
        "popads",
        "richads",
        "zeropark",
        "trafficstars",
        "exoclick",
        "taboola",
        "outbrain",
        "mgid",
        "facebook",
        "googleads",
        "tiktok",
    ):
        assert wanted in keys
    for entry in data["sources"]:
        assert parse_template(entry["template"]) and entry["note"] and entry["kinds"]


# -- the services ------------------------------------------------------------------------------


@pytest.fixture
def offer(db):
    """Source Zones (zoneid in sub_id_4), and an offer whose URL uses {zoneid}."""
    from models.admin.services import create_offer
    from models.admin.sources import create_source

    create_source(db, "Zones", ZONES, slots={"zoneid": 4})
    return create_offer(db, "Shop", "https://shop.example/?s={subid}&z={zoneid}")


def active_targets() -> list[dict]:
    from models.tables.conversion import PostbackTarget

    query = PostbackTarget.select().where(PostbackTarget.status == "active").order_by(PostbackTarget.id)
    return list(query.dicts())


def test_a_campaign_s_postback_target_follows_its_source(db):
    from models.accounts.audit import list_audit
    from models.admin.services import clone_campaign, create_campaign, update_campaign
    from models.admin.sources import create_source, update_source

    zones = create_source(
        db, "Zones", ZONES, postback_url="https://net.example/cb?c={external_id}&z={zoneid}"
    )
    create_campaign(db, "Summer", "summer", offer_url="https://o.example/?s={subid}", source="Zones")
    (target,) = active_targets()
    assert (target["url"], target["statuses"], target["source_id"]) == (
        "https://net.example/cb?c={external_id}&z={sub_id_1}",
        "sale",
        zones.id,
    )

    # The source's postback and mapping change: the same target, changed in place.
    update_source(db, "Zones", slots={"zoneid": 7}, postback_statuses=["lead", "sale"])
    (moved,) = active_targets()
    assert (moved["id"], moved["url"], moved["statuses"]) == (
        target["id"],
        "https://net.example/cb?c={external_id}&z={sub_id_7}",
        "lead,sale",
    )

    copy = clone_campaign(db, "summer")  # The copy keeps the source, and gets its own target.
    assert copy.source_id == zones.id
    assert [t["campaign_id"] for t in active_targets()] == [1, copy.id]

    from models.admin.services import AdminError
    from models.conversions.admin import remove_target

    with pytest.raises(AdminError, match="is its campaign's traffic source's postback"):
        remove_target(db, target["id"])
    update_campaign(db, "summer", clear_source=True)  # Leaving the source removes its target.
    assert [t["campaign_id"] for t in active_targets()] == [copy.id]
    update_source(db, zones.id, postback_url="")  # No postback: none anywhere.
    assert active_targets() == []
    update_campaign(db, "summer", source="Zones")
    assert active_targets() == []
    # Targets added by hand are not the source's business.
    from models.conversions.admin import add_target

    add_target(db, "summer", "https://own.example/?s={subid}", ["sale"])
    update_source(db, "Zones", postback_url="https://net.example/cb?c={external_id}")
    assert sorted((t["url"], t["source_id"]) for t in active_targets() if t["campaign_id"] == 1) == [
        ("https://net.example/cb?c={external_id}", zones.id),
        ("https://own.example/?s={subid}", None),
    ]
    entities = ("traffic_source", "postback_target")
    actions = [(e.entity, e.action) for e in list_audit(db) if e.entity in entities]
    assert ("traffic_source", "create") in actions and ("postback_target", "remove") in actions


def test_source_refusals_are_one_sentence_each(db, offer):
    from models.admin.services import AdminConflict, AdminError, create_campaign, create_offer
    from models.admin.sources import create_source, update_source

    with pytest.raises(AdminConflict, match="already exists"):
        create_source(db, "Zones", "a={a}")
    with pytest.raises(AdminError, match="Unknown macro"):
        create_source(db, "Other", "a={a}", postback_url="https://x.example/?q={nope}")
    with pytest.raises(AdminError, match="postback status must be one of"):
        create_source(db, "Other", "a={a}", postback_statuses=["paid"])
    with pytest.raises(AdminError, match="catalogue has no source 'nope'"):
        create_source(db, "Other", from_catalogue="nope")
    # Offer 1's URL uses {zoneid}: a change dropping the name is refused, naming the URL.
    with pytest.raises(AdminError, match="Offer 1's URL uses a parameter this change removes"):
        update_source(db, "Zones", template="cost={cost}")
    with pytest.raises(AdminError, match=r"Unknown macro \{siteid\}"):  # No source defines it.
        create_offer(db, "Bad", "https://b.example/?s={siteid}")
    update_source(db, "Zones", status="archived")
    with pytest.raises(AdminError, match="archived; a campaign cannot pick it"):
        create_campaign(db, "Late", "late", offer_id=offer.id, source="Zones")


def test_a_changed_template_keeps_each_name_s_slot_unless_one_is_given(db):
    from models.admin.sources import create_source, update_source
    from models.routing.sources import loads, slot_of

    create_source(db, "Zones", ZONES)  # zoneid in sub_id_1, campaignid in sub_id_2.
    source = update_source(db, "Zones", template="siteid={site}&campaignid={campaignid}&zoneid={zoneid}")
    assert slot_of(loads(source.parameters)) == {"siteid": 3, "campaignid": 2, "zoneid": 1}
    source = update_source(db, "Zones", slots={"siteid": 1})  # zoneid gives up slot 1: the next free.
    assert slot_of(loads(source.parameters)) == {"siteid": 1, "campaignid": 2, "zoneid": 3}


def test_a_source_can_start_from_the_catalogue(db):
    from models.admin.sources import create_source, source_fields

    fields = source_fields(create_source(db, "Stars", from_catalogue="trafficstars"))
    assert fields["template"].endswith("external_id={click_id}")
    assert fields["postback_url"] == "https://tsyndicate.com/api/v1/cpa/action/{external_id}"
    assert [p["field"] for p in fields["parameters"]] == ["sub_id_1", "sub_id_2", "sub_id_3", "external_id"]


# -- the configuration a worker loads ----------------------------------------------------------


def test_a_campaign_with_a_source_reads_its_names_and_renders_them_as_macros(db, offer):
    from models.admin.services import create_campaign
    from models.routing.config import load_campaigns

    create_campaign(db, "With", "with", offer_id=offer.id, source="Zones")
    create_campaign(db, "Without", "without", offer_id=offer.id)
    campaigns = load_campaigns(db)
    assert campaigns["with"].source_slots == {"zoneid": 4, "campaignid": 1}
    assert campaigns["without"].source_slots is None
    values = {"subid": "S", "sub_id_4": "z 7"}
    for alias, rendered in (
        ("with", "https://shop.example/?s=S&z=z%207"),
        ("without", "https://shop.example/?s=S&z="),
    ):
        (stream,) = campaigns[alias].regular
        assert stream.offers[0].template.render(values, None) == rendered


def test_a_stream_filter_on_a_source_name_is_stored_as_its_slot(db, offer):
    from models.admin.services import AdminError, add_stream, create_campaign, describe_filters, update_stream

    create_campaign(db, "With", "with", offer_id=offer.id, source="Zones")
    create_campaign(db, "Without", "without", offer_id=offer.id)
    stream = add_stream(db, "with", offers=[(offer.id, 100)], filters=["zoneid=7,8", "campaignid!~x"])
    assert describe_filters(stream) == ["sub_id_4=7,8", "sub_id_1!~x"]
    stream = update_stream(db, stream.id, filters=[" ZoneId != 9", "param.zoneid=1"])
    assert describe_filters(stream) == ["sub_id_4!=9", "param.zoneid=1"]
    with pytest.raises(AdminError, match="zoneid"):  # Not this campaign's source's name.
        add_stream(db, "without", offers=[(offer.id, 100)], filters=["zoneid=7"])


# -- reports -----------------------------------------------------------------------------------


@pytest.fixture
def report_clicks(db):
    """Campaigns 1 and 2 on source Zones (zoneid in sub_id_1), 3 on Mixed (zoneid in sub_id_3), 4 on
    none; each click's sub_id_1 and sub_id_3 are set, so a report reading the wrong slot or the wrong
    campaigns counts differently."""
    import time

    from models.admin.services import create_campaign
    from models.admin.sources import create_source
    from models.clicks.record import new_subid
    from models.tables.click import Click

    create_source(db, "Zones", "zoneid={zoneid}")
    create_source(db, "Mixed", "zoneid={zoneid}", slots={"zoneid": 3})
    for alias, source in (("a", "Zones"), ("b", "Zones"), ("c", "Mixed"), ("d", None)):
        create_campaign(db, alias, alias, offer_url="https://o.example/?s={subid}", source=source)
    now = int(time.time() * 1000) - 60_000
    rows = [(1, "z1", "x"), (1, "z1", "x"), (2, "z2", "x"), (3, "c1", "z1"), (4, "z1", "z1")]
    for campaign_id, sub_id_1, sub_id_3 in rows:
        Click.create(
            subid=new_subid(),
            created_at=now,
            campaign_id=campaign_id,
            ip="203.0.113.7",
            user_agent="ua",
            ua_hash=zlib.crc32(b"ua"),
            sub_id_1=sub_id_1,
            sub_id_3=sub_id_3,
        )


def report(db, group_by, filters=None, source="auto"):
    from models.reporting.reports import ReportQuery, run_report

    query = ReportQuery(group_by=group_by, filters=filters or {}, preset="today", source=source)
    return run_report(db, query)


def test_a_source_name_groups_and_filters_the_campaigns_that_use_it_in_their_slot(db, report_clicks):
    from models.reporting.reports import ReportError

    message = r"'zoneid' is sub_id_1 in traffic source 'Zones' and sub_id_3 in 'Mixed'"
    with pytest.raises(ReportError, match=message):
        report(db, ("zoneid",))
    by_zone = report(db, ("zoneid",), {"campaign": ("a", "b")})
    assert [(row["zoneid"], row["clicks"]) for row in by_zone.rows] == [("z1", 2), ("z2", 1)]
    assert by_zone.columns[0] == "zoneid" and "zoneid is sub_id_1" in by_zone.notes[0]
    mixed = report(db, ("campaign", "zoneid"), {"campaign": ("c",)})
    assert [(row["campaign"], row["zoneid"], row["clicks"]) for row in mixed.rows] == [(3, "z1", 1)]
    filtered = report(db, ("campaign",), {"campaign": ("a", "b", "d"), "zoneid": ("z1",)})
    assert [(row["campaign"], row["clicks"]) for row in filtered.rows] == [(1, 2)]  # Not d's sub_id_1.
    with pytest.raises(ReportError, match="No campaign of the report uses a traffic source with a parameter"):
        report(db, ("zoneid",), {"campaign": ("d",)})
    with pytest.raises(ReportError, match="names one sub_id slot twice"):
        report(db, ("zoneid", "sub_id_1"), {"campaign": ("a",)})
    with pytest.raises(ReportError, match="Cannot group or filter by 'siteid'"):
        report(db, ("siteid",))


def test_reports_group_and_filter_by_traffic_source_as_the_sums_of_its_campaigns(db, report_clicks):
    from functools import partial

    from models.reporting.reports import ReportError

    raw = partial(report, source="raw")  # The fixture's rows are in no rollup.

    rows = raw(db, ("traffic_source",)).rows
    by_source = {row["traffic_source_name"]: row["clicks"] for row in rows}
    assert by_source == {"Zones": 3, "Mixed": 1, "": 1}  # Campaigns a and b; c; d with none.
    assert [row["traffic_source"] for row in rows if row["traffic_source_name"] == ""] == [None]
    nested = raw(db, ("traffic_source", "campaign")).rows
    assert [(row["traffic_source_name"], row["campaign"], row["clicks"]) for row in nested] == [
        ("Zones", 1, 2),
        ("Zones", 2, 1),
        ("Mixed", 3, 1),
        ("", 4, 1),
    ]
    # Filtered by name or id; 0 is none; with a campaign filter they intersect.
    (zones,) = raw(db, ("traffic_source",), {"traffic_source": ("Zones",)}).rows
    assert zones["clicks"] == 3
    (mixed,) = raw(db, ("campaign",), {"traffic_source": (str(rows[1]["traffic_source"]),)}).rows
    assert mixed["campaign"] == 3
    (none,) = raw(db, ("campaign",), {"traffic_source": ("0",)}).rows
    assert none["campaign"] == 4
    (both,) = raw(db, ("campaign",), {"traffic_source": ("Zones",), "campaign": ("b", "c")}).rows
    assert (both["campaign"], both["clicks"]) == (2, 1)
    with pytest.raises(ReportError, match="There is no traffic source 'Nope'"):
        raw(db, ("campaign",), {"traffic_source": ("Nope",)})


def test_the_panel_s_report_builder_groups_by_a_source_name(panel, users, db, report_clicks):
    cookie = log_in(panel)
    status, _, html = get(panel, "/panel/reports?g1=zoneid&f.campaign=a,b&period=today", cookie)
    assert status == 200 and '<option value="zoneid" selected>zoneid</option>' in html
    # A row's name cell: its box to leave it out of the total, then its label.
    rows = re.findall(r'<td class="name">(?:<input[^>]*> )*([^<]*)</td>\s*<td class="n">(\d+)</td>', html)
    assert rows == [("z1", "2"), ("z2", "1")]  # Campaigns a and b's sub_id_1; not d's, not c's sub_id_3.
    status, _, html = get(panel, "/panel/reports?g1=zoneid&period=today", cookie)
    assert status == 400 and "sub_id_1 in traffic source" in html


# -- the admin API -----------------------------------------------------------------------------


def test_sources_through_the_api(admin, key):
    status, created = call(
        admin, "POST", "/sources", key, {"name": "Zones", "template": ZONES, "slots": ["zoneid=5"]}
    )
    assert status == 201, created
    assert created["parameters"][0] == {"name": "zoneid", "placeholder": "{zoneid}", "field": "sub_id_5"}
    status, started = call(admin, "POST", "/sources", key, {"name": "Prop", "catalogue": "propellerads"})
    assert status == 201 and started["template"].startswith("zoneid={zoneid}")
    assert call(admin, "POST", "/sources", key, {"name": "Zones", "template": "a={a}"})[0] == 409
    status, refused = call(admin, "POST", "/sources", key, {"name": "X", "template": "sub2={z}"})
    assert status == 400 and "already fills a sub_id slot" in refused["description"]
    status, listed = call(admin, "GET", "/sources", key)
    assert [s["name"] for s in listed["items"]] == ["Zones", "Prop"] and listed["next"] is None
    status, changed = call(
        admin, "PATCH", "/sources/Zones", key, {"postback_url": "https://n.example/?c={external_id}"}
    )
    assert status == 200 and changed["postback_url"] == "https://n.example/?c={external_id}"
    assert call(admin, "GET", "/sources/nope", key)[0] == 404
    status, catalogue = call(admin, "GET", "/sources/catalogue", key)
    assert status == 200 and len(catalogue["items"]) >= 12
    status, offer = call(admin, "POST", "/offers", key, {"name": "O", "url": "https://o.example/?z={zoneid}"})
    assert status == 201
    status, campaign = call(
        admin,
        "POST",
        "/campaigns",
        key,
        {"name": "S", "alias": "s", "offer_id": offer["id"], "source": "Zones"},
    )
    assert status == 201 and campaign["source"] == "Zones"
    assert campaign["source_url"] == "/s?" + ZONES
    assert call(admin, "GET", "/sources/Zones", key)[1]["campaigns"] == 1
    status, cleared = call(admin, "PATCH", "/campaigns/s", key, {"clear_source": True})
    assert status == 200 and (cleared["source"], cleared["source_url"]) == (None, "/s")
    source = {"name": "V", "template": "a={a}"}
    assert call(admin, "POST", "/sources", "viewer-key-0123456789", source)[0] == 403


# -- the panel ---------------------------------------------------------------------------------


def test_the_panel_creates_from_the_catalogue_edits_and_picks_a_source(panel, users, db):
    from models.admin.services import create_campaign
    from models.admin.sources import get_source

    cookie = log_in(panel, "bert")
    status, _, html = get(panel, "/panel/sources?catalogue=zeropark", cookie)
    assert status == 200 and 'value="target={target}&amp;campaignid={campaign_id}' in html
    assert "{cid} is Zeropark" in html
    form = {
        "name": "Zeropark",
        "template": "target={target}&external_id={cid}",
        "slots": "target=4",
        "postback_url": "https://zp.example/?cid={external_id}",
        "postback_statuses": "sale",
        "postback_method": "GET",
        "csrf_token": csrf_token(html),
    }
    status, headers, _ = post(panel, "/panel/sources", form, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/sources/1?created=1"
    assert get_source(db, "Zeropark").postback_url == "https://zp.example/?cid={external_id}"
    status, _, body = post(panel, "/panel/sources", {**form, "template": "sub1={x}"}, cookie=cookie)
    assert status == 400 and "already fills a sub_id slot" in body.decode() and "sub1={x}" in body.decode()
    html = get(panel, "/panel/sources/1", cookie)[2]
    assert "<td>sub_id_4</td>" in html and 'value="target=4"' in html
    status, headers, _ = post(
        panel,
        "/panel/sources/1",
        {**form, "slots": "target=6", "status": "active", "csrf_token": csrf_token(html)},
        cookie=cookie,
    )
    assert status == 303 and get_source(db, 1).parameters.count("sub_id_6") == 1
    create_campaign(db, "Pop", "pop", offer_url="https://o.example/?s={subid}", source="Zeropark")
    admin_cookie = log_in(panel)
    html = get(panel, "/panel/campaigns/1", admin_cookie)[2]
    url = re.search(r'value="([^"]*)" aria-label="Campaign URL"', html).group(1)
    assert url.endswith("/pop?target={target}&amp;external_id={cid}")
    listed = get(panel, "/panel/campaigns", admin_cookie)[2]  # The list's URL to copy carries them too.
    assert '/pop?target={target}&amp;external_id={cid}" aria-label' in listed
    assert '<option value="1" selected>Zeropark</option>' in html
    viewer = log_in(panel, "vera")
    assert "New traffic source" not in get(panel, "/panel/sources", viewer)[2]
    token = csrf_token(get(panel, "/panel/sources", viewer)[2])
    assert post(panel, "/panel/sources", {**form, "name": "V", "csrf_token": token}, cookie=viewer)[0] == 403


# -- end to end: a real server, consumer and target ----------------------------------------------


def test_a_source_s_click_macro_postback_and_report_end_to_end(
    db, lanner, start_server, start_consumer, target_server
):
    from models.admin.services import create_campaign, create_offer
    from models.conversions.postbacks import read_secret

    target = target_server()
    lanner(
        "source",
        "create",
        "Zones",
        "--template",
        ZONES,
        "--postback",
        target.base + "/cb?c={external_id}&z={zoneid}&p={payout}",
    )
    lanner("source", "update", "Zones", "--slot", "zoneid=3")
    shown = json.loads(lanner("source", "show", "Zones", "--json").stdout)
    assert [(p["name"], p["field"]) for p in shown["parameters"]] == [
        ("zoneid", "sub_id_3"),
        ("cost", "cost"),
        ("external_id", "external_id"),
        ("campaignid", "sub_id_2"),
    ]
    offer = create_offer(db, "Shop", "https://shop.example/?click={subid}&z={zoneid}&c={campaignid}")
    create_campaign(db, "With", "with", offer_id=offer.id, source="Zones")
    create_campaign(db, "Without", "without", offer_id=offer.id)
    shown = json.loads(lanner("campaign", "show", "with", "--json").stdout)
    assert (shown["source"], shown["source_url"]) == ("Zones", "/with?" + ZONES)
    key = read_secret(db, "postback_key")
    server = start_server(workers=1)
    start_consumer(LANNER_FLUSH_INTERVAL="0.1")

    # The source's names win their slots over sub3; a campaign without the source reads sub3 as before.
    sent = "zoneid=z%2077&campaignid=9&external_id=ext-1&sub3=no&cost=0.5"
    status, headers, _ = click(server.port, "with", sent)
    assert status == 302
    query = parse_qs(urlsplit(headers["location"]).query)
    assert (query["z"], query["c"]) == (["z 77"], ["9"])
    subid = query["click"][0]
    simulated = json.loads(lanner("simulate", "/with?zoneid=z5&sub3=no", "--ip", "8.8.8.8", "--json").stdout)
    assert "&z=z5&" in simulated["decision"]["location"]
    status, headers, _ = click(server.port, "without", "zoneid=z9&sub3=yes", ip="203.0.113.8")
    assert status == 302 and headers["location"].endswith("&z=&c=")

    status, _, body = request(server.port, f"/{key}/postback?subid={subid}&status=sale&payout=2.5")
    assert status == 200 and json.loads(body)["verdict"] in ("created", "parked")
    (seen,) = target.wait_for(1, deadline_seconds=20)
    assert seen.path == "/cb?c=ext-1&z=z%2077&p=2.5"

    rows = json.loads(lanner("report", "-g", "zoneid", "--preset", "today", "--json").stdout)["rows"]
    assert [(row["zoneid"], row["clicks"], row["sales"]) for row in rows] == [("z 77", 1, 1)]
    rows = json.loads(lanner("report", "-g", "campaign", "-f", "zoneid=z 77", "--json").stdout)["rows"]
    assert [(row["campaign"], row["clicks"]) for row in rows] == [(1, 1)]


def test_a_source_no_campaign_uses_is_deleted_by_cli_api_and_panel(db, lanner, admin, key, panel, users):  # noqa: F811
    from models.admin.services import AdminConflict, create_campaign, update_campaign
    from models.admin.sources import create_source, delete_source, list_sources

    create_source(db, "Zones", "zoneid={zoneid}", postback_url="https://n.example/?c={external_id}")
    create_source(db, "Push", "zone={zone}")
    create_source(db, "Pop", "site={site}")
    create_campaign(db, "A", "a", offer_url="https://o.example/", source="Zones")
    with pytest.raises(AdminConflict, match=r"'Zones' is the source of campaign a: give them another source"):
        delete_source(db, "Zones")
    result = lanner("source", "delete", "Zones", check=False)
    assert result.returncode != 0 and "is the source of campaign a" in result.stderr
    update_campaign(db, "a", clear_source=True)  # Its source-made postback target goes (removed, kept).
    assert lanner("source", "delete", "Zones").stdout.strip() == "Traffic source Zones deleted."
    assert call(admin, "DELETE", "/sources/Push", "viewer-key-0123456789")[0] == 403
    status, deleted = call(admin, "DELETE", "/sources/Push", key)
    assert status == 200 and deleted["name"] == "Push"
    assert call(admin, "DELETE", "/sources/Push", key)[0] == 404
    cookie = log_in(panel)
    page = get(panel, "/panel/sources/3", cookie)[2]
    form = {"do": "delete", "csrf_token": csrf_token(page)}
    status, headers, _ = post(panel, "/panel/sources/3", form, cookie=cookie)
    assert status == 303 and "Traffic source Pop deleted." in get(panel, headers["location"], cookie)[2]
    assert list_sources(db, include_archived=True) == []
    rows = db.execute_sql("SELECT source_id, status FROM postback_target").fetchall()
    assert rows == [(None, "removed")]


def test_who_may_not_change_sources_sees_only_the_host_of_a_postback_url(db, admin, key, panel, users):  # noqa: F811
    from models.admin.sources import create_source

    secret = "https://tsyndicate.example/api/v1/cpa/action?value={payout}&key=S3CRET-KEY&action={external_id}"
    create_source(db, "Stars", "sid={sid}&external_id={clickid}", postback_url=secret)
    hidden = "https://tsyndicate.example/… (hidden: only who may change sources sees it)"
    assert call(admin, "GET", "/sources/Stars", key)[1]["postback_url"] == secret
    status, one = call(admin, "GET", "/sources/Stars", "viewer-key-0123456789")
    assert status == 200 and one["postback_url"] == hidden
    listed = call(admin, "GET", "/sources", "viewer-key-0123456789")[1]["items"]
    assert [s["postback_url"] for s in listed] == [hidden]
    # A buyer changes sources.
    assert "S3CRET-KEY" in get(panel, "/panel/sources/1", log_in(panel, "bert"))[2]
    page = get(panel, "/panel/sources/1", log_in(panel, "vera"))[2]
    assert "S3CRET-KEY" not in page and "tsyndicate.example/… (hidden" in page


def test_a_buyer_refused_a_source_s_delete_is_told_of_their_own_campaigns_by_name_only(db, users):  # noqa: F811
    from models.accounts.principal import user_principal
    from models.admin.services import AdminConflict, create_campaign
    from models.admin.sources import create_source, delete_source

    create_source(db, "Zones", "zoneid={zoneid}")
    bert = users["bert"]
    create_campaign(db, "Secret", "secretplan", offer_url="https://o.example/", source="Zones")
    create_campaign(db, "B", "bees", offer_url="https://o.example/", source="Zones", owner_id=bert.id)
    with pytest.raises(AdminConflict) as refused:
        delete_source(db, "Zones", actor=user_principal(bert.id, "bert", "buyer", False))
    assert str(refused.value) == (
        "Traffic source 'Zones' is the source of campaign bees and 1 campaign not shared with you: give them "
        "another source (or none) first, or archive it."
    )
    with pytest.raises(AdminConflict, match="is the source of campaigns bees, secretplan:"):
        delete_source(db, "Zones")
