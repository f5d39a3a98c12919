"""Simulate a visitor in the panel (/panel/campaigns/{id}/simulate) in process: the trace `lanner simulate`
prints, as a page and as an htmx fragment; nothing stored; who may run it; bad input; escaping."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from conftest import request
from test_panel import get, log_in, make_panel, own, users  # noqa: F401
from test_routing_cli import IPHONE, geo_env  # noqa: F401


@pytest.fixture
def geo_panel(make_panel, geo_env, db, users):  # noqa: F811
    """Campaign 1 `geo`: an intercepting stream "UK mobile" (country=GB, device=mobile,tablet) to offer 2,
    then the default stream to offer 1; the London / Germany geo file."""
    from models.admin.services import add_stream, create_campaign, create_offer

    create_offer(db, "Main", "https://main.example/?c={subid}&geo={country}")
    create_offer(db, "UK phones", "https://uk.example/?c={subid}&city={city}")
    create_campaign(db, "Geo", "geo", offer_id=1)
    add_stream(
        db,
        "geo",
        type="intercepting",
        name="UK mobile",
        offers=[(2, 100)],
        filters=["country=GB", "device=mobile,tablet"],
    )
    return make_panel(LANNER_GEO_DATABASE=geo_env["LANNER_GEO_DATABASE"])


def simulate(app, cookie, campaign_id=1, headers=None, **fields):
    query = urllib.parse.urlencode({"run": "1", **fields})
    status, answer_headers, body = request(
        app, f"/panel/campaigns/{campaign_id}/simulate?{query}", {"Cookie": cookie, **(headers or {})}
    )
    return status, body.decode()


def click_rows(db) -> int:
    return db.connection().execute("SELECT COUNT(*) FROM click").fetchone()[0]


def test_a_visitor_from_another_country_fails_the_country_filter_and_gets_the_default_offer(
    geo_panel, db, settings
):
    cookie = log_in(geo_panel)
    status, html = simulate(geo_panel, cookie, ip="2001:db8::5", ua="Mozilla/5.0 (X11; Linux)")
    assert status == 200 and "<h1>Simulate a visitor to Geo</h1>" in html
    assert "<dt>Country</dt><dd>DE</dd>" in html
    stream = re.search(r'<li class="stream skipped">.*?</li>\s*</ul>', html, re.S).group(0)
    assert "stream 2 “UK mobile”" in stream and "no match" in stream
    assert re.search(
        r'<li class="fail"><span class="mark">FAIL</span> <code>country=GB</code> <small>saw DE</small>',
        stream,
    )
    assert re.search(r"<dt>Offer</dt><dd>1 Main</dd>", html)
    assert re.search(r'<dd class="location"><code>https://main.example/\?c=\w+&amp;geo=DE</code>', html)
    # A London iPhone passes both filters and goes to the UK offer.
    status, html = simulate(geo_panel, cookie, ip="81.2.69.160", ua=IPHONE, params="sub_id_1=zone7")
    assert re.search(
        r'<li class="pass"><span class="mark">pass</span> <code>country=GB</code> <small>saw GB</small>', html
    )
    assert "<dt>Offer</dt><dd>2 UK phones</dd>" in html and "&amp;city=London</code>" in html
    assert click_rows(db) == 0 and journal_bytes(settings.spool_dir) == 0


def journal_bytes(spool_dir) -> int:
    from models.clicks.spool import list_segments, segment_path

    return sum(segment_path(spool_dir, number).stat().st_size for number in list_segments(spool_dir))


def test_htmx_gets_the_fragment_and_a_direct_open_the_page(geo_panel):
    cookie = log_in(geo_panel)
    status, _, body = request(
        geo_panel, "/panel/campaigns/1/simulate", {"Cookie": cookie, "HX-Request": "true"}
    )
    html = body.decode()
    assert status == 200 and html.lstrip().startswith('<section class="card simulate" id="simulate-visitor">')
    assert "<html" not in html and 'hx-get="/panel/campaigns/1/simulate"' in html
    html = get(geo_panel, "/panel/campaigns/1/simulate", cookie)[2]
    assert "<html" in html and 'value="203.0.113.10"' in html and "Decision" not in html


def test_bad_input_is_refused_next_to_the_form(geo_panel, db):
    from models.admin.services import update_campaign

    cookie = log_in(geo_panel)
    status, html = simulate(geo_panel, cookie, ip="999.1.1.1")
    assert (
        status == 400
        and "&#39;999.1.1.1&#39; is not an IPv4 or IPv6 address." in html
        and 'role="alert"' in html
    )
    status, html = simulate(geo_panel, cookie, headers={"HX-Request": "true"}, ip="999.1.1.1")
    assert status == 200 and "is not an IPv4 or IPv6 address" in html  # htmx swaps 2xx only.
    update_campaign(db, 1, status="paused")
    status, html = simulate(geo_panel, cookie, ip="81.2.69.160")
    assert status == 400 and "Campaign geo is paused: only an active campaign routes clicks." in html


def test_only_users_who_see_the_campaign_may_simulate_it(geo_panel, db, users):  # noqa: F811
    from models.accounts.sharing import share_campaign

    assert simulate(geo_panel, log_in(geo_panel, "bert"), ip="81.2.69.160")[0] == 404
    assert simulate(geo_panel, log_in(geo_panel), campaign_id=9)[0] == 404
    share_campaign(db, 1, "vera")  # A viewer may look: a simulation changes nothing.
    status, html = simulate(geo_panel, log_in(geo_panel, "vera"), ip="81.2.69.160", ua=IPHONE)
    assert status == 200 and "UK phones" in html
    status, headers, _ = request(geo_panel, "/panel/campaigns/1/simulate")
    assert status == 303 and headers["location"].startswith("/panel/login")


def test_what_the_visitor_sends_comes_out_escaped(geo_panel, db):
    from models.admin.services import update_stream

    update_stream(db, 2, name='<script>alert("s")</script>')
    cookie = log_in(geo_panel)
    evil = '"><img src=x onerror=alert(1)>'
    status, html = simulate(
        geo_panel,
        cookie,
        ip="2001:db8::5",
        ua=evil,
        referrer=evil,
        language=evil,
        params="sub_id_1=" + urllib.parse.quote(evil),
    )
    assert status == 200 and "<img src=x" not in html and "<script>alert" not in html
    assert 'value="&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in html
    assert "&lt;script&gt;alert(&#34;s&#34;)&lt;/script&gt;" in html
