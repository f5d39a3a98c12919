"""The panel's report builder (/panel/reports) in process on a real migrated database: drill-down over
three levels with each step's filter carried, sort, the column chooser, totals against the API's
report, the CSV against the table, hide-money, visibility, bad parameters and escaping.
tests/test_panel_browser_reports.py draws its chart and clicks a drill-down in a real browser."""

from __future__ import annotations

import csv
import html as htmlib
import io
import json
import re
import urllib.parse
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from conftest import request
from test_panel import clicks, log_in, make_panel, own, users  # noqa: F401 (fixtures)

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

WEEK = "/panel/reports?period=last_7_days"


def page(app, path, cookie) -> tuple[int, str]:
    status, _, body = request(app, path, {"Cookie": cookie})
    return status, body.decode()


def ok(app, path, cookie) -> str:
    status, html = page(app, path, cookie)
    assert status == 200, html
    return html


def text(fragment: str) -> str:
    return htmlib.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def table(html: str) -> dict:
    """The report table: headers, rows (cells as shown; the first without its small print), each
    row's drill-down link, the totals row."""
    body = re.search(r'<table class="report">(.*?)</table>', html, re.S).group(1)
    head = re.search(r"<thead>(.*?)</thead>", body, re.S).group(1)
    headers = [text(th) for th in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)]
    rows, links = [], []
    for tr in re.findall(r"<tr>(.*?)</tr>", re.search(r"<tbody>(.*?)</tbody>", body, re.S).group(1), re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        if 'class="empty"' in tr:
            continue
        rows.append([text(re.sub(r"<small>.*?</small>", "", cells[0]))] + [text(c) for c in cells[1:]])
        link = re.search(r'class="drill-down" href="([^"]+)"', tr)
        links.append(htmlib.unescape(link.group(1)) if link else None)
    foot = re.search(r"<tfoot>(.*?)</tfoot>", body, re.S).group(1)
    total = [text(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", foot, re.S)]
    return {"headers": headers, "rows": rows, "links": links, "total": total}


def number(shown: str) -> float:
    return float(shown.replace(",", "").replace("%", "").split(" ")[0])


def column(tab: dict, name: str) -> list[str]:
    index = tab["headers"].index(name)
    return [row[index] for row in tab["rows"]]


def breadcrumb(html: str) -> list[tuple[str, str | None]]:
    nav = re.search(r'<nav class="drill"[^>]*>(.*?)</nav>', html, re.S).group(1)
    steps = [
        (text(label), htmlib.unescape(href))
        for href, label in re.findall(r'<a href="([^"]+)">(.*?)</a>', nav)
    ]
    current = re.search(r'<span aria-current="page">(.*?)</span>', nav, re.S)
    return steps + [(text(current.group(1)), None)]


def chart(html: str) -> dict:
    return json.loads(re.search(r'id="report-chart-data">(.*?)</script>', html, re.S).group(1))


def api_report(db, **params):
    from routes.api import report_from_parameters

    return report_from_parameters(db, {"preset": "last_7_days", **params})


@pytest.fixture
def panel(make_panel):
    return make_panel()


@pytest.fixture
def costs(db, clicks):
    """Campaign 1's clicks cost 100.00 in all (so its profit is negative)."""
    from models.reporting.costs import spread_cost

    spread_cost(db, 1, 0, 2**42, 100.0)


def set_sub_id(db, slot: int, value: str, every: int = 5) -> int:
    """Give every `every`th click `value` as its sub_id_N (tests only: the tracker stores them)."""
    db.connection().execute(f"UPDATE click SET sub_id_{slot} = ? WHERE id % ? = 0", (value, every))
    return (
        db.connection().execute(f"SELECT COUNT(*) FROM click WHERE sub_id_{slot} = ?", (value,)).fetchone()[0]
    )


# -- levels, drill-down, totals ---------------------------------------------------------------


def test_the_first_level_is_a_table_whose_totals_are_the_api_s(panel, users, costs, db):
    html = ok(panel, WEEK, log_in(panel))
    tab = table(html)
    assert sorted(row[0] for row in tab["rows"]) == ["Generated 0", "Generated 1"]
    api = api_report(db, group="campaign")
    headers = [h.rstrip(" ▲▼") for h in tab["headers"]]
    assert headers == [
        "Campaign",
        "Clicks",
        "Unique",
        "Conv.",
        "CR",
        "Revenue",
        "Cost",
        "Profit",
        "ROI",
        "EPC",
    ]
    total = dict(zip(headers, tab["total"], strict=True))
    assert number(total["Clicks"]) == api.total["clicks"] == 250
    assert number(total["Unique"]) == api.total["unique_clicks"]
    assert total["Cost"] == f"{api.total['cost']:,.2f} USD" == "100.00 USD"
    assert total["Profit"] == "-100.00 USD" and total["ROI"] == "-100.0%"
    by_campaign = {row["campaign"]: row for row in api.rows}
    for row in tab["rows"]:
        campaign_id = 1 if row[0] == "Generated 0" else 2
        assert number(row[1]) == by_campaign[campaign_id]["clicks"]
    # Sorted by clicks, most first, by default.
    clicks_shown = [number(value) for value in column(tab, "Clicks ▼")]
    assert clicks_shown == sorted(clicks_shown, reverse=True)


def test_three_levels_drill_down_each_row_carrying_its_filter_and_a_breadcrumb_back(panel, users, clicks, db):
    cookie = log_in(panel)
    start = WEEK + "&g1=campaign&g2=country&g3=sub_id_2"
    level1 = table(ok(panel, start, cookie))
    gen0 = level1["links"][[row[0] for row in level1["rows"]].index("Generated 0")]
    assert "d1=1" in gen0

    html = ok(panel, gen0, cookie)
    level2 = table(html)
    assert level2["headers"][0].startswith("Country")
    campaign = api_report(db, group="country", **{"f.campaign": "1"})
    assert (
        sum(number(v) for v in column(level2, "Clicks ▼"))
        == campaign.total["clicks"]
        == number(level2["total"][1])
    )
    assert [label for label, _ in breadcrumb(html)] == ["All", "Campaign: Generated 0"]
    back = urllib.parse.urlsplit(breadcrumb(html)[0][1])
    assert back.path == "/panel/reports" and "d1" not in urllib.parse.parse_qs(
        back.query, keep_blank_values=True
    )
    assert table(ok(panel, breadcrumb(html)[0][1], cookie))["rows"] == level1["rows"]  # The way back.

    country = level2["rows"][0][0]
    html = ok(panel, level2["links"][0], cookie)
    level3 = table(html)
    assert level3["headers"][0].startswith("Sub ID 2")
    expected = api_report(db, group="sub_id_2", **{"f.campaign": "1", "f.country": country})
    assert number(level3["total"][1]) == expected.total["clicks"] > 0
    assert sorted(row[0] for row in level3["rows"]) == sorted(row["sub_id_2"] for row in expected.rows)
    assert level3["links"] == [None] * len(level3["rows"])  # The last level drills no further.
    steps = breadcrumb(html)
    assert [label for label, _ in steps] == [
        "All",
        "Campaign: Generated 0",
        f"Country: {country}",
    ]
    assert table(ok(panel, steps[1][1], cookie))["rows"] == level2["rows"]


def test_a_day_row_drills_into_that_day_s_range(panel, users, db):
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 300, 3, campaigns=2, seed=9)
    cookie = log_in(panel)
    days = table(ok(panel, WEEK + "&g1=day&g2=campaign", cookie))
    assert len(days["rows"]) >= 3 and days["headers"][0].startswith("Day ▲")  # Time order by default.
    assert [row[0] for row in days["rows"]] == sorted(row[0] for row in days["rows"])
    day, link = days["rows"][1][0], days["links"][1]
    html = ok(panel, link, cookie)
    campaigns = table(html)
    assert number(campaigns["total"][1]) == number(days["rows"][1][1])
    api = api_report(db, group="campaign", preset="", **{"from": day, "to": day})
    assert number(campaigns["total"][1]) == api.total["clicks"]
    assert breadcrumb(html)[-1][0] == f"Day: {day}"
    assert chart(ok(panel, WEEK + "&g1=day", cookie))["kind"] == "time"


def test_an_empty_value_is_a_row_to_drill_into_too(panel, users, clicks, db):
    cookie = log_in(panel)
    set_sub_id(db, 3, "x", every=4)  # The rest keep an empty sub_id_3.
    values = table(ok(panel, WEEK + "&g1=sub_id_3&g2=campaign", cookie))
    empty = [row[0] for row in values["rows"]].index("(empty)")
    link = values["links"][empty]
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(link).query, keep_blank_values=True)["d1"] == [""]
    campaigns = table(ok(panel, link, cookie))
    assert number(campaigns["total"][1]) == number(values["rows"][empty][1]) == 250 - 62


# -- sort, columns, chart ----------------------------------------------------------------------


def test_any_column_sorts_both_ways_and_empty_values_stay_last(panel, users, costs, db):
    cookie = log_in(panel)
    base = WEEK + "&g1=sub_id_2"
    for order in ("asc", "desc"):
        tab = table(ok(panel, f"{base}&sort=unique_clicks&order={order}", cookie))
        shown = [number(v) for v in column(tab, "Unique ▲" if order == "asc" else "Unique ▼")]
        assert len(shown) == 40 and shown == sorted(shown, reverse=order == "desc")
    tab = table(ok(panel, base + "&sort=group&order=desc", cookie))
    labels = [row[0] for row in tab["rows"]]
    assert labels == sorted(labels, key=str.casefold, reverse=True)
    html = ok(panel, base + "&sort=group", cookie)
    link = re.search(r'<th><a href="([^"]+)">Sub ID 2 ▲</a>', html).group(1)
    assert "order=desc" in htmlib.unescape(link)  # Again, to flip.
    for order, arrow in (("asc", "▲"), ("desc", "▼")):  # Campaign 2 costs nothing: no ROI, last both ways.
        tab = table(ok(panel, f"{WEEK}&sort=roi&order={order}", cookie))
        assert column(tab, f"ROI {arrow}") == ["-100.0%", "–"]


def test_the_column_chooser_shows_the_chosen_metrics_and_the_chart_charts_the_sorted_one(panel, users, costs):
    cookie = log_in(panel)
    html = ok(panel, WEEK + "&col=clicks&col=cost&col=bots&sort=cost", cookie)
    tab = table(html)
    assert tab["headers"] == ["Campaign", "Clicks", "Cost ▼", "Bots"]
    assert tab["rows"][0][0] == "Generated 0" and tab["rows"][0][2] == "100.00 USD"
    data = chart(html)
    assert data["kind"] == "bars" and data["metric"] == "cost" and data["label"] == "Cost (USD)"
    assert data["labels"] == [row[0] for row in tab["rows"]] and data["values"][0] == 100.0
    # The chooser: the shown columns in order, the others to add.
    assert re.findall(r'<li data-column="(\w+)">', html) == ["clicks", "cost", "bots"]
    assert '<option value="cr">' in html and '<option value="cost">' not in html


# -- CSV -------------------------------------------------------------------------------------------


def test_the_csv_is_the_table_shown_with_formulas_defused(panel, users, costs, db):
    set_sub_id(db, 1, '=HYPERLINK("http://evil.example")', every=3)
    set_sub_id(db, 1, "@SUM(A1)", every=7)
    set_sub_id(db, 1, "-2+3", every=11)
    cookie = log_in(panel)
    query = "&g1=sub_id_1&col=clicks&col=cost&col=profit&col=roi&sort=profit&order=asc"
    tab = table(ok(panel, WEEK + query, cookie))
    status, headers, body = request(
        panel, "/panel/reports.csv?period=last_7_days" + query, {"Cookie": cookie}
    )
    assert status == 200 and headers["content-type"].startswith("text/csv")
    assert headers["content-disposition"] == 'attachment; filename="lanner-report-sub_id_1-last_7_days.csv"'
    lines = list(csv.reader(io.StringIO(body.decode())))
    assert lines[0] == ["Sub ID 1", "Clicks", "Cost (USD)", "Profit (USD)", "ROI"]
    assert [h.rstrip(" ▲▼") for h in tab["headers"]] == ["Sub ID 1", "Clicks", "Cost", "Profit", "ROI"]
    assert len(lines) == len(tab["rows"]) + 2 and lines[-1][0] == "Total"
    # Streamed in the groups' order, not the page's sort: each row by its label.
    written_by_label = {line[0]: line[1:] for line in lines[1:]}
    for shown in tab["rows"] + [tab["total"]]:
        label = shown[0]
        written = written_by_label["'" + label if label[0] in "=+-@" else label]
        assert [number(v) if v != "–" else None for v in shown[1:]] == [
            float(v) if v else None for v in written
        ]
    texts = [line[0] for line in lines]
    assert '\'=HYPERLINK("http://evil.example")' in texts and "'@SUM(A1)" in texts and "'-2+3" in texts
    assert any(line[3].startswith("-") for line in lines[1:])  # A negative profit stays a number.


# -- who sees what ------------------------------------------------------------------------------


def test_a_user_who_hides_money_is_offered_no_amounts_anywhere(panel, users, costs, db):
    own(db, 1, users["frugal"])
    cookie = log_in(panel, "frugal")
    html = ok(panel, WEEK + "&g1=campaign&g2=offer", cookie)
    tab = table(html)
    assert tab["headers"] == ["Campaign", "Clicks ▼", "Unique", "Conv.", "CR"]
    assert "USD" not in html and "Revenue" not in html and "Profit" not in html and 'value="epc"' not in html
    assert chart(html)["metric"] == "clicks"
    for money in ("revenue", "profit", "epc", "cpa"):
        status, body = page(panel, f"{WEEK}&col=clicks&col={money}", cookie)
        assert status == 400 and f"&#39;{money}&#39; is no column here" in body
        assert page(panel, f"{WEEK}&sort={money}", cookie)[0] == 400
    _, _, body = request(panel, "/panel/reports.csv?period=last_7_days", {"Cookie": cookie})
    assert body.decode().splitlines()[0] == "Campaign,Clicks,Unique,Conv.,CR" and b"100.00" not in body


def test_a_buyer_sees_only_their_campaigns_even_when_filtering_or_drilling_into_another_s(
    panel, users, clicks, db
):
    own(db, 2, users["bert"])
    theirs = api_report(db, group="campaign", **{"f.campaign": "2"}).total["clicks"]
    cookie = log_in(panel, "bert")
    tab = table(ok(panel, WEEK, cookie))
    assert [row[0] for row in tab["rows"]] == ["Generated 1"] and number(tab["total"][1]) == theirs
    for sneaky in ("&f.campaign=1", "&f.campaign=gen-0", "&g2=country&d1=1", "&f.campaign=nonesuch"):
        html = ok(panel, WEEK + sneaky, cookie)
        assert table(html)["rows"] == [] and table(html)["total"][1] == "0" and "Generated 0" not in html
    tab = table(ok(panel, WEEK + "&f.campaign=1,gen-1", cookie))
    assert [row[0] for row in tab["rows"]] == ["Generated 1"] and number(tab["total"][1]) == theirs
    _, _, body = request(panel, "/panel/reports.csv?period=last_7_days&f.campaign=1", {"Cookie": cookie})
    assert body.decode().splitlines()[1:] == ["1,Total,0,0,0,,0.00,0.00,0.00,,"]  # Its filter, then nothing.
    # A stream of another's campaign drilled into keeps its name to itself.
    stream = db.connection().execute("SELECT id, name FROM stream WHERE campaign_id = 1 LIMIT 1").fetchone()
    html = ok(panel, f"{WEEK}&g1=stream&g2=country&d1={stream[0]}", cookie)
    assert breadcrumb(html)[-1][0] == f"Stream: #{stream[0]}" and table(html)["rows"] == []
    # An admin naming a campaign that does not exist gets the report's sentence.
    status, body = page(panel, WEEK + "&f.campaign=nonesuch", log_in(panel))
    assert status == 400 and "There is no campaign &#39;nonesuch&#39;" in body


@pytest.mark.parametrize(
    "query, sentence",
    [
        ("&colour=red", "Unknown parameter &#39;colour&#39;"),
        ("&g1=planet", "Cannot group by &#39;planet&#39;"),
        ("&g1=country&g2=country", "Group by each name at one level only."),
        ("&f.planet=mars", "Cannot group or filter by &#39;planet&#39;"),
        ("&f.offer=abc", "A offer filter takes ids."),
        ("&f.stream=99999999999999999999", "A stream filter takes ids."),
        ("&f.offer=%C2%B2", "A offer filter takes ids."),
        ("&g1=stream&g2=country&d1=99999999999999999999", "A stream filter takes ids."),
        ("&f.country=US&f.country=GB", "Give &#39;f.country&#39; once."),
        ("&col=nonsense", "&#39;nonsense&#39; is no column here"),
        ("&sort=planet", "Sort by the group or a column shown"),
        ("&order=sideways", "The order is asc or desc."),
        ("&g2=country&d2=US", "A drill-down starts at the first level (d1)."),
        ("&d1=1", "There are 1 grouping levels"),
        ("&g1=day&g2=campaign&d1=yesterday", "&#39;yesterday&#39; is not a day"),
        ("&period=custom", "A custom period needs a from date."),
        ("&period=forever", "The period is one of"),
        ("&period=custom&from=2026-13-40", "is not a date (YYYY-MM-DD)"),
        ("&period=custom&from=2026-12-05&to=2026-12-01", "The range is empty"),
        ("&filter=day&value=1", "Cannot filter by &#39;day&#39;"),
    ],
)
def test_a_bad_parameter_answers_400_with_one_sentence(panel, users, query, sentence):
    cookie = log_in(panel)
    status, body = page(panel, "/panel/reports?" + query[1:], cookie)
    assert status == 400 and sentence in body, body
    status, _, _ = request(panel, "/panel/reports.csv?" + query[1:], {"Cookie": cookie})
    assert status == 400


def test_adding_a_filter_is_a_redirect_to_the_state_with_it_and_a_chip_removes_it(panel, users, clicks, db):
    cookie = log_in(panel)
    status, headers, _ = request(panel, WEEK + "&g1=country&filter=country&value=us,gb", {"Cookie": cookie})
    assert status == 303
    target = headers["location"]
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)["f.country"] == ["us,gb"]
    html = ok(panel, target, cookie)
    assert sorted(row[0] for row in table(html)["rows"]) == ["GB", "US"]
    remove = htmlib.unescape(
        re.search(r'<a href="([^"]+)" aria-label="Remove the country filter">', html).group(1)
    )
    assert "f.country" not in remove and len(table(ok(panel, remove, cookie))["rows"]) > 2


def test_sub_ids_and_names_come_out_escaped_in_the_table_the_chart_and_the_path(panel, users, clicks, db):
    from models.admin.services import update_campaign

    script, image = '<script>alert("x")</script>', '"><img src=x onerror=alert(1)>'
    set_sub_id(db, 1, script, every=3)
    set_sub_id(db, 1, image, every=5)
    update_campaign(db, 1, name="<b>bold</b>")
    cookie = log_in(panel)
    html = ok(panel, WEEK + "&g1=sub_id_1&g2=campaign", cookie)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert (
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
        and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    )
    assert script in chart(html)["labels"] and "\\u003cscript\\u003e" in html  # JSON that closes no tag.
    tab = table(html)
    link = tab["links"][[row[0] for row in tab["rows"]].index(image)]
    html = ok(panel, link, cookie)
    assert breadcrumb(html)[-1][0] == f"Sub ID 1: {image}" and "<img src=x" not in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html


def test_this_week_runs_from_monday_in_the_report_service():
    from zoneinfo import ZoneInfo

    from models.reporting.reports import preset_range

    wednesday = datetime(2026, 12, 2, 15, 0, tzinfo=UTC).timestamp()
    start, end = preset_range("this_week", ZoneInfo("UTC"), wednesday)
    assert start == datetime(2026, 11, 30, tzinfo=UTC).timestamp() * 1000
    assert end == datetime(2026, 12, 3, tzinfo=UTC).timestamp() * 1000


def test_an_hour_drilled_into_is_that_hour_in_the_user_s_timezone(db):
    from dataclasses import dataclass

    from models.accounts.principal import Principal
    from routes.panel.common import PanelReports
    from routes.panel.reports import BuilderState, ReportBuilder
    from workers.bench.generate import generate_clicks

    @dataclass(frozen=True)
    class Abroad(Principal):  # As a user with the per-user timezone column reads.
        timezone: str = "Asia/Kolkata"  # Local hours begin at half past UTC ones.

    generate_clicks(db, 400, 2, campaigns=2, seed=11)
    principal = Abroad(None, "abroad", "admin", True, False)
    builder = ReportBuilder(db, PanelReports(db, ""))
    state = BuilderState(groups=("hour", "campaign"))
    hours = builder.level_report(state, principal)
    expected = api_report(db, group="hour", timezone="Asia/Kolkata")
    assert [row["hour"] for row in hours.rows] == [row["hour"] for row in expected.rows]
    for row in hours.rows[1:4]:
        campaigns = builder.level_report(replace(state, drill=(row["hour"],)), principal)
        assert campaigns.total["clicks"] == row["clicks"] > 0


def test_the_report_s_notes_are_shown_to_those_who_see_money(panel, users, db, settings, make_tracker):
    from models.admin.services import create_campaign, update_campaign
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.migrations.deferred import run_deferred

    create_campaign(db, "Old", "old", offer_url="https://o.example/?s={subid}")
    # As a campaign set up before currencies were converted could be (tests/test_currency.py).
    db.connection().execute("UPDATE campaign SET cost_model = 'cpc', cost_value = 0.5, cost_currency = 'CHF'")
    run_deferred(db)
    tracker = make_tracker()
    tracker.refresh()
    tracker.track(tracker.campaign("old"), Visit(ip="198.51.100.1", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    html = ok(panel, WEEK, log_in(panel))
    assert re.search(r'<p class="note">Campaign old&#39;s costs are in CHF', html)
    update_campaign(db, "old", owner_id=users["frugal"].id)
    html = ok(panel, WEEK, log_in(panel, "frugal"))
    assert "CHF" not in html and '<p class="note">' not in html


def test_a_custom_range_counts_its_days_and_a_preset_link_leaves_a_day_drilled_into(panel, users, db):
    from datetime import timedelta

    from workers.bench.generate import generate_clicks

    generate_clicks(db, 300, 3, campaigns=2, seed=9)
    cookie = log_in(panel)
    today = datetime.now(UTC).date()
    since, until = (today - timedelta(days=1)).isoformat(), today.isoformat()
    html = ok(panel, f"/panel/reports?from={since}&to={until}&g1=day&g2=campaign", cookie)
    tab = table(html)
    expected = api_report(db, group="day", preset="", **{"from": since, "to": until})
    assert number(tab["total"][1]) == expected.total["clicks"]
    assert [r[0] for r in tab["rows"]][:1] == [since]  # Today's too, unless it is only just today.
    assert [r[0] for r in tab["rows"]] == [row["day"] for row in expected.rows]
    assert '<option value="custom" selected>Custom</option>' in html
    assert f'<input type="date" name="from" id="from" value="{since}">' in html
    drilled = ok(panel, tab["links"][0], cookie)
    week = re.search(r'<a href="([^"]+)">Last 7 days</a>', drilled).group(1)
    kept = urllib.parse.parse_qs(urllib.parse.urlsplit(htmlib.unescape(week)).query)
    assert kept == {"g1": ["day"], "g2": ["campaign"]}  # The default period; no day drilled into.


def test_a_time_chart_has_every_bucket_of_the_range_those_without_clicks_as_zero(panel, users, db):
    from workers.bench.generate import generate_clicks

    now = int(datetime.now(UTC).timestamp() * 1000)
    generate_clicks(db, 100, 1, campaigns=1, seed=2, end_ms=now - 3 * 86_400_000)  # Then two days of none.
    cookie = log_in(panel)
    html = ok(panel, WEEK + "&g1=day&col=clicks&col=cr", cookie)
    days = {row[0]: number(row[1]) for row in table(html)["rows"]}
    data = chart(html)
    assert data["kind"] == "time" and len(data["x"]) == 7 and 1 <= len(days) <= 2
    assert data["x"] == sorted(data["x"]) and sum(data["values"]) == sum(days.values()) == 100
    assert data["values"][-1] == data["values"][-2] == 0  # Today and yesterday: no clicks, drawn as 0.
    data = chart(ok(panel, WEEK + "&g1=day&col=clicks&col=cr&sort=cr", cookie))
    assert data["values"][-1] is None  # No clicks: no CR, a gap rather than 0%.


def test_the_hour_the_clocks_go_back_through_is_two_points_of_the_chart(db):
    from dataclasses import dataclass
    from zoneinfo import ZoneInfo

    from models.accounts.principal import Principal
    from routes.panel.common import PanelReports
    from routes.panel.reports import BuilderState, ReportBuilder, chart_data
    from workers.bench.generate import generate_clicks

    @dataclass(frozen=True)
    class Berliner(Principal):
        timezone: str = "Europe/Berlin"

    night = int(datetime(2026, 10, 25, 3, 0, tzinfo=UTC).timestamp() * 1000)  # 04:00 CET
    generate_clicks(db, 200, 4 / 24, campaigns=1, seed=4, end_ms=night)
    principal = Berliner(None, "berliner", "admin", True, False)
    state = BuilderState(period="custom", since="2026-10-25", until="2026-10-25", groups=("hour",))
    report = ReportBuilder(db, PanelReports(db, "")).level_report(state, principal)
    data = chart_data(state, [], report, "USD", ZoneInfo("Europe/Berlin"))
    assert len(data["x"]) == 25 and data["x"] == sorted(set(data["x"]))  # The 25-hour day, x only grows.
    assert sum(data["values"]) == 200
    hours = [row["hour"] for row in report.rows]
    assert "2026-10-25 02:00+02:00" in hours and "2026-10-25 02:00+01:00" in hours


def test_the_time_chart_s_x_is_each_bucket_s_first_instant_with_the_user_s_timezone_as_the_dashboard(db):
    from dataclasses import dataclass
    from zoneinfo import ZoneInfo

    from models.accounts.principal import Principal
    from models.reporting.reports import time_buckets
    from routes.panel.common import PanelReports
    from routes.panel.reports import BuilderState, ReportBuilder, chart_data
    from workers.bench.generate import generate_clicks

    @dataclass(frozen=True)
    class Berliner(Principal):
        timezone: str = "Europe/Berlin"

    berlin = ZoneInfo("Europe/Berlin")
    generate_clicks(
        db,
        50,
        2,
        campaigns=1,
        seed=4,
        end_ms=int(datetime(2026, 10, 26, 12, tzinfo=UTC).timestamp() * 1000),
    )
    principal = Berliner(None, "berliner", "admin", True, False)
    for group in ("day", "hour"):
        state = BuilderState(period="custom", since="2026-10-24", until="2026-10-26", groups=(group,))
        report = ReportBuilder(db, PanelReports(db, "")).level_report(state, principal)
        data = chart_data(state, [], report, "USD", berlin)
        buckets = time_buckets(group, berlin, report.start_ms, report.end_ms)
        assert data["timezone"] == "Europe/Berlin"
        assert data["x"] == [start // 1000 for _, start in buckets] and sum(data["values"]) == sum(
            row["clicks"] for row in report.rows
        )
    # Days: local midnights, 24 hours apart but 25 over the night the clocks go back.
    state = BuilderState(period="custom", since="2026-10-24", until="2026-10-26", groups=("day",))
    data = chart_data(
        state, [], ReportBuilder(db, PanelReports(db, "")).level_report(state, principal), "USD", berlin
    )
    midnights = [datetime(2026, 10, day, tzinfo=berlin).timestamp() for day in (24, 25, 26)]
    assert data["x"] == midnights and midnights[2] - midnights[1] == 25 * 3600


def test_a_report_the_rollups_cannot_answer_says_it_counts_every_click(panel, users, clicks, db):
    from models.migrations.deferred import ROLLUP_BACKFILL, run_deferred

    # As 0004 leaves a SQLite database (PostgreSQL's baseline has nothing to backfill: done at once).
    db.connection().execute(
        "UPDATE deferred_step SET state = 'pending', finished_at = NULL WHERE name = ?", (ROLLUP_BACKFILL,)
    ).close()
    cookie = log_in(panel)
    assert "the rollup backfill has not finished" in ok(panel, WEEK, cookie)
    run_deferred(db)
    html = ok(panel, WEEK + "&g1=sub_id_1", cookie)
    note = re.search(r'<p class="note" id="raw-note">(.*?)</p>', html)
    assert note and "the rollups do not keep sub_id_1" in note.group(1)
    assert 'id="raw-note"' not in ok(panel, WEEK + "&g1=country&g2=offer", cookie)  # The country cube's.


def test_a_report_the_history_answers_says_nothing_of_every_click(panel, users, clicks, db, settings):
    """With the columnar history copied, a sub_id report has no raw note, and counts what raw does;
    with the file damaged, the note comes back and says why the history did not answer."""
    from models.migrations.deferred import run_deferred
    from models.reporting.history import HistoryFiles, append_history
    from models.reporting.reports import ReportQuery, run_report

    run_deferred(db)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    cookie = log_in(panel)
    path = WEEK + "&g1=sub_id_1"
    html = ok(panel, path, cookie)
    assert 'id="raw-note"' not in html
    raw = run_report(db, ReportQuery(group_by=("sub_id_1",), preset="last_7_days", source="raw"))
    shown = table(html)
    assert len(shown["rows"]) == len(raw.rows) and number(shown["total"][1]) == raw.total["clicks"] == clicks
    # The page DuckDB sorts and cuts (models/reporting/reportpage.py): clicks ascending, then the zone
    # descending, is the raw report sorted so in Python; two ticked zones leave the total less theirs.
    ordered = sorted(raw.rows, key=lambda row: row["sub_id_1"], reverse=True)
    ordered = sorted(ordered, key=lambda row: row["clicks"])
    ticked = [row["sub_id_1"] for row in raw.rows[:2]]
    html = ok(
        panel,
        f"{path}&sort=clicks&order=asc&sort2=group&order2=desc&without={ticked[0]}&without={ticked[1]}",
        cookie,
    )
    unticked = [
        row["sub_id_1"] for row in ordered if row["sub_id_1"] not in ticked
    ]  # (Ticked: a <tr class>.)
    assert [row[0] for row in table(html)["rows"]] == unticked
    less = re.search(r'<tr class="total less" id="total-less">(.*?)</tr>', html, re.S).group(1)
    left_out = sum(row["clicks"] for row in raw.rows if row["sub_id_1"] in ticked)
    shown_less = re.search(r'data-column="clicks">(.*?)</td>', less, re.S).group(1)
    assert number(text(shown_less)) == clicks - left_out
    files.path.write_bytes(b"not a DuckDB file" * 1000)
    html = ok(panel, path, cookie)
    note = text(re.search(r'<p class="note" id="raw-note">(.*?)</p>', html, re.S).group(1))
    assert "the rollups do not keep sub_id_1" in note
    assert "The columnar history, which answers this sooner, could not" in note and "cannot be read" in note
    assert number(table(html)["total"][1]) == clicks


def test_the_dashboard_says_once_why_the_history_did_not_answer(panel, users, clicks, db, settings):
    """In Asia/Kolkata the dashboard's day chart cannot come from the rollups: the history answers it,
    or, damaged, the row store does and the page says why (once, however many reports fell back)."""
    from models.accounts.users import update_user
    from models.migrations.deferred import run_deferred
    from models.reporting.history import HistoryFiles, append_history

    run_deferred(db)
    update_user(db, "anna", timezone="Asia/Kolkata")
    files = HistoryFiles.of(settings)
    append_history(db, files)
    cookie = log_in(panel)
    assert "did not answer" not in ok(panel, "/panel?period=last_7_days", cookie)
    files.path.write_bytes(b"not a DuckDB file" * 1000)
    notes = re.findall(r'<p class="note">(.*?)</p>', ok(panel, "/panel?period=last_7_days", cookie), re.S)
    fell_back = [text(note) for note in notes if "did not answer" in note]
    assert len(fell_back) == 1 and "cannot be read" in fell_back[0], notes


# -- the ticked rows' time series ---------------------------------------------------------------


def series_of(html: str) -> dict:
    return json.loads(re.search(r'id="series-chart-data">(.*?)</script>', html, re.S).group(1))


def test_ticked_rows_are_charted_by_day_each_adding_up_to_its_row(panel, users, clicks, db):
    cookie = log_in(panel)
    level = WEEK + "&g1=campaign&g2=country&d1=1"
    html = ok(panel, level, cookie)
    assert 'id="series-form"' in html and "series-chart-data" not in html
    tab = table(html)
    values = re.findall(r'name="row" value="([^"]*)" form="series-form"', html)
    assert len(values) == len(tab["rows"]) >= 2
    ticked = values[:2]
    query = urllib.parse.urlencode([("row", value) for value in ticked])
    html = ok(panel, f"{level}&{query}", cookie)
    series = series_of(html)
    assert series["time_group"] == "day" and len(series["x"]) == 7  # Every day of the week, empty too.
    assert [m["name"] for m in series["metrics"]] == [
        "clicks",
        "conversions",
        "cost",
        "revenue",
        "profit",
        "roi",
    ]
    shown = {row[0]: number(row[1]) for row in tab["rows"]}
    for value, line in zip(ticked, series["lines"], strict=True):
        assert line["label"] == (value or "unknown")
        assert sum(line["values"]["clicks"]) == line["total"]["clicks"] == shown[line["label"]] > 0
    expected = api_report(db, group="day", **{"f.campaign": "1", "f.country": ticked[0] or "unknown"})
    by_day = {row["day"]: row["clicks"] for row in expected.rows}
    days = [datetime.fromtimestamp(x, UTC).date().isoformat() for x in series["x"]]
    assert series["lines"][0]["values"]["clicks"] == [by_day.get(day, 0) for day in days]
    assert len(re.findall(r'class="chart-row"[^>]* checked>', html)) == 2  # The ticked rows stay ticked.
    # A drill-down or the first level is another level's rows: the ticks stay behind.
    assert "row=" not in breadcrumb(html)[0][1]
    # A day level is a time already; more rows than a chart tells apart are refused.
    status, body = page(panel, WEEK + "&g1=day&row=2026-01-01", cookie)
    assert status == 400 and "is a time already" in body
    status, body = page(panel, level + "&" + "&".join(f"row=R{n}" for n in range(21)), cookie)
    assert status == 400 and "at most 20 rows" in body


def test_a_drilled_down_csv_keeps_its_filter_and_says_so_in_its_columns(panel, users, clicks, db):
    cookie = log_in(panel)
    level = "/panel/reports.csv?period=last_7_days&g1=campaign&g2=country&d1=1&f.os=Windows,Android"
    status, headers, body = request(panel, level, {"Cookie": cookie})
    assert status == 200 and headers["content-type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(body.decode())))
    assert lines[0][:3] == ["Campaign", "OS filter", "Country"]
    expected = api_report(db, group="country", **{"f.campaign": "1", "f.os": "Windows,Android"})
    assert 0 < expected.total["clicks"] < api_report(db, group="campaign").total["clicks"]
    rows = lines[1:-1]
    assert {tuple(row[:2]) for row in rows} == {("Generated 0", "Windows,Android")}
    assert sorted((row[2], int(row[3])) for row in rows) == sorted(
        (row["country"] or "unknown", row["clicks"]) for row in expected.rows
    )
    assert lines[-1][:3] == ["Generated 0", "Windows,Android", "Total"]
    assert int(lines[-1][3]) == expected.total["clicks"]


def test_a_row_with_sales_without_a_rate_says_so_on_the_page_and_in_the_csv(
    panel, users, db, settings, make_tracker, clock
):
    from datetime import UTC, datetime, timedelta

    from models.admin.services import create_campaign, update_campaign
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
    from models.migrations.deferred import run_deferred

    create_campaign(db, "Pounds", "pounds", offer_url="https://o.example/?s={subid}")
    create_campaign(db, "Dollars", "dollars", offer_url="https://o.example/?s={subid}")
    run_deferred(db)
    tracker = make_tracker()
    tracker.refresh()
    subids = {
        alias: tracker.track(tracker.campaign(alias), Visit(ip=f"198.51.100.{n}", user_agent="UA")).subid
        for n, alias in enumerate(("pounds", "dollars"), 1)
    }
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    recorder = ConversionRecorder(db, park_ms=3_600_000, clock=clock)
    for alias, currency in (("pounds", "GBP"), ("dollars", "USD")):
        postback = parse_postback({"subid": subids[alias], "payout": "20", "currency": currency})
        assert recorder.record(postback, Received("GET", "198.51.100.9", "test")).verdict == "created"
    day = datetime.fromtimestamp(clock(), UTC).date()  # The tracker's and the recorder's.
    days = f"period=custom&from={day - timedelta(days=1)}&to={day + timedelta(days=2)}"
    html = ok(panel, f"/panel/reports?{days}&col=conversions&col=revenue", log_in(panel))
    gaps = {}
    for first in re.findall(r'<tr>\s*<td class="name">(.*?)</td>', html, re.S):
        gap = re.search(r'<small class="rate-gap">(.*?)</small>', first, re.S)
        if gap:
            gaps[text(first[: gap.start()])] = text(gap.group(1))
    sentence = (
        "1 conversion without an exchange rate into USD, not in revenue, profit or ROI: 1 in GBP "
        f"(payout 20 GBP) on {day} (UTC days)."
    )
    assert gaps == {"Pounds pounds": sentence}  # The name, the alias in small print.
    assert table(html)["total"][0] == f"Total {sentence}"
    _, _, body = request(
        panel, f"/panel/reports.csv?{days}&col=conversions&col=revenue", {"Cookie": log_in(panel)}
    )
    lines = {line[0]: line[1:] for line in csv.reader(io.StringIO(body.decode()))}
    assert lines["Campaign"][-2:] == ["Conversions without a rate", "Without a rate"]
    assert lines["Pounds"] == ["1", "0.00", "1", sentence] and lines["Dollars"] == ["1", "20.00", "0", ""]
    assert lines["Total"] == ["2", "20.00", "1", sentence]
    update_campaign(db, "pounds", owner_id=users["frugal"].id)
    cookie = log_in(panel, "frugal")
    assert "GBP" not in ok(panel, f"/panel/reports?{days}", cookie)
    _, _, body = request(panel, f"/panel/reports.csv?{days}", {"Cookie": cookie})
    assert b"GBP" not in body and b"rate" not in body
