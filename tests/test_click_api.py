"""The Keitaro-compatible Click API v3 (`/click_api/v3`), the campaign token (migration 0019) and the
tracking script's endpoints (`/lp/visit`, `/lanner.js`), against a real `lanner serve` process.

The shapes checked field by field are the published ones (routes/clickapi.py names each source):
Keitaro's Click API page, its v3 wiki page and KClickClient v3.1's reads.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from conftest import raw_request, request, wait_until

OFFER = "https://offer.example/?c={subid}&s1={sub_id_1}&kw={keyword}"
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
HTML_PAGE = "<h1>Hello from the page</h1>"
FORM = "application/x-www-form-urlencoded"

# Most tests share one server per backend (shared_server), each with a campaign of its own: one
# process builds it for all of them.
pytestmark = pytest.mark.xdist_group("click_api")


@pytest.fixture
def campaign(lanner):
    """`kc` (make_campaign) on the test's own database. Returns (alias, token, campaign id)."""
    alias, token, campaign_id, _ = make_campaign(lanner, "kc", "KClient")
    return alias, token, campaign_id


# The shared server's campaigns: each test its own, numbered in this process.
SHARED_CAMPAIGNS = itertools.count(1)


@dataclass
class Kc:
    alias: str
    token: str
    id: int
    offer_id: int


@pytest.fixture
def kc(shared_server):
    """A campaign of the test's own (make_campaign) on the module's shared server."""
    number = next(SHARED_CAMPAIGNS)
    return Kc(*make_campaign(shared_server.lanner, f"kc{number}", f"KClient {number}"))


def make_campaign(lanner, alias: str, name: str) -> tuple[str, str, int, int]:
    """`alias`: intercepting streams for keyword=page (an html page), gone (404) and else (a redirect),
    then the regular stream to the offer. Returns (alias, token, campaign id, offer id)."""
    lanner("campaign", "create", name, "--alias", alias, "--offer-url", OFFER)
    lanner(
        "stream",
        "add",
        alias,
        "--type",
        "intercepting",
        "--name",
        "Page",
        "--action",
        "html",
        "--html",
        HTML_PAGE,
        "--filter",
        "keyword=page",
    )
    lanner(
        "stream",
        "add",
        alias,
        "--type",
        "intercepting",
        "--name",
        "Gone",
        "--action",
        "not_found",
        "--filter",
        "keyword=gone",
    )
    lanner(
        "stream",
        "add",
        alias,
        "--type",
        "intercepting",
        "--name",
        "Else",
        "--action",
        "redirect",
        "--url",
        "https://else.example/?c={subid}",
        "--filter",
        "keyword=else",
    )
    shown = json.loads(lanner("campaign", "show", alias, "--json").stdout)
    (offer_id,) = [
        row["id"] for row in json.loads(lanner("offer", "list", "--json").stdout) if row["name"] == name
    ]
    return alias, shown["token"], shown["id"], offer_id


def api(port: int, token: str, headers: dict | None = None, **params) -> tuple[int, dict]:
    query = urlencode({"token": token, **params})
    status, _, body = request(port, f"/click_api/v3?{query}", headers or {})
    return status, json.loads(body)


def visitor(**extra) -> dict:
    return {"ip": "203.0.113.5", "ua": BROWSER, "language": "de", "info": "1", **extra}


def flushed_rows(lanner, settings) -> list[dict]:
    from models.store.database import db

    lanner("spool", "flush")
    cursor = db.connection().execute("SELECT * FROM click ORDER BY id")
    try:
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()


def landed_rows(shared, campaign_id: int) -> list[dict]:
    """The campaign's clicks on the shared server's database, once the spool is flushed."""
    from models.store.database import db

    shared.lanner("spool", "flush")
    cursor = db.connection().execute("SELECT * FROM click WHERE campaign_id = ? ORDER BY id", (campaign_id,))
    try:
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()


def streams_by_name(lanner, alias: str = "kc") -> dict[str, int]:
    rows = json.loads(lanner("stream", "list", alias, "--json").stdout)
    return {row["name"]: row["id"] for row in rows}


def test_forced_offer_answers_its_location_and_the_click_lands_once_with_the_parameters(kc, shared_server):
    token, campaign_id = kc.token, kc.id
    status, answer = api(
        shared_server.port,
        token,
        **visitor(
            ip="203.0.113.105",  # No other test's visitor: the click is unique globally too.
            referrer="https://ads.example/p?q=1",
            keyword="shoes",
            sub_id_1="zone 7",
            utm_source="fb",
            force_redirect_offer="1",
            version="3",
        ),
    )
    assert status == 200
    info = answer["info"]
    subid = info["sub_id"]
    location = f"https://offer.example/?c={subid}&s1=zone%207&kw=shoes"
    assert answer == {
        "body": None,
        "contentType": "text/html; charset=utf-8",
        "headers": [f"Location: {location}"],
        "status": 302,
        "cookies": {},
        "uniqueness_cookie": subid,
        "cookies_ttl": 24,
        "info": {
            "sub_id": subid,
            "campaign_id": campaign_id,
            "stream_id": streams_by_name(shared_server.lanner, kc.alias)["Default"],
            "landing_id": None,
            "offer_id": [kc.offer_id],
            "type": "location",
            "url": location,
            "is_bot": False,
            "uniqueness": {"campaign": True, "stream": True, "global": True},
            "token": subid,
        },
    }
    (row,) = landed_rows(shared_server, campaign_id)
    assert (row["subid"], row["campaign_id"], row["offer_id"]) == (subid, campaign_id, kc.offer_id)
    assert (row["ip"], row["user_agent"], row["language"]) == ("203.0.113.105", BROWSER, "de")
    assert (row["referrer"], row["keyword"], row["sub_id_1"]) == (
        "https://ads.example/p?q=1",
        "shoes",
        "zone 7",
    )
    assert row["is_bot"] == 0


def test_an_offer_is_not_acted_on_without_force_redirect_offer_as_in_v3(kc, shared_server):
    status, answer = api(shared_server.port, kc.token, **visitor(keyword="shoes"))
    assert status == 200
    subid = answer["info"]["sub_id"]
    assert (answer["status"], answer["headers"], answer["body"]) == (200, [], None)
    assert answer["info"]["type"] == "offer" and answer["info"]["offer_id"] == [kc.offer_id]
    assert answer["info"]["url"] == f"https://offer.example/?c={subid}&s1=&kw=shoes"
    assert answer["info"]["token"] == subid
    assert [row["subid"] for row in landed_rows(shared_server, kc.id)] == [subid]


def test_html_not_found_and_redirect_streams_answer_as_keitaro_shapes_them(kc, shared_server):
    token = kc.token
    streams = streams_by_name(shared_server.lanner, kc.alias)
    _, page = api(shared_server.port, token, **visitor(keyword="page"))
    assert (page["status"], page["headers"], page["body"]) == (200, [], HTML_PAGE)
    assert (page["info"]["type"], page["info"]["stream_id"], page["info"]["offer_id"]) == (
        "show_html",
        streams["Page"],
        [],
    )
    _, gone = api(shared_server.port, token, **visitor(keyword="gone", ip="203.0.113.6"))
    assert (gone["status"], gone["headers"], gone["body"]) == (404, ["HTTP/1.1 404 Not Found"], None)
    assert gone["info"]["type"] == "status404" and gone["info"]["url"] is None
    _, elsewhere = api(shared_server.port, token, **visitor(keyword="else", ip="203.0.113.7"))
    subid = elsewhere["info"]["sub_id"]
    # A stream's own redirect is acted on without force_redirect_offer: it is not an offer.
    assert elsewhere["headers"] == [f"Location: https://else.example/?c={subid}"]
    assert (elsewhere["status"], elsewhere["info"]["type"]) == (302, "location")
    rows = landed_rows(shared_server, kc.id)
    assert [(row["subid"], row["stream_id"]) for row in rows] == [
        (page["info"]["sub_id"], streams["Page"]),
        (gone["info"]["sub_id"], streams["Gone"]),
        (subid, streams["Else"]),
    ]


def test_a_meta_redirect_stream_answers_its_page_as_the_body(kc, shared_server):
    lanner = shared_server.lanner
    # Before the campaign's first call: the workers load it, meta stream and all, at that call.
    lanner("stream", "update", str(streams_by_name(lanner, kc.alias)["Else"]), "--redirect-type", "meta")
    status, answer = api(shared_server.port, kc.token, **visitor(keyword="else"))
    subid = answer["info"]["sub_id"]
    assert (status, answer["status"], answer["headers"], answer["info"]["type"]) == (200, 200, [], "meta")
    assert f'<meta http-equiv="refresh" content="0;url=https://else.example/?c={subid}">' in answer["body"]


def test_a_bot_is_flagged_in_info_and_stored_as_one(kc, shared_server):
    _, answer = api(shared_server.port, kc.token, **visitor(ua=GOOGLEBOT, ip="66.249.66.1"))
    assert answer["info"]["is_bot"] is True
    (row,) = landed_rows(shared_server, kc.id)
    assert row["subid"] == answer["info"]["sub_id"] and row["is_bot"] == 1


def test_a_second_call_is_not_unique_and_one_within_debounce_is_the_same_click(
    campaign, start_server, lanner, settings
):
    _, token, _ = campaign
    server = start_server(LANNER_DEBOUNCE_SECONDS="0")
    _, first = api(server.port, token, **visitor())
    _, second = api(server.port, token, **visitor())
    assert first["info"]["uniqueness"] == {"campaign": True, "stream": True, "global": True}
    assert second["info"]["uniqueness"] == {"campaign": False, "stream": False, "global": False}
    assert first["info"]["sub_id"] != second["info"]["sub_id"]
    rows = flushed_rows(lanner, settings)
    assert [(r["subid"], r["is_unique_campaign"]) for r in rows] == [
        (first["info"]["sub_id"], 1),
        (second["info"]["sub_id"], 0),
    ]
    debounced = start_server(LANNER_DEBOUNCE_SECONDS="3600")
    _, again = api(debounced.port, token, **visitor(ip="203.0.113.99"))
    _, repeat = api(debounced.port, token, **visitor(ip="203.0.113.99"))
    assert repeat["info"]["sub_id"] == again["info"]["sub_id"]
    assert len(flushed_rows(lanner, settings)) == 3


def test_log_is_the_decision_trace_and_info_and_log_only_when_asked(kc, shared_server):
    token, campaign_id = kc.token, kc.id
    streams = streams_by_name(shared_server.lanner, kc.alias)
    _, answer = api(
        shared_server.port, token, **visitor(keyword="else", log="1", referrer="https://r.example/")
    )
    log = answer["log"]
    subid = answer["info"]["sub_id"]
    assert log[:5] == [
        f"Processing campaign {campaign_id}",
        "Referrer: https://r.example/",
        "Keyword: else",
        "IP: 203.0.113.5",
        f"UserAgent: {BROWSER}",
    ]
    page, gone, other = (
        log.index(f"Checking stream #{streams[name]} {name}") for name in ("Page", "Gone", "Else")
    )
    assert page < gone < other
    assert log[page + 1] == 'Filter "keyword=page": rejected (saw else)'
    assert log[other + 1 : other + 3] == ['Filter "keyword=else": allow (saw else)', "Accepted by filters"]
    assert f"Stream #{streams['Else']}" in log and "Is unique in campaign: yes" in log
    assert log[-1] == f"Send headers: Location: https://else.example/?c={subid}"
    _, bare = api(shared_server.port, token, ip="203.0.113.8", ua=BROWSER)
    assert "log" not in bare and "info" not in bare and bare["headers"] == []


def test_missing_ip_and_user_agent_are_the_callers_as_keitaro_logs_them(kc, shared_server):
    status, answer = api(
        shared_server.port,
        kc.token,
        {"X-Real-IP": "198.51.100.4", "User-Agent": "KHttpClient"},
        info="1",
        log="1",
    )
    assert status == 200 and "IP: 198.51.100.4" in answer["log"] and "UserAgent: KHttpClient" in answer["log"]
    (row,) = landed_rows(shared_server, kc.id)
    assert (row["ip"], row["user_agent"]) == ("198.51.100.4", "KHttpClient")


def test_kclient_s_own_request_for_api_php_with_a_double_slash_is_the_click_api(kc, shared_server):
    """KClickClient v3.1 built with 'https://tracker/api.php?' asks for '//api.php?' with these parameters."""
    token = kc.token
    query = urlencode(
        {
            "token": token,
            "version": "3",
            "info": "1",
            "ip": "203.0.113.31",
            "ua": BROWSER,
            "language": "fr",
            "se_referrer": "",
            "referrer": "",
            "uniqueness_cookie": "",
            "sub_id_3": "kc",
            "force_redirect_offer": "1",
        }
    )
    status, _, body = request(shared_server.port, f"//api.php?{query}", {"User-Agent": "KHttpClient"})
    answer = json.loads(body)
    assert status == 200 and answer["status"] == 302
    assert answer["headers"][0].startswith("Location: https://offer.example/")
    (row,) = landed_rows(shared_server, kc.id)
    assert (row["subid"], row["ip"], row["sub_id_3"]) == (answer["info"]["sub_id"], "203.0.113.31", "kc")


def test_kclient_s_get_offer_link_goes_on_to_the_lander_click(shared_server):
    """getOffer() links to the tracker URL's folder with ?_lp=1&_token=<info.token>: the subid."""
    port = shared_server.port
    for folder in ("", "click_api/"):
        status, headers, _ = request(port, f"/{folder}?_lp=1&_token=abc%20123")
        assert status == 302 and headers["location"] == "/lp/click?subid=abc+123"
    assert request(port, "/")[0] == 404 and request(port, "/?_lp=1")[0] == 404


def test_post_form_and_user_agent_spelled_as_the_docs_spell_it(kc, shared_server):
    token = kc.token
    form = urlencode(
        {"token": token, "ip": "2001:db8::7", "user_agent": BROWSER, "sub_id_2": "ü", "info": "1"}
    )
    status, _, body = request(
        shared_server.port, "/click_api/v3", {"Content-Type": FORM}, "POST", form.encode()
    )
    assert status == 200
    (row,) = landed_rows(shared_server, kc.id)
    assert (row["subid"], row["ip"], row["user_agent"], row["sub_id_2"]) == (
        json.loads(body)["info"]["sub_id"],
        "2001:db8::7",
        BROWSER,
        "ü",
    )


def test_a_prefetch_is_answered_and_not_recorded(kc, shared_server):
    status, answer = api(shared_server.port, kc.token, **visitor(prefetch="1"))
    assert status == 200 and answer["status"] == 204 and answer["headers"] == []
    assert landed_rows(shared_server, kc.id) == []


def test_bad_calls_get_keitaros_error_shape_and_a_4xx_and_record_nothing(kc, shared_server):
    token = kc.token
    port = shared_server.port
    cases = [
        ("/click_api/v3?ip=203.0.113.5", 400, "token"),
        ("/click_api/v3?token=nope", 404, "token"),
        (f"/click_api/v3?token={token}&ip=300.1.1.1", 400, "ip"),
        (f"/click_api/v3?token={token}&ip=not-an-ip", 400, "ip"),
        (f"/click_api/v3?token={token}&sub_id_1=%FF%FE", 400, "UTF-8"),
        (f"/click_api/v3?token={token}&" + "&".join(f"p{n}=1" for n in range(300)), 400, "parameters"),
        (f"/click_api/v3?token={token}&sub_id_1=" + "x" * 17_000, 414, "longer"),
    ]
    for path, expected, word in cases:
        status, headers, body = request(port, path)
        assert status == expected, path[:80]
        answer = json.loads(body)
        assert list(answer) == ["error"] and word in answer["error"], answer
    status, _, body = request(
        port,
        f"/click_api/v3?token={token}",
        {"Content-Type": FORM},
        "POST",
        b"sub_id_1=" + b"x" * 17_000,
    )
    assert status == 413 and "longer" in json.loads(body)["error"]
    assert request(port, f"/click_api/v3?token={token}", method="HEAD")[0] == 405
    # Raw bytes that are not UTF-8 in the query itself (not percent-encoded).
    raw = b"GET /click_api/v3?token=" + token.encode() + b"&sub_id_1=\xff HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = raw_request(port, raw)
    assert answer.startswith(b"HTTP/1.1 400")
    assert landed_rows(shared_server, kc.id) == []


def test_rotating_the_token_refuses_the_old_one(kc, shared_server):
    alias, old, server, lanner = kc.alias, kc.token, shared_server, shared_server.lanner
    assert len(old) == 32 and api(server.port, old, **visitor())[0] == 200
    lanner("campaign", "update", alias, "--new-token")
    new = json.loads(lanner("campaign", "show", alias, "--json").stdout)["token"]
    assert new != old and len(new) == 32
    # Web workers reload the campaigns within a second of the change.
    wait_until(
        lambda: api(server.port, old, **visitor())[0] == 404, 10, "the old token refused", lambda: server.log
    )
    status, answer = api(server.port, new, **visitor(ip="203.0.113.50"))
    assert status == 200 and answer["info"]["sub_id"]


def test_every_campaign_has_its_own_token_and_a_clone_gets_a_new_one(lanner, db):
    from models.tables.campaign import Campaign

    lanner("campaign", "create", "A", "--alias", "a", "--offer-url", "https://a.example/")
    lanner("campaign", "clone", "a")
    tokens = [c.token for c in Campaign.select().order_by(Campaign.id)]
    assert len(tokens) == 2 and len(set(tokens)) == 2 and all(len(t) == 32 for t in tokens)
    listed = json.loads(lanner("campaign", "list", "--json").stdout)
    assert [row["token"] for row in listed] == tokens


def test_lp_visit_answers_cors_preflight_and_records_the_visit(kc, shared_server):
    origin, server = "https://lander.example", shared_server
    status, headers, body = request(
        server.port,
        f"/lp/visit?campaign={kc.alias}",
        {"Origin": origin, "Access-Control-Request-Method": "GET"},
        "OPTIONS",
    )
    assert status == 204 and headers["access-control-allow-origin"] == origin
    assert "GET" in headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in headers
    query = urlencode(
        {"campaign": kc.alias, "sub1": "zone-9", "keyword": "boots", "referrer": "https://ads.example/"}
    )
    status, headers, body = request(
        server.port,
        f"/lp/visit?{query}",
        {"Origin": origin, "X-Real-IP": "203.0.113.77", "User-Agent": BROWSER, "Referer": origin + "/page"},
    )
    assert status == 200 and headers["access-control-allow-origin"] == origin and headers["vary"] == "Origin"
    assert headers["cache-control"] == "no-store" and "access-control-allow-credentials" not in headers
    answer = json.loads(body)
    subid = answer["subid"]
    assert answer == {
        "subid": subid,
        "offer_url": f"https://offer.example/?c={subid}&s1=zone-9&kw=boots",
        "ttl": 86400,
    }
    (row,) = landed_rows(server, kc.id)
    assert (row["subid"], row["ip"], row["user_agent"]) == (subid, "203.0.113.77", BROWSER)
    assert (row["referrer"], row["sub_id_1"], row["keyword"]) == ("https://ads.example/", "zone-9", "boots")
    status, headers, body = request(server.port, "/lp/visit?campaign=nope", {"Origin": origin})
    assert status == 404 and headers["access-control-allow-origin"] == origin
    status, _, _ = request(server.port, f"/lp/visit?campaign={kc.alias}&sub1=%FF", {"Origin": origin})
    assert status == 400
    assert len(landed_rows(server, kc.id)) == 1


def test_the_script_is_served_small_and_cacheable(shared_server):
    server = shared_server
    status, headers, body = request(server.port, "/lanner.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert headers["cache-control"] == "public, max-age=3600" and b"/lp/visit?" in body
    assert len(body) < 8_000
    status, again, body = request(server.port, "/lanner.js", {"If-None-Match": headers["etag"]})
    assert status == 304 and body == b"" and again["etag"] == headers["etag"]


def test_the_campaign_fields_show_the_token_and_an_update_rotates_it(campaign, db):
    from models.accounts.audit import list_audit
    from models.admin.services import get_campaign, update_campaign
    from models.admin.views import campaign_fields

    alias, token, _ = campaign
    assert campaign_fields(get_campaign(db, alias))["token"] == token
    rotated = update_campaign(db, alias, new_token=True)
    assert rotated.token != token and campaign_fields(rotated)["token"] == rotated.token
    # The audit log says the token changed, not what it is.
    entry = [e for e in list_audit(db, entity="campaign") if e.action == "update"][-1]
    assert entry.old_values == {"token": "..." + token[-4:]}
    assert entry.new_values == {"token": "..." + rotated.token[-4:]}
    assert all(token not in str(e.new_values) for e in list_audit(db, entity="campaign"))


def test_a_campaign_alias_cannot_take_the_click_api_path(lanner):
    result = lanner(
        "campaign", "create", "X", "--alias", "click_api", "--offer-url", "https://a.example/", check=False
    )
    assert result.returncode != 0 and "click_api" in result.stderr


def test_a_lander_answer_passes_through_as_a_302_with_its_landing_id():
    """Streams that send to landers (another branch) add the lander to the decision; the Click API reads it
    generically: a lander's URL is acted on even without force_redirect_offer, its id is info.landing_id."""
    from types import SimpleNamespace

    from models.clicks.decision import Decision
    from models.clicks.tracker import Simulation
    from routes.clickapi import api_answer

    class LanderDecision(Decision):  # A decision with a lander, as the lander step may make it.
        pass

    decision = LanderDecision(
        "s1", "lander", "https://lp.example/?c=s1", "", 3, 4, 5, False, True, True, True
    )
    decision.lander_id = 9
    simulation = Simulation(decision, SimpleNamespace(is_bot=False), [], None)
    campaign = SimpleNamespace(id=3, uniqueness_ms=3_600_000)
    answer = api_answer(campaign, simulation, is_forced=False, wants_log=False, wants_info=True)
    assert (answer["status"], answer["headers"], answer["cookies_ttl"]) == (
        302,
        ["Location: https://lp.example/?c=s1"],
        1,
    )
    info = answer["info"]
    assert (info["landing_id"], info["type"], info["offer_id"]) == (9, "lander", [5])
