"""The offers, traffic sources, networks and landers lists (routes/panel/listtable.py) in process on a real
migrated database: each sorted by any column with two keys (rows without a value last), filtered, its
period's numbers as SQL counts them, and its CSV exactly the rows, order and columns the page shows,
without money for a user who hides it; the campaign list's "with traffic" filter and report links."""

# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
from __future__ import annotations

import csv
import html as htmllib
import io
import re

import pytest
from conftest import request
from test_panel import clicks, get, log_in, make_panel, own, panel, users  # noqa: F401


@pytest.fixture
def listed(db, clicks):
    """Over the 250 generated clicks of gen-0 and gen-1 (offers 1, 2): two more offers without clicks,
    sources Push (gen-0) and Pop (gen-1) and an unused archived one, network Net A with offer 1 and an
    archived network, landers used by gen-0 and by nothing, sales on 7 clicks of gen-0."""
    from test_panel_logs import imported, stored_subids

    from models.admin.landers import create_lander, update_lander
    from models.admin.services import add_stream, create_offer, update_campaign, update_offer
    from models.admin.sources import create_source, update_source
    from models.conversions.networks import create_network, update_network

    create_offer(db, "zulu offer", "https://zulu.example/", payout=9, daily_cap=100)
    create_offer(db, "Alpha offer", "https://alpha.example/", payout=1)
    create_source(db, "Push", "zone={zoneid}")
    create_source(db, "Pop", "")
    old = create_source(db, "Old source", "")
    update_source(db, old.id, status="archived")
    update_campaign(db, 1, source="Push")
    update_campaign(db, 2, source="Pop")
    net = create_network(db, "Net A", alias="neta", subid_macro="{sub1}")
    archived = create_network(db, "Net Old", alias="netold", subid_macro="{clickid}")
    update_network(db, archived.id, status="archived")
    update_offer(db, 1, network_id=net.id)
    used = create_lander(db, "Used LP", url="https://lp.example/?s={subid}")
    create_lander(db, "Idle LP", url="https://idle.example/")
    gone = create_lander(db, "Gone LP", url="https://gone.example/")
    update_lander(db, gone.id, status="archived")
    add_stream(db, 1, name="via lp", offers=[(1, 100)], landers=[(used.id, 100)], filters=["keyword=lp"])
    imported(db, stored_subids(db, 1)[:7])


def sql(db, statement: str, params: tuple = ()) -> list[tuple]:
    cursor = db.connection().execute(statement, params)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def names(html: str, path: str) -> list[str]:
    """The names in the list's rows, in order (each row's first link to one of `path`'s pages)."""
    found = re.findall(rf'<td class="name"><a href="{path}/\d+">([^<]*)</a>', html)
    return [htmllib.unescape(name) for name in found]


def sort_link(html: str, column: str) -> str:
    return htmllib.unescape(
        re.search(rf'<a href="\?([^"]*)" class="sort" data-sort="{column}">', html).group(1)
    )


def read_csv(panel, cookie, path: str) -> list[list[str]]:
    status, headers, body = request(panel, path, {"Cookie": cookie})
    assert status == 200 and headers["content-type"] == "text/csv; charset=utf-8", body
    assert headers["content-disposition"].startswith("attachment;")
    return list(csv.reader(io.StringIO(body.decode())))


def test_offers_sort_by_two_keys_and_the_csv_is_the_list_as_shown(panel, users, listed, db):
    admin = log_in(panel)
    html = get(panel, "/panel/offers?period=last_7_days", admin)[2]
    assert names(html, "/panel/offers") == [
        "Generated offer 0",
        "Generated offer 1",
        "zulu offer",
        "Alpha offer",
    ]
    link = sort_link(html, "clicks")
    assert link == "period=last_7_days&status=current&sort=-clicks"
    html = get(panel, f"/panel/offers?{link}", admin)[2]
    by_sql = dict(sql(db, "SELECT offer_id, COUNT(*) FROM click GROUP BY offer_id"))
    first_two = sorted(((by_sql[1], "Generated offer 0"), (by_sql[2], "Generated offer 1")), reverse=True)
    assert names(html, "/panel/offers")[:2] == [name for _, name in first_two]
    # Then by name: name first, clicks second; the two without clicks tie on clicks, and A comes before z.
    link = sort_link(html, "name")
    assert link.endswith("sort=name,-clicks")
    html = get(panel, f"/panel/offers?{link}", admin)[2]
    assert names(html, "/panel/offers") == [
        "Alpha offer",
        "Generated offer 0",
        "Generated offer 1",
        "zulu offer",
    ]
    assert 'title="sort key 2">▼2</span>' in html
    html = get(panel, "/panel/offers?period=last_7_days&sort=clicks,-name", admin)[2]
    assert names(html, "/panel/offers")[:2] == ["zulu offer", "Alpha offer"]
    # No EPC without clicks: last whichever the direction; the network named, not numbered.
    for sort in ("epc", "-epc"):
        assert names(get(panel, f"/panel/offers?period=last_7_days&sort={sort}", admin)[2], "/panel/offers")[
            2:
        ] == [
            "zulu offer",
            "Alpha offer",
        ]
    assert '<a href="/panel/networks/1">Net A</a>' in html
    assert names(get(panel, "/panel/offers?q=net+a", admin)[2], "/panel/offers") == ["Generated offer 0"]

    query = "period=last_7_days&status=current&sort=-conversions,name"
    html = get(panel, f"/panel/offers?{query}", admin)[2]
    assert f'href="/panel/offers.csv?{query.replace("&", "&amp;")}"' in html
    rows = read_csv(panel, admin, f"/panel/offers.csv?{query}")
    assert rows[0] == [
        "Offer",
        "URL",
        "Status",
        "Network",
        "Payout",
        "Payout currency",
        "Daily cap",
        "Total cap",
        "Clicks",
        "Conv.",
        "CR",
        "Revenue",
        "EPC",
    ]
    assert [row[0] for row in rows[1:]] == names(html, "/panel/offers")
    assert rows[1][:4] == ["Generated offer 0", "https://offer0.example/?click={subid}", "active", "Net A"]
    assert int(rows[1][8]) == by_sql[1] and rows[1][9] == "7" and rows[1][11] == "17.50"
    assert rows[4][0] == "zulu offer" and rows[4][6] == "100" and rows[4][4] == "9.00"
    # A user who hides money: no amount in the page's headers, its sort or its CSV.
    own(db, 2, users["frugal"])
    frugal = log_in(panel, "frugal")
    assert get(panel, "/panel/offers?sort=-epc", frugal)[0] == 400
    rows = read_csv(panel, frugal, "/panel/offers.csv?sort=name")
    assert rows[0] == [
        "Offer",
        "URL",
        "Status",
        "Network",
        "Daily cap",
        "Total cap",
        "Clicks",
        "Conv.",
        "CR",
    ]
    assert "Generated offer 0" not in [row[0] for row in rows]  # Campaign 1's, not theirs.


def test_sources_and_networks_show_the_period_s_numbers_sorted_filtered_and_as_csv(panel, users, listed, db):
    admin = log_in(panel)
    per_campaign = dict(sql(db, "SELECT campaign_id, COUNT(*) FROM click GROUP BY campaign_id"))
    html = get(panel, "/panel/sources?period=last_7_days&sort=-clicks", admin)[2]
    expected = sorted(((per_campaign[1], "Push"), (per_campaign[2], "Pop")), reverse=True)
    assert names(html, "/panel/sources") == [name for _, name in expected]  # The archived one: not current.
    rows = read_csv(panel, admin, "/panel/sources.csv?period=last_7_days&sort=-clicks")
    assert rows[0] == [
        "Source",
        "Parameters",
        "Status",
        "Campaigns",
        "Postback",
        "Clicks",
        "Conv.",
        "CR",
        "Cost",
        "Revenue",
        "Profit",
        "ROI",
        "CPC",
    ]
    by_name = {row[0]: row for row in rows[1:]}
    assert int(by_name["Push"][5]) == per_campaign[1] and by_name["Push"][6] == "7"
    assert by_name["Push"][1] == "zone={zoneid}" and by_name["Push"][9] == "17.50"
    assert by_name["Pop"][6] == "0" and by_name["Pop"][7] == "0.0"
    everything = read_csv(panel, admin, "/panel/sources.csv?status=all&sort=name")
    assert [row[0] for row in everything[1:]] == ["Old source", "Pop", "Push"]
    assert [row[0] for row in read_csv(panel, admin, "/panel/sources.csv?status=archived")[1:]] == [
        "Old source"
    ]

    html = get(panel, "/panel/networks?period=last_7_days&status=all&sort=-name", admin)[2]
    assert names(html, "/panel/networks") == ["Net Old", "Net A"]
    rows = read_csv(panel, admin, "/panel/networks.csv?period=last_7_days")
    assert rows[0][:9] == ["Network", "Alias", "Status", "Offers", "Clicks", "Conv.", "CR", "Revenue", "EPC"]
    assert rows[1][:4] == ["Net A", "neta", "active", "1"] and len(rows) == 2
    assert int(rows[1][4]) == per_campaign[1] and rows[1][5] == "7" and rows[1][7] == "17.50"
    assert rows[1][9] == "{sub1}"
    frugal = log_in(panel, "frugal")
    for path in ("/panel/sources.csv", "/panel/networks.csv"):
        header = read_csv(panel, frugal, path)[0]
        assert not {"Cost", "Revenue", "Profit", "ROI", "EPC", "CPC"} & set(header), ",".join(header)
    html = get(panel, "/panel/sources?period=last_7_days", frugal)[2]
    assert "Revenue" not in html and "USD" not in html


def test_landers_sort_filter_and_export_the_streams_a_user_sees(panel, users, listed, db):
    admin = log_in(panel)
    html = get(panel, "/panel/landers?sort=-streams,name", admin)[2]
    assert names(html, "/panel/landers") == ["Used LP", "Idle LP"]
    assert names(get(panel, "/panel/landers?status=all&sort=name", admin)[2], "/panel/landers") == [
        "Gone LP",
        "Idle LP",
        "Used LP",
    ]
    assert names(get(panel, "/panel/landers?q=idle.example", admin)[2], "/panel/landers") == ["Idle LP"]
    rows = read_csv(panel, admin, "/panel/landers.csv?sort=-streams,name")
    assert rows[0] == ["Lander", "URL or path", "Kind", "Status", "Streams", "Used by"]
    stream = sql(db, "SELECT id FROM stream WHERE name = 'via lp'")[0][0]
    assert rows[1] == [
        "Used LP",
        "https://lp.example/?s={subid}",
        "remote",
        "active",
        "1",
        f"gen-0 #{stream} (100)",
    ]
    assert rows[2][0] == "Idle LP" and rows[2][4:] == ["0", ""]
    assert get(panel, "/panel/landers?sort=bogus", admin)[0] == 400
    assert get(panel, "/panel/landers?status=gone", admin)[0] == 400


def test_the_campaign_list_keeps_only_campaigns_with_traffic_and_links_each_to_its_report(
    panel, users, listed, db
):
    from models.admin.services import create_campaign

    create_campaign(db, "Quiet", "quiet", offer_url="https://q.example/")
    admin = log_in(panel)
    html = get(panel, "/panel/campaigns?period=last_7_days", admin)[2]
    assert "Quiet" in html and 'id="traffic"' in html
    html = get(panel, "/panel/campaigns?period=last_7_days&traffic=1&sort=-clicks", admin)[2]
    assert "Quiet" not in html and "Generated 0" in html and "Generated 1" in html
    assert 'href="?period=yesterday&amp;status=current&amp;q=&amp;traffic=1&amp;sort=-clicks"' in html
    assert (
        'href="/panel/campaigns.csv?period=last_7_days&amp;status=current&amp;traffic=1&amp;sort=-clicks"'
        in html
    )
    rows = read_csv(panel, admin, "/panel/campaigns.csv?period=last_7_days&traffic=1")
    assert [row[0] for row in rows[1:]] == ["Generated 0", "Generated 1", "Total"]
    report = re.search(r'<a href="(/panel/reports\?[^"]*f.campaign=1)" class="report-link">', html).group(1)
    status, _, page = get(panel, htmllib.unescape(report), admin)
    assert status == 200 and '<span class="chip">Campaign = 1 ' in page
    total = re.search(r'<tfoot>.*?<td class="n">([\d,]+)</td>', page, re.S).group(1)
    assert int(total.replace(",", "")) == sql(db, "SELECT COUNT(*) FROM click WHERE campaign_id = 1")[0][0]


def test_a_custom_range_counts_its_days_and_every_link_keeps_it(panel, users, listed, db):
    import datetime

    admin = log_in(panel)
    today = datetime.datetime.now(datetime.UTC).date()
    days = f"from={today - datetime.timedelta(days=3)}&to={today}"
    html = get(panel, f"/panel/offers?period=custom&{days}&sort=-clicks", admin)[2]
    assert '<button type="submit" id="range-apply" aria-current="true">' in html
    assert (
        f'<input type="date" name="from" id="range-from" value="{today - datetime.timedelta(days=3)}"' in html
    )
    assert '<input type="hidden" name="sort" value="-clicks">' in html  # The range form keeps the sort.
    link = sort_link(html, "name")
    assert link == f"period=custom&{days}&status=current&sort=name,-clicks"
    rows = read_csv(panel, admin, f"/panel/offers.csv?period=custom&{days}&sort=-clicks")
    assert sum(int(row[8]) for row in rows[1:]) == 250
    # Days without clicks count none, in the list and its CSV alike; the campaign list takes a range too.
    rows = read_csv(panel, admin, "/panel/sources.csv?from=2020-01-01&to=2020-01-31")
    assert {row[5] for row in rows[1:]} == {"0"}
    html = get(panel, "/panel/campaigns?period=custom&from=2020-01-01&to=2020-01-31&traffic=1", admin)[2]
    assert "No campaigns match." in html
    html = get(panel, f"/panel/campaigns?period=custom&{days}", admin)[2]
    assert "f.campaign=1" in html and f"period=custom&amp;{days.replace('&', '&amp;')}&amp;g1=stream" in html
    for bad in ("from=2020-13-01x", "from=yesterday", "period=custom", "from=2020-02-01&to=2020-01-01"):
        status, _, page = get(panel, f"/panel/networks?{bad}", admin)
        assert status == 400 and ("YYYY-MM-DD" in page or "from" in page), bad


def test_tags_set_in_the_editor_group_the_campaign_list_for_those_who_see_the_campaigns(
    panel, users, listed, db
):
    from test_panel import csrf_token, post

    from models.accounts.audit import list_audit
    from models.admin.tags import campaign_tags

    admin = log_in(panel)

    def save(campaign_id: int, alias: str, tags: str, cookie=admin):
        page = get(panel, f"/panel/campaigns/{campaign_id}", cookie)[2]
        fields = {
            "csrf_token": csrf_token(page),
            "name": f"Generated {campaign_id - 1}",
            "alias": alias,
            "status": "active",
            "rotation": "position",
            "uniqueness_hours": "24",
            "timezone": "UTC",
            "default_action": "not_found",
            "cost_model": "cpc",
            "cost_value": "0",
            "tags": tags,
        }
        return post(panel, f"/panel/campaigns/{campaign_id}", fields, cookie=cookie)

    assert save(1, "gen-0", " Push ,tier  1, push,")[0] == 303
    assert save(2, "gen-1", "Pop, tier 1")[0] == 303
    assert campaign_tags(db) == {1: ["Push", "tier 1"], 2: ["Pop", "tier 1"]}
    assert 'id="campaign-tags" value="Push, tier 1"' in get(panel, "/panel/campaigns/1", admin)[2]
    entry = next(e for e in list_audit(db, entity="campaign", entity_id=1) if "tags" in e.new_values)
    assert entry.actor == "anna" and entry.new_values["tags"] == ["Push", "tier 1"]
    status, _, page = save(1, "gen-0", "x" * 41)
    assert status == 400 and "A tag is at most 40 characters" in page.decode()
    assert campaign_tags(db)[1] == ["Push", "tier 1"]  # Refused whole: the settings neither.

    html = get(panel, "/panel/campaigns?period=last_7_days&tag=TIER+1&sort=name", admin)[2]
    assert names(html, "/panel/campaigns") == ["Generated 0", "Generated 1"]
    assert "<option selected>tier 1</option>" in html and "<option>Pop</option>" in html
    html = get(panel, "/panel/campaigns?period=last_7_days&tag=push", admin)[2]
    assert names(html, "/panel/campaigns") == ["Generated 0"]
    assert '<a class="tag" href="?period=last_7_days&amp;tag=Pop">Pop</a>' not in html
    assert '<a class="tag" href="?period=last_7_days&amp;tag=Push">Push</a>' in html
    assert 'href="?period=yesterday&amp;status=current&amp;q=&amp;tag=push"' in html
    rows = read_csv(panel, admin, "/panel/campaigns.csv?period=last_7_days&tag=tier+1&sort=-name")
    assert [(row[0], row[3]) for row in rows[1:-1]] == [
        ("Generated 1", "Pop, tier 1"),
        ("Generated 0", "Push, tier 1"),
    ]
    # A buyer sees the tags of their campaigns only, in the choices and the rows alike.
    own(db, 2, users["bert"])
    html = get(panel, "/panel/campaigns", log_in(panel, "bert"))[2]
    assert "Push" not in html and "<option>Pop</option>" in html
    assert names(get(panel, "/panel/campaigns?tag=push", log_in(panel, "bert"))[2], "/panel/campaigns") == []


def test_the_click_log_csv_streams_every_click_its_filters_select_over_many_chunks(panel, users, db):
    from routes.panel.logs import CSV_CHUNK
    from workers.bench.generate import generate_clicks

    wanted = CSV_CHUNK * 2 + 17
    assert generate_clicks(db, wanted, 1, campaigns=2, seed=3) == wanted
    admin = log_in(panel)
    html = get(panel, "/panel/clicks?campaign=2&bots=humans&period=last_7_days&limit=20", admin)[2]
    assert 'href="/panel/clicks.csv?campaign=2&amp;bots=humans&amp;period=last_7_days"' in html
    rows = read_csv(panel, admin, "/panel/clicks.csv?period=last_7_days")
    assert rows[0][:8] == [
        "Time",
        "Subid",
        "Campaign",
        "Campaign id",
        "Stream",
        "Stream id",
        "Offer",
        "Offer id",
    ]
    newest_first = [s for (s,) in sql(db, "SELECT subid FROM click ORDER BY created_at DESC, id DESC")]
    assert [row[1] for row in rows[1:]] == newest_first and len(newest_first) == wanted
    assert {row[2] for row in rows[1:]} == {"Generated 0", "Generated 1"} and rows[1][6].startswith(
        "Generated offer"
    )
    humans = read_csv(panel, admin, "/panel/clicks.csv?campaign=2&bots=humans")
    expected = sql(db, "SELECT COUNT(*) FROM click WHERE campaign_id = 2 AND is_bot = 0")[0][0]
    assert (
        len(humans) - 1 == expected
        and {row[3] for row in humans[1:]} == {"2"}
        and {r[14] for r in humans[1:]} == {"0"}
    )
    # A buyer's CSV holds their campaigns' clicks only; another's campaign is no campaign.
    own(db, 2, users["bert"])
    bert = log_in(panel, "bert")
    theirs = read_csv(panel, bert, "/panel/clicks.csv")
    assert len(theirs) - 1 == sql(db, "SELECT COUNT(*) FROM click WHERE campaign_id = 2")[0][0]
    assert request(panel, "/panel/clicks.csv?campaign=1", {"Cookie": bert})[0] == 404


def test_the_audit_log_csv_is_every_change_its_filters_select_a_line_per_field(panel, users, listed, db):
    from models.accounts.audit import list_audit

    admin = log_in(panel)
    html = get(panel, "/panel/audit?entity=offer", admin)[2]
    assert 'href="/panel/audit.csv?period=all_time&amp;entity=offer"' in html
    rows = read_csv(panel, admin, "/panel/audit.csv?period=all_time&entity=offer")
    assert rows[0] == ["Time", "Who", "Action", "Entity", "Entity id", "Field", "Old", "New"]
    entries = list_audit(db, entity="offer", limit=1000)
    lines = [
        (str(e.entity_id), name) for e in entries for name in sorted({*e.old_values, *e.new_values}) or [""]
    ]
    assert [(row[4], row[5]) for row in rows[1:]] == lines and {row[3] for row in rows[1:]} == {"offer"}
    update = next(row for row in rows[1:] if row[2] == "update" and row[5] == "network_id")
    assert update[4] == "1" and update[6] == "null" and update[7] == "1"
    every = list_audit(db, limit=100_000)
    assert len(read_csv(panel, admin, "/panel/audit.csv")) - 1 >= len(every) > len(entries)
    assert request(panel, "/panel/audit.csv", {"Cookie": log_in(panel, "bert")})[0] == 403
    assert request(panel, "/panel/audit.csv?period=forever", {"Cookie": admin})[0] == 400


def test_the_postback_log_csv_is_each_tab_as_its_filters_select_for_who_may_open_it(panel, users, clicks, db):
    from test_panel_logs import stored_subids

    from models.conversions.admin import add_target
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback

    add_target(db, "1", "https://source.example/cb?c={subid}&p={payout}", ["sale"])
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = stored_subids(db, 1)[:12]
    for n, subid in enumerate(subids):
        status = "sale" if n % 3 else "lead"
        recorder.record(
            parse_postback({"subid": subid, "status": status, "payout": "5", "tid": f"t{n}"}),
            Received("GET", "203.0.113.9", f"/postback?subid={subid}&status={status}&tid=t{n}"),
        )
    admin = log_in(panel)
    html = get(panel, "/panel/postback-log?log=postbacks&verdict=created", admin)[2]
    assert 'href="/panel/postback-log.csv?log=postbacks&amp;verdict=created"' in html
    rows = read_csv(panel, admin, "/panel/postback-log.csv?log=postbacks")
    assert rows[0][:4] == ["Received", "Verdict", "Subid", "Tid"]
    newest_first = [s for (s,) in sql(db, "SELECT subid FROM postback_log ORDER BY id DESC")]
    assert [row[2] for row in rows[1:]] == newest_first and set(newest_first) == set(subids)
    assert rows[1][7].startswith("/postback?subid=")
    rows = read_csv(panel, admin, "/panel/postback-log.csv?log=deliveries&state=pending")
    assert rows[0] == [
        "Created",
        "State",
        "Status",
        "Attempts",
        "Answer",
        "Error",
        "Conversion",
        "Campaign",
        "URL",
    ]
    named = {name for (name,) in sql(db, "SELECT name FROM campaign WHERE id = 1")}
    assert {row[7] for row in rows[1:]} == named  # The conversions' campaign by its name.
    wanted = sql(db, "SELECT COUNT(*) FROM postback_delivery WHERE state = 'pending'")[0][0]
    conversions = {str(c) for (c,) in sql(db, "SELECT conversion_id FROM postback_delivery")}
    assert len(rows) - 1 == wanted == 8 and {row[6] for row in rows[1:]} == conversions
    # A buyer: the deliveries of their campaigns only, no incoming; money hidden: nothing at all.
    own(db, 2, users["bert"])
    bert = log_in(panel, "bert")
    assert len(read_csv(panel, bert, "/panel/postback-log.csv")) == 1
    assert request(panel, "/panel/postback-log.csv?log=postbacks", {"Cookie": bert})[0] == 403
    own(db, 1, users["frugal"])
    assert request(panel, "/panel/postback-log.csv", {"Cookie": log_in(panel, "frugal")})[0] == 403
