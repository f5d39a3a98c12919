"""The panel's logs in process on a real migrated database: the click log and a click's page with its
routing trace, the conversion log with its correction and CSV import, the postback log; who sees what,
money hidden, CSRF, escaping."""

# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
from __future__ import annotations

import re
import urllib.parse
from html import unescape

import pytest
from conftest import request
from test_panel import clicks, csrf_token, get, log_in, make_panel, own, panel, post, users  # noqa: F401

XSS = '<script>alert("x")</script>"><img src=x onerror=alert(1)>'
ESCAPED = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"


def subids(html: str) -> list[str]:
    return re.findall(r'<td><a href="/panel/clicks/([^"]+)">', html)


def link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="\?([^"]+)" rel="{rel}">', html)
    return "?" + found.group(1).replace("&amp;", "&") if found else None


def walk(app, cookie, path: str) -> list[list[str]]:
    """Every page of a log by its Older links, then back by its Newer links (asserting the same pages)."""
    pages, htmls = [], []
    target = path
    while target:
        html = get(app, target, cookie)[2]
        pages.append(subids(html))
        htmls.append(html)
        following = link(html, "next")
        target = path.split("?")[0] + following if following else None
    for index in range(len(htmls) - 1, 0, -1):
        newer = link(htmls[index], "prev")
        assert newer, index
        assert subids(get(app, path.split("?")[0] + newer, cookie)[2]) == pages[index - 1]
    assert link(htmls[0], "prev") is None
    return pages


def multipart(fields: dict[str, str], files: dict[str, bytes] | None = None) -> tuple[dict, bytes]:
    boundary = "lannertestboundary"
    parts = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for name, data in (files or {}).items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="c.csv"\r\n'
            f"Content-Type: text/csv\r\n\r\n".encode()
            + data
            + b"\r\n"
        )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return {"Content-Type": f"multipart/form-data; boundary={boundary}"}, body


def post_import(app, cookie, fields, files=None):
    headers, body = multipart(fields, files)
    status, _, answer = request(app, "/panel/conversions/import", {**headers, "Cookie": cookie}, "POST", body)
    return status, answer.decode()


def stored_subids(db, campaign_id=None) -> list[str]:
    from models.reporting.clicklog import ClickFilter, list_clicks

    return [row["subid"] for row in list_clicks(db, ClickFilter(campaign_id=campaign_id, limit=1000))]


# -- the click log -------------------------------------------------------------------------------


def test_a_buyer_s_click_log_holds_only_their_campaigns_and_pages_both_ways(panel, users, clicks, db):
    own(db, 2, users["bert"])
    buyer = log_in(panel, "bert")
    pages = walk(panel, buyer, "/panel/clicks?limit=20")
    theirs = stored_subids(db, 2)
    assert 20 < len(theirs) < 250
    assert [s for page in pages for s in page] == sorted(theirs, reverse=True)  # Newest first, no repeat.
    assert all(len(page) == 20 for page in pages[:-1])
    # The filters keep to the pages' links, and a campaign not theirs is no campaign at all.
    assert get(panel, "/panel/clicks?campaign=1", buyer)[0] == 404
    status, _, html = get(panel, f"/panel/clicks/{stored_subids(db, 1)[0]}", buyer)
    assert status == 404 and "There is no stored click" in html
    # Two campaigns' clicks, merged newest first, by (time, id) across pages.
    from models.accounts.sharing import share_campaign

    share_campaign(db, 1, "bert")
    both = [s for page in walk(panel, buyer, "/panel/clicks?limit=30") for s in page]
    newest_first = (
        db.connection().execute("SELECT subid FROM click ORDER BY created_at DESC, id DESC").fetchall()
    )
    assert both == [s for (s,) in newest_first]
    admin = log_in(panel)
    assert len([s for page in walk(panel, admin, "/panel/clicks?limit=100") for s in page]) == 250
    # A user who sees no campaign sees no click.
    assert subids(get(panel, "/panel/clicks", log_in(panel, "vera"))[2]) == []


def test_the_click_log_filters_by_subid_ip_country_bots_sub_id_and_period(panel, users, clicks, db):
    from models.reporting.clicklog import ClickFilter, list_clicks

    admin = log_in(panel)
    row = list_clicks(db, ClickFilter(limit=1))[0]
    full = (
        db.connection()
        .execute("SELECT ip, sub_id_1, country FROM click WHERE subid = ?", (row["subid"],))
        .fetchone()
    )
    ip, sub_id_1, country = full
    assert subids(get(panel, f"/panel/clicks?subid={row['subid']}", admin)[2]) == [row["subid"]]
    by_ip = subids(get(panel, "/panel/clicks?limit=500&" + urllib.parse.urlencode({"ip": ip}), admin)[2])
    assert row["subid"] in by_ip
    assert by_ip == [
        s for (s,) in db.connection().execute("SELECT subid FROM click WHERE ip = ? ORDER BY id DESC", (ip,))
    ]
    query = urllib.parse.urlencode({"sub": 1, "sub_value": sub_id_1, "limit": 500})
    by_sub = subids(get(panel, f"/panel/clicks?{query}", admin)[2])
    assert by_sub == [
        s
        for (s,) in db.connection().execute(
            "SELECT subid FROM click WHERE sub_id_1 = ? ORDER BY id DESC", (sub_id_1,)
        )
    ]
    in_country = subids(get(panel, f"/panel/clicks?limit=500&country={country or 'unknown'}", admin)[2])
    assert (
        in_country
        and len(in_country)
        == db.connection().execute("SELECT COUNT(*) FROM click WHERE country = ?", (country,)).fetchone()[0]
    )
    bots = db.connection().execute("SELECT COUNT(*) FROM click WHERE is_bot = 1").fetchone()[0]
    assert len(subids(get(panel, "/panel/clicks?limit=500&bots=bots", admin)[2])) == bots
    assert len(subids(get(panel, "/panel/clicks?limit=500&bots=humans", admin)[2])) == 250 - bots
    # The generated clicks are of the last day: none before it, all in the last 7 days.
    assert len(subids(get(panel, "/panel/clicks?limit=500&period=last_7_days", admin)[2])) == 250
    assert subids(get(panel, "/panel/clicks?from=2001-01-01&to=2001-01-31", admin)[2]) == []
    for query in ("period=forever", "bots=maybe", "sub=31&sub_value=x", "cursor=%25%25", "limit=0"):
        status, _, html = get(panel, f"/panel/clicks?{query}", admin)
        assert status == 400 and "<h1>" in html, query
    status, _, html = get(panel, "/panel/clicks?from=yesterday", admin)
    assert status == 400 and "is not a date" in html


def routed_click(db, settings, make_tracker, **visit):
    """A click through a campaign whose first stream's filter fails and second's passes; stored."""
    from models.admin.services import add_stream, create_campaign
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit

    campaign = create_campaign(db, "Traced", "traced", offer_url="https://o.example/?s={subid}")
    add_stream(
        db, campaign.id, name="Germans", type="intercepting", action="not_found", filters=["country=DE"]
    )
    tracker = make_tracker()
    tracker.refresh()
    decision = tracker.track(tracker.campaign("traced"), Visit(**visit))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    return campaign, decision.subid


def test_a_click_s_page_shows_what_was_stored_its_trace_and_conversions_escaped(
    panel, users, db, settings, make_tracker
):
    sub_ids = [""] * 30
    sub_ids[4] = XSS
    campaign, subid = routed_click(
        db,
        settings,
        make_tracker,
        ip="198.51.100.7",
        user_agent=f"Mozilla/5.0 {XSS}",
        referrer=f"https://ref.example/?q={XSS}",
        sub_ids=sub_ids,
    )
    own(db, campaign.id, users["frugal"])
    admin = log_in(panel)
    assert subid in subids(get(panel, "/panel/clicks", admin)[2])
    status, _, html = get(panel, f"/panel/clicks/{subid}", admin)
    assert status == 200
    assert "<script>alert" not in html and "<img src=x" not in html
    assert html.count(ESCAPED) == 3  # The UA, the referrer, sub_id_5.
    assert "198.51.100.7" in html and "sub_id_5" in html and "<th>cost</th>" in html
    # The path as it happened, in words: the Germans stream's filter failed, the regular stream took it.
    path = unescape(html.split('id="click-path">')[1].split("</p>")[0])
    assert path == (
        "intercepting stream 'Germans' did not match (filters: country=DE ✗)"
        " → stream 'Default' (no filters) → offer 'Traced' → 302 https://o.example/…"
    ), path
    listed = unescape(get(panel, f"/panel/clicks?subid={subid}", admin)[2])
    assert path in listed
    # Today's filters on the stored values, beside it: what each filter saw.
    trace = re.sub(r"\s+", " ", html.split("Today's filters")[1].split("<h2>Conversions")[0])
    assert "Germans" in trace and "no match" in trace and "matched" in trace
    assert re.search(r'<tr class="fail"><td class="mark">FAIL</td><td>country[^<]*DE[^<]*</td>', trace), trace
    # Its conversions, once it has one; the hide-money owner sees the click but no amount.
    from models.conversions.manual import import_conversions
    from models.conversions.postbacks import ConversionRecorder

    import_conversions(
        ConversionRecorder(db, park_ms=3_600_000), f"subid,tid,status,payout\n{subid},t1,sale,7.5"
    )
    html = get(panel, f"/panel/clicks/{subid}", admin)[2]
    assert "7.50 USD" in html and 'href="/panel/conversions/1"' in html
    html = get(panel, f"/panel/clicks/{subid}", log_in(panel, "frugal"))[2]
    assert "7.50" not in html and "<th>cost</th>" not in html and "sale" in html
    assert get(panel, f"/panel/clicks/{subid}", log_in(panel, "bert"))[0] == 404
    assert get(panel, "/panel/clicks/nosuchsubid", admin)[0] == 404
    # The campaign's name, in the log's rows and its filter.
    from models.admin.services import update_campaign

    update_campaign(db, campaign.id, name=XSS)
    html = get(panel, "/panel/clicks", admin)[2]
    assert "<script>alert" not in html and html.count(ESCAPED) == 2


def test_an_anonymising_install_finds_a_click_by_its_full_ip_and_says_it_keeps_less(
    make_panel, users, db, settings, make_tracker
):
    _, subid = routed_click(db, settings, make_tracker, ip="198.51.100.7", user_agent="UA")
    db.connection().execute(
        "UPDATE click SET ip = '198.51.100.0'"
    )  # As the tracker keeps it with the setting on.
    anonymising = make_panel(LANNER_ANONYMIZE_IP="on")
    admin = log_in(anonymising)
    assert subids(get(anonymising, "/panel/clicks?ip=198.51.100.7", admin)[2]) == [subid]
    html = get(anonymising, f"/panel/clicks/{subid}", admin)[2]
    assert "198.51.100.0" in html and "(anonymised" in html
    plain = make_panel()
    assert subids(get(plain, "/panel/clicks?ip=198.51.100.7", log_in(plain))[2]) == []


def param_routed_click(db, settings, make_tracker):
    """A click sent by `param.src=fb` (not stored) past a stream that wants a visitor seen in it before."""
    from models.admin.services import add_stream, create_campaign
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit

    campaign = create_campaign(db, "By source", "bysource", offer_url="https://o.example/?s={subid}")
    add_stream(
        db, campaign.id, name="Again", type="intercepting", action="not_found", filters=["unique!=stream"]
    )
    add_stream(
        db, campaign.id, name="Facebook", type="intercepting", action="not_found", filters=["param.src=fb"]
    )
    tracker = make_tracker()
    tracker.refresh()
    visit = Visit(ip="198.51.100.7", user_agent="Mozilla/5.0 test", params={"src": "fb"})
    decision = tracker.track(tracker.campaign("bysource"), visit)
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert decision.answer == "not_found"
    return campaign, decision.subid


def test_a_click_s_trace_says_not_stored_for_a_query_parameter_it_was_routed_by(
    panel, users, db, settings, make_tracker
):
    _, subid = param_routed_click(db, settings, make_tracker)
    html = get(panel, f"/panel/clicks/{subid}", log_in(panel))[2]
    # What re-evaluation cannot know, the recorded path does: the parameter's filter passed.
    path = unescape(html.split('id="click-path">')[1].split("</p>")[0])
    assert path.endswith("→ intercepting stream 'Facebook' (filters: param.src=fb ✓) → 404"), path
    assert "intercepting stream 'Again' did not match (filters: unique!=stream ✗)" in path, path
    trace = re.sub(r"\s+", " ", html.split("Today's filters")[1].split("<h2>Conversions")[0])
    assert "Facebook" in trace and "matched" in trace and "FAIL" not in trace, trace
    assert '<tr class="unstored"><td class="mark">?</td><td>param.src=fb</td>' in trace
    assert '<td>unique!=stream</td><td class="saw">not stored: ' in trace


def test_the_log_pages_ask_for_a_login(panel, users):
    for path in (
        "/panel/clicks",
        "/panel/clicks/x",
        "/panel/conversions",
        "/panel/conversions/1",
        "/panel/conversions/import",
        "/panel/postback-log",
    ):
        status, headers, _ = request(panel, path)
        assert status == 303 and headers["location"].startswith("/panel/login?next="), path


# -- conversions ----------------------------------------------------------------------------------


def imported(db, subids_: list[str], status="sale", payout=2.5) -> None:
    from models.conversions.manual import import_conversions
    from models.conversions.postbacks import ConversionRecorder

    lines = ["subid,tid,status,payout"] + [f"{s},t{n},{status},{payout}" for n, s in enumerate(subids_)]
    import_conversions(ConversionRecorder(db, park_ms=3_600_000), "\n".join(lines))


def test_the_conversion_log_shows_visible_campaigns_only_with_money_for_those_who_see_it(
    panel, users, clicks, db
):
    own(db, 2, users["frugal"])
    imported(db, stored_subids(db, 1)[:30] + stored_subids(db, 2)[:5])
    admin = log_in(panel)
    pages = walk(panel, admin, "/panel/conversions?limit=10")
    assert [len(page) for page in pages] == [10, 10, 10, 5]
    html = get(panel, "/panel/conversions", admin)[2]
    assert "2.50 USD" in html and "Import from CSV" in html
    frugal = log_in(panel, "frugal")
    html = get(panel, "/panel/conversions", frugal)[2]
    assert sorted(subids(html)) == sorted(stored_subids(db, 2)[:5])
    assert "2.50" not in html and "Payout" not in html and "Import from CSV" not in html
    assert get(panel, "/panel/conversions?campaign=1", frugal)[0] == 404
    assert len(subids(get(panel, "/panel/conversions?status=sale&campaign=2", admin)[2])) == 5
    assert subids(get(panel, "/panel/conversions?status=rejected", admin)[2]) == []
    one = stored_subids(db, 1)[0]
    assert subids(get(panel, f"/panel/conversions?subid={one}", admin)[2]) == [one]


def conversion_id(db, subid: str) -> int:
    return db.connection().execute("SELECT id FROM conversion WHERE subid = ?", (subid,)).fetchone()[0]


def test_a_correction_changes_status_and_payout_is_audited_and_refuses_what_it_cannot_apply(
    panel, users, clicks, db
):
    from models.accounts.audit import audit_rows
    from models.conversions.manual import get_conversion

    subid = stored_subids(db, 1)[0]
    imported(db, [subid])
    cid = conversion_id(db, subid)
    admin = log_in(panel)
    html = get(panel, f"/panel/conversions/{cid}", admin)[2]
    token = csrf_token(html)
    status, headers, _ = post(
        panel,
        f"/panel/conversions/{cid}",
        {"status": "rejected", "payout": "1.25", "csrf_token": token},
        admin,
    )
    assert status == 303 and headers["location"] == f"/panel/conversions/{cid}?saved=1"
    corrected = get_conversion(cid)
    assert (corrected.status, corrected.payout, corrected.original_status) == ("rejected", 1.25, "sale")
    entry = audit_rows(db, entity=f"conversion:{cid}")[0]
    assert entry["actor"] == "anna" and entry["action"] == "update"
    assert entry["old"]["status"] == "sale" and entry["new"] == {
        "status": "rejected",
        "payout": 1.25,
        "report_payout": 1.25,
    }
    assert "Saved" in get(panel, f"/panel/conversions/{cid}?saved=1", admin)[2]
    # What cannot be applied comes back as the form with its sentence, and changes nothing.
    for fields, sentence in (
        ({"status": "won"}, "Status must be one of lead, sale, rejected, rebill, trash, not &#39;won&#39;."),
        ({"status": "rejected", "payout": "lots"}, "&#39;lots&#39; is not a number."),
        ({"status": "rejected", "payout": "-1"}, "A payout must be a number from 0"),
        ({"status": "rejected", "payout": "1.25"}, "Change the status or the payout first."),
    ):
        status, _, body = post(panel, f"/panel/conversions/{cid}", {**fields, "csrf_token": token}, admin)
        assert status == 400 and sentence in body.decode(), (fields, body.decode()[-800:])
    assert get_conversion(cid).status == "rejected"
    # No token, no change; a viewer (even one the campaign is shared with) and a hide-money owner's payout:
    # 403.
    assert post(panel, f"/panel/conversions/{cid}", {"status": "sale"}, admin)[0] == 403
    from models.accounts.sharing import share_campaign

    share_campaign(db, 1, "vera")
    viewer = log_in(panel, "vera")
    html = get(panel, f"/panel/conversions/{cid}", viewer)[2]
    assert "<h2>Correct</h2>" not in html
    assert (
        post(panel, f"/panel/conversions/{cid}", {"status": "sale", "csrf_token": csrf_token(html)}, viewer)[
            0
        ]
        == 403
    )
    own(db, 1, users["frugal"])
    frugal = log_in(panel, "frugal")
    html = get(panel, f"/panel/conversions/{cid}", frugal)[2]
    # The payout as a number of its own (a time such as 15:45:01.255 holds "1.25" too).
    assert 'name="payout"' not in html and not re.search(r"(?<![\d.:])1\.25(?!\d)", html)
    fields = {"status": "rejected", "payout": "9", "csrf_token": csrf_token(html)}
    assert post(panel, f"/panel/conversions/{cid}", fields, frugal)[0] == 403
    assert (
        post(panel, f"/panel/conversions/{cid}", {**fields, "payout": "", "status": "trash"}, frugal)[0]
        == 303
    )
    assert get_conversion(cid).status == "trash" and get_conversion(cid).payout == 1.25
    # Another buyer's conversion does not exist for bert.
    bert = log_in(panel, "bert")
    assert get(panel, f"/panel/conversions/{cid}", bert)[0] == 404
    assert get(panel, "/panel/conversions/999999", admin)[0] == 404
    assert get(panel, f"/panel/conversions/{2**63}", admin)[0] == 404


def test_a_status_correction_keeps_a_payout_the_form_shows_to_the_last_digit(panel, users, clicks, db):
    from models.conversions.manual import get_conversion

    subid = stored_subids(db, 1)[0]
    imported(db, [subid], payout=1234567.891)
    cid = conversion_id(db, subid)
    admin = log_in(panel)
    html = get(panel, f"/panel/conversions/{cid}", admin)[2]
    shown = re.search(r'name="payout" value="([^"]+)"', html).group(1)
    assert shown == "1234567.891"
    fields = {"status": "rejected", "payout": shown, "csrf_token": csrf_token(html)}
    assert post(panel, f"/panel/conversions/{cid}", fields, admin)[0] == 303
    assert (get_conversion(cid).status, get_conversion(cid).payout) == ("rejected", 1234567.891)


def test_an_api_correction_refuses_a_status_the_vocabulary_lacks_and_is_audited(db, clicks):
    from models.accounts.audit import audit_rows
    from models.accounts.principal import user_principal
    from models.conversions.manual import ConversionInputError, correct_conversion

    subid = stored_subids(db, 1)[0]
    imported(db, [subid])
    cid = conversion_id(db, subid)
    for status in ("won", "approved", "", " "):
        with pytest.raises(ConversionInputError, match="Status must be one of lead, sale"):
            correct_conversion(db, cid, status=status)
    actor = user_principal(7, "scripted", "admin", False)
    correct_conversion(db, cid, status=" LEAD ", actor=actor)
    assert audit_rows(db, entity="conversion")[0]["actor"] == "scripted"


def test_an_import_from_a_textarea_or_a_file_shows_each_row_s_verdict_escaped(panel, users, clicks, db):
    from models.accounts.audit import audit_rows

    first, second = stored_subids(db, 1)[:2]
    admin = log_in(panel)
    html = get(panel, "/panel/conversions/import", admin)[2]
    token = csrf_token(html)
    text = (
        f"subid,tid,status,payout\n{first},a,sale,3\n{second},b,approved,4\n"
        f"not-a-subid,c,sale,1\n{XSS},d,sale,1\n"
    )
    status, html = post_import(panel, admin, {"csrf_token": token, "csv": text})
    assert status == 200, html
    results = re.findall(r'<tr class="(\w+)"><td class="n">(\d+)</td>', html)
    assert results == [("imported", "2"), ("imported", "3"), ("refused", "4"), ("refused", "5")]
    assert "created: 2" in html and "invalid: 2" in html
    assert "<script>alert" not in html and ESCAPED in html
    assert audit_rows(db, entity="conversion")[0]["new"] == {"created": 2, "invalid": 2}
    # The same rows from a file: duplicates, nothing changed.
    status, html = post_import(panel, admin, {"csrf_token": token}, {"file": text.encode()})
    assert (
        status == 200
        and "duplicate: 2" in html
        and "created" not in html.split("Results")[1].split("<table")[0]
    )
    # A file the service refuses, an empty form, a file over the limit.
    status, html = post_import(panel, admin, {"csrf_token": token, "csv": "subid,amount\nx,1"})
    assert status == 400 and "Unknown CSV column &#39;amount&#39;" in html and "subid,amount" in html
    assert post_import(panel, admin, {"csrf_token": token, "csv": " "})[0] == 400
    status, html = post_import(panel, admin, {"csrf_token": token}, {"file": b"subid\n" + b"x" * (2 << 20)})
    assert status == 413 and "at most 2 MB" in html
    assert post_import(panel, admin, {"csrf_token": token}, {"file": b"subid\n\xff\xfe"})[0] == 400


def test_an_import_is_an_admin_s_with_the_session_s_token(panel, users, clicks, db):
    first = stored_subids(db, 1)[0]
    admin = log_in(panel)
    assert post_import(panel, admin, {"csv": f"subid\n{first}"})[0] == 403
    assert post_import(panel, admin, {"csrf_token": "forged", "csv": f"subid\n{first}"})[0] == 403
    own(db, 1, users["bert"])
    for name in ("bert", "vera"):
        cookie = log_in(panel, name)
        assert get(panel, "/panel/conversions/import", cookie)[0] == 403
        token = csrf_token(get(panel, "/panel/conversions", cookie)[2])
        assert post_import(panel, cookie, {"csrf_token": token, "csv": f"subid\n{first}"})[0] == 403
    assert db.connection().execute("SELECT COUNT(*) FROM conversion").fetchone()[0] == 0


# -- the postback log -----------------------------------------------------------------------------


def test_the_postback_log_shows_postbacks_parked_ones_and_deliveries_escaped(panel, users, clicks, db):
    from models.conversions.admin import add_target
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback

    subid = stored_subids(db, 1)[0]
    own(db, 2, users["bert"])
    add_target(db, "1", "https://source.example/cb?c={subid}&p={payout}", ["sale"])
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    recorder.record(
        parse_postback({"subid": subid, "status": "sale", "payout": "5"}),
        Received("GET", "203.0.113.9", f"/postback?subid={subid}&x={XSS}"),
    )
    missing = "0" * 16 + "1"  # A Lanner subid no click has (yet): parked.
    recorder.record(
        parse_postback({"subid": missing}), Received("GET", "203.0.113.9", "/postback?subid=" + missing)
    )
    admin = log_in(panel)
    html = get(panel, "/panel/postback-log", admin)[2]
    assert "<script>alert" not in html and ESCAPED in html
    assert "created" in html and "parked" in html
    html = get(panel, "/panel/postback-log?log=postbacks&orphans=1", admin)[2]
    assert missing in html and subid not in html and "Expires" in html
    html = get(panel, "/panel/postback-log?log=postbacks&verdict=created", admin)[2]
    assert subid in html and missing not in html
    cid = conversion_id(db, subid)
    html = get(panel, "/panel/postback-log?log=deliveries", admin)[2]
    assert f'href="/panel/conversions/{cid}"' in html and "pending" in html
    # Once sent, the URL holds the click's macros (a visitor's sub ids) and the answer's error.
    db.connection().execute(
        "UPDATE postback_delivery SET url = ?, error = ?, state = 'failed'",
        (f"https://s.example/?c={XSS}", XSS),
    )
    html = get(panel, "/panel/postback-log?log=deliveries&state=failed", admin)[2]
    assert "<script>alert" not in html and html.count(ESCAPED) == 2
    assert get(panel, "/panel/postback-log?log=refusals", admin)[0] == 200
    # A buyer: only the deliveries of their campaigns; a viewer reads them too; money hidden: none.
    bert = log_in(panel, "bert")
    html = get(panel, "/panel/postback-log", bert)[2]
    assert "s.example" not in html and "No outbound postbacks match." in html
    assert get(panel, "/panel/postback-log?log=postbacks", bert)[0] == 403
    assert get(panel, "/panel/postback-log?log=refusals", bert)[0] == 403
    assert get(panel, "/panel/postback-log?log=deliveries&campaign=1", bert)[0] == 404
    from models.accounts.sharing import share_campaign

    share_campaign(db, 1, "vera")
    assert f'href="/panel/conversions/{cid}"' in get(panel, "/panel/postback-log", log_in(panel, "vera"))[2]
    own(db, 1, users["frugal"])
    frugal = log_in(panel, "frugal")
    status, _, html = get(panel, "/panel/postback-log?log=deliveries", frugal)
    assert status == 403 and "which this user does not see" in html
    assert "Postback log" not in get(panel, "/panel/clicks", frugal)[2]
    assert get(panel, "/panel/postback-log?log=everything", admin)[0] == 400
