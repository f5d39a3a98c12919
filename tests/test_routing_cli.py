"""`lanner simulate`, `lanner click show`, `lanner geo` and the stream routing options, as users run them.

What the CLI says is compared with what an in-process app answers (`start_app`: create_worker_app() here
over the test's real database, spool and geo file, no socket): no test here needs a server process.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_lanner
from mmdb_writer import MMDBWriter
from netaddr import IPSet

IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
)


@pytest.fixture
def geo_env(env, tmp_path):
    """A tiny MaxMind-layout database: 81.2.69.0/24 is London, 2001:db8::/32 is Germany."""
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoLite2-City")
    writer.insert_network(
        IPSet(["81.2.69.0/24"]),
        {
            "country": {"iso_code": "GB"},
            "subdivisions": [{"iso_code": "ENG"}],
            "city": {"names": {"en": "London"}},
        },
    )
    writer.insert_network(IPSet(["2001:db8::/32"]), {"country": {"iso_code": "DE"}})
    path = tmp_path / "city.mmdb"
    writer.to_db_file(str(path))
    return {**env, "LANNER_GEO_DATABASE": str(path)}


@pytest.fixture
def routed(geo_env, db):
    def lanner(*args: str, check: bool = True):
        return run_lanner(geo_env, *args, check=check)

    lanner("offer", "create", "Main", "--url", "https://main.example/?c={subid}&geo={country}")
    lanner("offer", "create", "UK phones", "--url", "https://uk.example/?c={subid}&city={city}")
    lanner("campaign", "create", "Geo", "--alias", "geo", "--offer-id", "1")
    lanner(
        "stream",
        "add",
        "geo",
        "--type",
        "intercepting",
        "--name",
        "UK mobile",
        "--offer",
        "2",
        "--filter",
        "country=GB",
        "--filter",
        "device=mobile,tablet",
    )
    return lanner


def test_stream_list_shows_filters_and_caps(routed):
    routed("stream", "update", "2", "--daily-cap", "100")
    rows = json.loads(routed("stream", "list", "geo", "--json").stdout)
    assert [(row["id"], row["filters"], row["caps"]) for row in rows] == [
        (2, "country=GB AND device=mobile,tablet", "daily 100"),
        (1, "", ""),
    ]


def test_simulate_prints_each_filter_verdict_and_stores_nothing(routed, db):
    out = routed("simulate", "/geo?sub1=x", "--ip", "81.2.69.160", "--ua", IPHONE).stdout
    assert "country=GB, region=ENG, city=London, device_type=mobile, os=iOS" in out
    assert "stream 2 'UK mobile' (intercepting): matched" in out
    assert "pass  country=GB  (saw GB)" in out and "pass  device=mobile,tablet  (saw mobile)" in out
    assert "location: https://uk.example/?c=" in out and "&city=London" in out
    desktop = json.loads(
        routed("simulate", "/geo", "--ip", "2001:db8::5", "--ua", "Mozilla/5.0 (X11; Linux)", "--json").stdout
    )
    first = desktop["streams"][0]
    assert first["verdict"] == "no match"
    assert first["filters"][0] == {"filter": "country=GB", "passed": False, "saw": "DE"}
    assert desktop["decision"]["offer_id"] == 1 and desktop["decision"]["location"].endswith("&geo=DE")
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 0


def test_simulate_refuses_bad_input_with_one_sentence(routed):
    for args, message in (
        (["/nope"], "No active campaign has the alias 'nope'."),
        (["/geo", "--ip", "999.1.1.1"], "'999.1.1.1' is not an IPv4 or IPv6 address."),
        (["/geo", "--header", "no colon"], "'no colon' is not a header of the form 'Name: value'."),
    ):
        result = routed("simulate", *args, check=False)
        assert result.returncode == 1 and message in result.stderr


def test_simulate_without_a_user_agent_is_the_bot_the_server_sees(routed, geo_env, start_app):
    from conftest import request

    routed(
        "stream",
        "add",
        "geo",
        "--type",
        "intercepting",
        "--name",
        "Bots",
        "--filter",
        "bot=yes",
        "--action",
        "html",
        "--html",
        "<h1>Nothing here</h1>",
    )
    app = start_app(LANNER_GEO_DATABASE=geo_env["LANNER_GEO_DATABASE"])
    for headers in ({"X-Real-IP": "2001:db8::5"}, {"X-Real-IP": "2001:db8::5", "User-Agent": ""}):
        status, _, body = request(app, "/geo", headers)
        assert (status, body) == (200, b"<h1>Nothing here</h1>"), headers
    for args in ([], ["--ua", ""], ["--ua", "  "]):
        data = json.loads(routed("simulate", "/geo", "--ip", "2001:db8::5", "--json", *args).stdout)
        assert data["visitor"]["is_bot"] and data["visitor"]["bot_reason"] == "empty user agent", args
        assert (data["decision"]["stream_id"], data["decision"]["answer"]) == (3, "html"), args
    # A User-Agent given as a header is the visitor's, as it is over HTTP.
    googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
    status, _, _ = request(app, "/geo", {"X-Real-IP": "2001:db8::5", "User-Agent": googlebot})
    data = json.loads(
        routed(
            "simulate", "/geo", "--ip", "2001:db8::5", "--header", f"User-Agent: {googlebot}", "--json"
        ).stdout
    )
    assert status == 200 and data["visitor"]["is_bot"] and data["decision"]["answer"] == "html"


def test_click_show_traces_a_stored_click(routed, geo_env, start_app, db):
    from conftest import click, subid_of

    app = start_app(LANNER_GEO_DATABASE=geo_env["LANNER_GEO_DATABASE"])
    status, headers, _ = click(app, "geo", ip="81.2.69.10", ua="Mozilla/5.0 (Windows NT 10.0)")
    assert status == 302 and headers["location"].startswith("https://main.example/")
    subid = subid_of(headers["location"].replace("c=", "click=", 1))
    routed("spool", "flush")
    shown = routed("click", "show", subid).stdout
    assert f"subid: {subid}" in shown and "country: GB" in shown
    assert "route: 2-1 1+ o1 =h\n" in shown
    assert "did not match (filters: country=GB ✓, device=mobile,tablet ✗) → stream 'Default'" in shown
    assert "→ 302 https://main.example/…\n" in shown
    assert "FAIL  device=mobile,tablet  (saw desktop)" in shown
    data = json.loads(routed("click", "show", subid, "--json").stdout)
    assert data["click"]["city"] == "London" and [s["verdict"] for s in data["streams"]] == [
        "no match",
        "matched",
    ]
    missing = routed("click", "show", "nosuchsubid", check=False)
    assert missing.returncode == 1 and "There is no stored click 'nosuchsubid'" in missing.stderr


def test_click_show_says_not_stored_for_what_the_click_does_not_keep(routed, geo_env, start_app):
    from conftest import click, subid_of

    routed("campaign", "create", "By source", "--alias", "src", "--offer-id", "1")
    routed(
        "stream",
        "add",
        "src",
        "--type",
        "intercepting",
        "--name",
        "Facebook",
        "--offer",
        "2",
        "--filter",
        "param.src=fb",
        "--filter",
        "ip=81.2.69.10",
    )
    app = start_app(LANNER_GEO_DATABASE=geo_env["LANNER_GEO_DATABASE"])
    status, headers, _ = click(app, "src", "src=fb", ip="81.2.69.10")
    assert status == 302 and headers["location"].startswith("https://uk.example/")
    subid = subid_of(headers["location"].replace("c=", "click=", 1))
    routed("spool", "flush")
    shown = routed("click", "show", subid).stdout
    assert "(intercepting): matched" in shown and "FAIL" not in shown, shown
    assert "?     param.src=fb  (not stored: query parameters other than sub ids are not kept)" in shown
    assert "pass  ip=81.2.69.10  (saw 81.2.69.10)" in shown
    data = json.loads(routed("click", "show", subid, "--json").stdout)
    assert data["streams"][0]["filters"][0] == {
        "filter": "param.src=fb",
        "passed": None,
        "saw": "not stored: query parameters other than sub ids are not kept",
    }
    # Once the address is kept truncated, an IP filter cannot be re-evaluated on it either.
    routed("privacy", "anonymize-stored", "--yes")
    shown = routed("click", "show", subid).stdout
    assert "?     ip=81.2.69.10  (not stored: the address may be kept truncated)" in shown, shown


def test_geo_lookup_and_bad_filter_messages(routed):
    assert routed("geo", "lookup", "81.2.69.160").stdout.strip() == "country=GB region=ENG city=London"
    bad = routed("stream", "add", "geo", "--offer", "1", "--filter", "planet=mars", check=False)
    assert bad.returncode == 1 and "planet" in bad.stderr and "Traceback" not in bad.stderr
    bad = routed("stream", "update", "1", "--action", "campaign", check=False)
    assert bad.returncode == 1 and "needs --target ALIAS" in bad.stderr


def test_click_list_filters_by_campaign_day_in_a_timezone_and_country(routed, db):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    just_before = int(datetime(2026, 12, 1, 23, 59, 59, tzinfo=berlin).timestamp() * 1000)
    next_day = int(datetime(2026, 12, 2, 0, 0, 0, tzinfo=berlin).timestamp() * 1000)
    for subid, created_at, country in (
        ("a" * 17, just_before, "DE"),
        ("b" * 17, next_day, "DE"),
        ("c" * 17, just_before, ""),
    ):
        db.connection().execute(
            "INSERT INTO click (subid, created_at, campaign_id, stream_id, offer_id, ip, user_agent, "
            "ua_hash, country) VALUES (?, ?, 1, 1, 1, '192.0.2.1', 'UA', 1, ?)",
            (subid, created_at, country),
        )
    day = [
        "click",
        "list",
        "--campaign",
        "geo",
        "--from",
        "2026-12-01",
        "--to",
        "2026-12-01",
        "--timezone",
        "Europe/Berlin",
    ]
    rows = json.loads(routed(*day, "--json").stdout)
    assert [row["subid"] for row in rows] == ["c" * 17, "a" * 17]  # Newest first; 00:00 the next day is out.
    assert rows[1]["created_at"] == "2026-12-01T23:59:59.000+01:00"
    german = json.loads(routed(*day, "--country", "DE", "--json").stdout)
    assert [row["subid"] for row in german] == ["a" * 17]
    unknown = routed(*day, "--country", "unknown", "--csv").stdout.splitlines()
    assert unknown[0].startswith("subid,created_at") and unknown[1].startswith("c" * 17)
    bad = routed("click", "list", "--from", "yesterday", check=False)
    assert bad.returncode == 1 and "'yesterday' is not a date" in bad.stderr
