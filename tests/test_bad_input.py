"""Bad input from visitors and users: a clear 4xx, a refusal in one sentence, or a safe fallback;
never a 500, a phantom click, or a report that is not valid JSON.

The HTTP answers are the in-process tier (`start_app`: create_worker_app() here over the test's real
database and spool, no socket; the report API served by that app, as with LANNER_ADMIN_BIND=off), but for
one test that sends the worst bodies through a real `lanner serve` (bjoern and the admin worker) and sees
it stay up. Raw malformed HTTP of campaign URLs against a real `lanner serve` is in test_click_http.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from conftest import click, request

from models.migrations.deferred import run_deferred
from models.reporting.reports import NOT_FINITE_NOTE, ReportQuery, run_report
from models.reporting.rollups import RollupDelta, click_key
from workers.bench.generate import generate_clicks

END_MS = int(datetime(2026, 11, 20, 17, 41, tzinfo=UTC).timestamp() * 1000)
PUNYCODE_HOST = "xn--ffer-45d.example"  # оffer.example with a Cyrillic о


def strict_json(text: str | bytes):
    """JSON as a strict reader parses it: Infinity and NaN are not JSON."""

    def refuse(token: str):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def api(app, lanner, query: dict[str, str]) -> tuple[int, bytes]:
    key = lanner("api", "key", "show").stdout.strip()
    status, _, body = request(app, "/api/report?" + urlencode(query), {"X-Api-Key": key})
    return status, body


def stored(db, sql: str, params=()) -> list[tuple]:
    """Rows as the database holds them, read through the test's own connection (either backend)."""
    return db.connection().execute(sql, params).fetchall()


# --- item 8: a visitor's cost= ---------------------------------------------------------------------


def test_a_url_cost_past_the_bound_is_ignored_and_the_report_stays_valid_json(start_app, lanner, db):
    lanner("campaign", "create", "Paid", "--alias", "paid", "--offer-url", "https://o.example/?s={subid}")
    lanner("campaign", "update", "paid", "--cost-model", "cpc", "--cost-value", "0.05")
    app = start_app(LANNER_ADMIN_BIND="off")
    costs = ["1e308", "1e308", "inf", "nan", "-3", "1001", "2.5", "999"]
    for n, cost in enumerate(costs):
        assert click(app, "paid", f"cost={cost}", ip=f"198.51.100.{n + 1}")[0] == 302
    lanner("spool", "flush")
    lanner("db", "run-deferred")
    by_ip = dict(stored(db, "SELECT ip, cost FROM click"))
    # Past LANNER_MAX_CLICK_COST (1000), or not a positive number: the campaign's cpc prices the click.
    assert [by_ip[f"198.51.100.{n + 1}"] for n in range(len(costs))] == pytest.approx(
        [0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 2.5, 999]
    )
    status, body = api(app, lanner, {"preset": "all_time"})
    assert status == 200
    report = strict_json(body)
    assert report["total"]["cost"] == pytest.approx(1001.8) and report["notes"] == []
    assert strict_json(lanner("report", "--preset", "all_time", "--json").stdout)["total"][
        "cost"
    ] == pytest.approx(1001.8)


def test_the_bound_is_a_setting(start_app, lanner, db):
    lanner("campaign", "create", "Paid", "--alias", "paid", "--offer-url", "https://o.example/?s={subid}")
    app = start_app(LANNER_MAX_CLICK_COST="5")
    click(app, "paid", "cost=4.5", ip="198.51.100.1")
    click(app, "paid", "cost=5.5", ip="198.51.100.2")
    lanner("spool", "flush")
    assert sorted(row[0] for row in stored(db, "SELECT cost FROM click")) == [0.0, 4.5]


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "x"])
def test_the_bound_must_be_a_positive_number(value):
    from settings import load_settings

    with pytest.raises(ValueError, match="LANNER_MAX_CLICK_COST"):
        load_settings({"LANNER_MAX_CLICK_COST": value})


@pytest.fixture
def poisoned(db):
    """Clicks and rollups as a tracker before the bound left them: two clicks of one hour costing
    1e308 (their sum is Infinity) and one costing Infinity, the rollups moved by the same amounts."""
    generate_clicks(db, 1500, 3, campaigns=2, seed=3, end_ms=END_MS)
    run_deferred(db)
    conn = db.connection()
    rows = conn.execute(
        "SELECT id, cost, created_at FROM click WHERE campaign_id = 1 ORDER BY created_at"
    ).fetchall()
    hour = rows[len(rows) // 2][2] // 3_600_000
    victims = [row for row in rows if row[2] // 3_600_000 == hour][:3]
    assert len(victims) == 3
    with db.atomic():
        delta = RollupDelta()
        for (click_id, old_cost, _), new_cost in zip(victims, (1e308, 1e308, float("inf")), strict=True):
            conn.execute("UPDATE click SET cost = ? WHERE id = ?", (new_cost, click_id)).close()
            delta.add_click_cost(click_key(conn, click_id), new_cost - old_cost)
        delta.apply(conn)
    day = datetime.fromtimestamp(victims[0][2] / 1000, UTC).date().isoformat()
    return db, day


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


def test_a_poisoned_report_says_so_instead_of_printing_infinity(poisoned, lanner, settings):
    from models.reporting.history import HistoryFiles, append_history
    from models.reporting.reportpage import PageQuery, page_report

    db, _ = poisoned
    report = run_report(db, ReportQuery(group_by=("day", "campaign"), preset="all_time"))
    assert report.total["cost"] is None and report.total["roi"] is None
    assert report.notes == [NOT_FINITE_NOTE]
    # A page DuckDB sums says so too, its rows without a finite cost last however it is sorted.
    files = HistoryFiles.of(settings)
    append_history(db, files)
    zones = ReportQuery(group_by=("sub_id_1",), preset="all_time", filters={"campaign": ("1",)})
    whole = run_report(db, zones, history=files)
    for is_descending in (True, False):
        page = page_report(db, zones, PageQuery(sort=(("cost", is_descending),), limit=5000), history=files)
        assert page.notes == whole.notes == [NOT_FINITE_NOTE] and page.total["cost"] is None
        costs = [row["cost"] for row in page.rows]
        assert None in costs and costs.index(None) == len(costs) - costs.count(None)
        assert page.row_count == len(whole.rows) == len(page.rows)
    printed = strict_json(
        lanner("report", "-g", "day", "-g", "campaign", "--preset", "all_time", "--json").stdout
    )
    assert printed["total"]["cost"] is None and printed["notes"] == [NOT_FINITE_NOTE]
    assert {row["campaign"] for row in printed["rows"] if row["cost"] is None} == {1}
    (subid,) = db.connection().execute("SELECT subid FROM click WHERE cost > 1e308").fetchone()
    assert strict_json(lanner("click", "show", subid, "--json").stdout)["click"]["cost"] is None
    table = lanner("report", "--preset", "all_time")
    assert "Note: " in table.stdout and "lanner cost set" in table.stdout  # Under the table.


def test_costs_adding_up_past_the_largest_double_are_left_empty_never_a_500(db, lanner, start_app):
    """SQLite sums them to Infinity; PostgreSQL's SUM refused them (overflow), so every report on them
    answered 500 there. Each of campaign 1's clicks and rollup rows holds 1e308: any two overflow."""
    from models.tables.dimensions import TABLES

    generate_clicks(db, 300, 2, campaigns=2, seed=5, end_ms=END_MS)
    run_deferred(db)
    conn = db.connection()
    conn.execute("UPDATE click SET cost = 1e308 WHERE campaign_id = 1").close()
    for table, _, _ in TABLES:
        conn.execute(f"UPDATE {table} SET click_cost = 1e308, revenue = 1e308 WHERE campaign_id = 1").close()
    for source in ("auto", "raw"):
        report = run_report(db, ReportQuery(group_by=("campaign",), preset="all_time", source=source))
        assert report.notes == [NOT_FINITE_NOTE], source
        assert [row["cost"] is None for row in report.rows] == [True, False], source
        # A day's row of one 1e308 is that number, as SQLite's sum of it; two or more are Infinity.
        report = run_report(db, ReportQuery(group_by=("day", "campaign"), preset="all_time", source=source))
        assert {row["cost"] for row in report.rows if row["campaign"] == 1} <= {None, 1e308}, source
    app = start_app(LANNER_ADMIN_BIND="off")
    status, body = api(app, lanner, {"preset": "all_time", "group": "campaign"})
    assert status == 200 and strict_json(body)["notes"] == [NOT_FINITE_NOTE]
    printed = strict_json(lanner("report", "--preset", "all_time", "--raw", "--json").stdout)
    assert printed["total"]["cost"] is None and printed["notes"] == [NOT_FINITE_NOTE]


def test_cost_set_repairs_a_poisoned_day_exactly(poisoned, lanner):
    db, day = poisoned
    out = lanner("cost", "set", "--campaign", "1", "--from", day, "--to", day, "--amount", "10")
    assert "10 USD over" in out.stdout
    for group_by in (("day", "campaign"), ("hour",), ("campaign", "country"), ("campaign",)):
        fast = run_report(db, ReportQuery(group_by=group_by, preset="all_time"))
        raw = run_report(db, ReportQuery(group_by=group_by, preset="all_time", source="raw"))
        assert "raw" not in fast.sources
        assert rows_of(fast) == rows_of(raw), group_by
        assert fast.notes == [] and fast.total["cost"] is not None
    (that_day,) = [
        row
        for row in run_report(db, ReportQuery(group_by=("day", "campaign"), preset="all_time")).rows
        if row["day"] == day and row["campaign"] == 1
    ]
    assert that_day["cost"] == pytest.approx(10.0)
    json.dumps(run_report(db, ReportQuery(preset="all_time")).total, allow_nan=False)


@pytest.mark.parametrize("amount", ["inf", "nan", "-1", "1e300"])
def test_cost_set_refuses_an_amount_that_is_not_a_sane_number(poisoned, lanner, amount):
    _, day = poisoned
    refused = lanner(
        "cost", "set", "--campaign", "1", "--from", day, "--to", day, "--amount", amount, check=False
    )
    assert refused.returncode == 1 and "The amount must be a number from 0 to" in refused.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "-1"])
def test_a_campaign_cost_window_or_offer_payout_must_be_a_sane_number(lanner, value):
    lanner("campaign", "create", "Paid", "--alias", "paid", "--offer-url", "https://o.example/?s={subid}")
    refused = lanner("campaign", "update", "paid", "--cost-value", value, check=False)
    assert refused.returncode == 1 and "A cost must be a number from 0 to" in refused.stderr
    refused = lanner("offer", "create", "O", "--url", "https://o.example/", "--payout", value, check=False)
    assert refused.returncode == 1 and "A payout must be a number from 0 to" in refused.stderr
    # An Infinity window stopped every worker loading the campaigns (int(inf) overflows).
    refused = lanner("campaign", "update", "paid", "--uniqueness-hours", value, check=False)
    assert refused.returncode == 1 and "The uniqueness window must be a positive number" in refused.stderr


# --- item 10: the report API's parameters ------------------------------------------------------------


def test_report_parameters_are_checked_and_a_campaign_filter_takes_an_alias_or_an_id(start_app, lanner):
    lanner("campaign", "create", "Rev", "--alias", "rev", "--offer-url", "https://o.example/?s={subid}")
    lanner("campaign", "create", "Other", "--alias", "other", "--offer-url", "https://o.example/?s={subid}")
    app = start_app(LANNER_ADMIN_BIND="off")
    for n in range(3):
        click(app, "rev", ip=f"198.51.100.{n + 1}")
    for n in range(2):
        click(app, "other", ip=f"198.51.100.{n + 1}")
    lanner("spool", "flush")
    lanner("db", "run-deferred")

    def clicks(query: dict[str, str]) -> int:
        status, body = api(app, lanner, {"preset": "all_time", **query})
        assert status == 200, body
        return strict_json(body)["total"]["clicks"]

    assert clicks({}) == 5
    assert clicks({"campaign": "rev"}) == clicks({"campaign": "1"}) == clicks({"f.campaign": "rev"}) == 3
    assert clicks({"f.campaign": "rev,2"}) == 5

    def refused(query: dict[str, str]) -> str:
        status, body = api(app, lanner, query)
        assert status == 400, (query, body)
        return json.loads(body)["description"]

    assert (
        refused({"campaign": "h-rev"})
        == "There is no campaign 'h-rev'; a campaign filter takes ids or aliases."
    )
    described = refused({"campaing": "rev"})
    assert described.startswith(
        "Unknown parameter 'campaing'; use group, preset, from, to, timezone, campaign"
    )
    assert "out of range" in refused({"from": "0001-01-01"})
    assert "out of range" in refused({"to": "9999-12-31"})
    assert refused({"format": "xml"}) == "The format is json or csv."

    def cli_clicks(*args: str) -> int:
        return strict_json(lanner("report", "--preset", "all_time", "--json", *args).stdout)["total"][
            "clicks"
        ]

    assert (
        cli_clicks("--campaign", "rev")
        == cli_clicks("--campaign", "1")
        == cli_clicks("-f", "campaign=rev")
        == 3
    )
    assert cli_clicks("-f", "campaign=1,other") == 5
    wrong = lanner("report", "-f", "campaign=h-rev", check=False)
    assert wrong.returncode == 1 and "There is no campaign 'h-rev'" in wrong.stderr
    early = lanner("report", "--from", "0001-01-01", check=False)
    assert early.returncode == 1 and "out of range" in early.stderr and "Traceback" not in early.stderr


# --- item 11: offer URLs a Location header cannot carry -----------------------------------------------


def test_an_international_offer_host_is_saved_as_punycode_and_bad_literals_encoded_or_refused(lanner):
    lanner("offer", "create", "Homograph", "--url", "https://оffer.example/lp?q=a b&s={subid}")
    (offer,) = json.loads(lanner("offer", "list", "--json").stdout)
    assert offer["url"] == f"https://{PUNYCODE_HOST}/lp?q=a%20b&s={{subid}}"
    refused = lanner("offer", "create", "Nul", "--url", "https://o.example/a%00b?s={subid}", check=False)
    assert refused.returncode == 1 and "%00" in refused.stderr and "Traceback" not in refused.stderr
    refused = lanner("offer", "create", "Bad", "--url", "https://ex..рф/", check=False)
    assert refused.returncode == 1 and "not a valid international domain name" in refused.stderr


def test_an_old_stored_offer_url_a_header_cannot_carry_still_answers_and_records_once(start_app, lanner, db):
    lanner("campaign", "create", "Old", "--alias", "old", "--offer-url", "https://o.example/?click={subid}")
    # Saved before the rule, as an older release let it be.
    db.connection().execute(
        "UPDATE offer SET url = ?", ("https://оffer.example/lp?q=a b&click={subid}",)
    ).close()
    app = start_app(LANNER_FALLBACK_URL="https://оffer.example/gone?x=a b")
    status, headers, _ = click(app, "old", ip="198.51.100.9")
    assert status == 302
    location = headers["location"]
    assert location.startswith(f"https://{PUNYCODE_HOST}/lp?q=a%20b&click=")
    lanner("spool", "flush")
    assert stored(db, "SELECT subid FROM click") == [(location.rsplit("=", 1)[1],)]
    status, headers, _ = request(app, "/no-such-campaign")
    assert (status, headers["location"]) == (302, f"https://{PUNYCODE_HOST}/gone?x=a%20b")


def test_a_location_journaled_before_the_rule_is_still_sent_as_ascii():
    # A debounced repeat answers the Location its first click journaled, maybe before the upgrade.
    import falcon

    from models.clicks.decision import Decision
    from routes.click import answer

    resp = falcon.Response()
    old = "https://оffer.example/lp?q=a b&click=S%20T"
    answer(resp, Decision("S", "http", old, "", 1, 1, 1, True, False, False, False))
    assert resp.get_header("Location") == "https://%D0%BEffer.example/lp?q=a%20b&click=S%20T"


# SQLite's SUM of the poisoned costs is Infinity, which the reports then refuse to print; PostgreSQL's
# backfill and reports sum them to Infinity too (models/store/postgres/sums.py).
def test_cost_set_while_the_rollup_backfill_runs_counts_each_click_once(poisoned, lanner):
    from models.migrations import deferred
    from models.tables.dimensions import TABLES

    db, day = poisoned
    # As if the clicks had been stored by a release before the rollups, and the backfill were half done.
    for table, _, _ in TABLES:
        db.connection().execute(f"DELETE FROM {table}")
    db.connection().execute("UPDATE meta SET value = 'backfill' WHERE key = 'rollup_conversions'")
    db.connection().execute(
        "UPDATE deferred_step SET state = 'pending', position = 0, done_units = 0, "
        "target = (SELECT MAX(id) FROM click), total_units = (SELECT COUNT(*) FROM click) WHERE name = ?",
        (deferred.ROLLUP_BACKFILL,),
    )
    original_chunk = deferred.CHUNK_IDS
    deferred.CHUNK_IDS = 750  # Half of the 1,500 clicks, the poisoned hour among them.
    try:
        deferred.run_chunk(db, deferred.ROLLUP_BACKFILL)
    finally:
        deferred.CHUNK_IDS = original_chunk
    lanner("cost", "set", "--campaign", "1", "--from", day, "--to", day, "--amount", "10")
    run_deferred(db)
    for group_by in (("day", "campaign"), ("hour",), ("campaign", "country")):
        fast = run_report(db, ReportQuery(group_by=group_by, preset="all_time"))
        raw = run_report(db, ReportQuery(group_by=group_by, preset="all_time", source="raw"))
        assert "raw" not in fast.sources
        assert rows_of(fast) == rows_of(raw), group_by


# --- issue 32: bodies and query strings that are not text, or not JSON a store can keep ------------------

# (what, a JSON value as sent, a form or query value as sent, the words a refusal of the JSON names,
# whether a form or query string of it is unreadable too). A lone surrogate cannot be spelled in UTF-8:
# in a form or a query string it comes as the bytes that would encode one, \xed\xa0\x80, percent-escaped
# or raw, and is refused as what it is, bytes that are not UTF-8.
HOSTILE = [
    ("escaped lone surrogate", b'"\\ud800"', b"%ED%A0%80", "surrogate", True),
    ("raw surrogate bytes", b'"\xed\xa0\x80"', b"\xed\xa0\x80", "UTF-8", True),
    ("invalid UTF-8", b'"\xff\xfe"', b"%FF", "UTF-8", True),
    ("deep nesting", b"[" * 100_000, b"%5B" * 100_000, "nested deeper", False),
    ("huge number", b"9" * 5_000, b"9" * 5_000, "digits", False),
]
JSON_TYPE = {"Content-Type": "application/json"}
FORM_TYPE = {"Content-Type": "application/x-www-form-urlencoded"}


def answer_text(headers: dict[str, str], body: bytes) -> str:
    """The refusal's sentence, from JSON (the APIs', the Click API's, a postback's) or an HTML page (the
    panel's), which must parse as what it says it is."""
    kind = headers.get("content-type", "")
    if kind.startswith("application/json"):
        answer = json.loads(body)
        return " ".join(str(answer.get(field, "")) for field in ("title", "description", "error", "detail"))
    assert kind.startswith("text/html"), headers
    text = body.decode()
    assert text.lstrip().lower().startswith("<!doctype html>"), text[:200]
    return text


@pytest.fixture
def every_family(start_app, db, env):
    """Each route family that reads a JSON body, a form or a query string, as (name, is_json, send):
    `send(app, value)` puts the hostile value where that family reads it. Admin families run on the web
    workers' app with LANNER_ADMIN_BIND=off (behind the path-scoped checks) and on the admin worker's."""
    import time

    from conftest import Clock, InProcessApp

    from app import create_admin_app
    from models.admin.services import create_campaign
    from models.conversions.postbacks import read_secret
    from settings import load_settings

    # The campaign by the service the CLI calls: no CLI process a test (the hostile values are the subject).
    token = create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}").token
    api_key, postback_key = read_secret(db, "api_key"), read_secret(db, "postback_key")
    web = start_app(LANNER_ADMIN_BIND="off")
    admin = InProcessApp(create_admin_app(load_settings(env), db=db), Clock(time.time()))
    keyed_json = {**JSON_TYPE, "X-Api-Key": api_key}

    def post(path, headers, body):
        return lambda app, value: request(app, path, headers, "POST", body(value))

    def get(path, headers=None):
        return lambda app, value: request(app, path + value.decode("latin-1"), headers or {})

    offer = b'{"name": %s, "url": "https://o.example/"}'
    postback = f"/{postback_key}/postback"
    click_api = f"/click_api/v3?token={token}"
    admin_families = [
        ("admin API body", True, post("/api/v1/offers", keyed_json, lambda v: offer % v)),
        ("admin API query", False, get("/api/v1/offers?cursor=", {"X-Api-Key": api_key})),
        (
            "rates API body",
            True,
            post("/api/currency/rates", keyed_json, lambda v: b'{"rates": {"EUR": %s}}' % v),
        ),
        ("report API query", False, get("/api/report?group=", {"X-Api-Key": api_key})),
        (
            "panel form",
            False,
            post("/panel/login", FORM_TYPE, lambda v: b"name=" + v + b"&password=0123456789"),
        ),
        ("panel query", False, get("/panel/login?next=")),
    ]
    web_families = [
        ("postback JSON body", True, post(postback, JSON_TYPE, lambda v: b'{"subid": "x", "tid": %s}' % v)),
        ("postback form", False, post(postback, FORM_TYPE, lambda v: b"subid=x&tid=" + v)),
        ("postback query", False, get(postback + "?subid=x&tid=")),
        ("Click API form", False, post(click_api, FORM_TYPE, lambda v: b"sub_id_1=" + v)),
        ("Click API query", False, get(click_api + "&sub_id_1=")),
    ]
    return [(name, web, *rest) for name, *rest in admin_families + web_families] + [
        (name, admin, *rest) for name, *rest in admin_families
    ]


@pytest.mark.parametrize(
    "what, json_value, form_value, words, is_unreadable_text", HOSTILE, ids=[h[0] for h in HOSTILE]
)
def test_hostile_bodies_and_query_strings_get_a_4xx_in_one_sentence_from_every_family_never_a_500(
    every_family, caplog, what, json_value, form_value, words, is_unreadable_text
):
    for name, app, is_json, send in every_family:
        status, headers, body = send(app, json_value if is_json else form_value)
        assert status < 500, (what, name, status, body[:300])
        text = answer_text(headers, body) if status >= 400 else ""
        if is_json:  # A JSON body that is not text, or not JSON a store can keep: 400, saying which
            # (or 413 where the family's cap is under the 100 KB of nesting: postbacks take 64 KB).
            is_refused = (status == 400 and words in text) or (status == 413 and "larger" in text)
            assert is_refused, (what, name, status, text[:300])
        elif is_unreadable_text:  # Bytes that are not UTF-8 in a form or query string: 400, saying so.
            assert status == 400 and "UTF-8" in text, (what, name, status, text[:300])
    for app in {id(app): app for _, app, _, _ in every_family}.values():  # Both apps still answer.
        assert request(app, "/healthz")[0] == 200
    assert "Traceback" not in caplog.text and "unhandled error" not in caplog.text, caplog.text[-3000:]


def test_paired_surrogate_escapes_are_one_character_and_are_kept(start_app, lanner, db):
    from models.conversions.postbacks import read_secret

    app = start_app(LANNER_ADMIN_BIND="off")
    headers = {**JSON_TYPE, "X-Api-Key": read_secret(db, "api_key")}
    body = b'{"name": "Launch \\ud83d\\ude80", "url": "https://o.example/"}'
    status, _, answer = request(app, "/api/v1/offers", headers, "POST", body)
    assert status == 201 and json.loads(answer)["name"] == "Launch \U0001f680"


def test_a_live_server_refuses_hostile_bodies_and_stays_up(start_server, db):
    """Through bjoern and the admin worker, the raw bytes as a client sends them."""
    from conftest import raw_request

    from models.conversions.postbacks import read_secret

    live = start_server(admin=True)
    api_key, postback_key = read_secret(db, "api_key"), read_secret(db, "postback_key")
    nested = b"[" * 100_000
    admin_port = live.extra["admin_port"]
    offers = f"POST /api/v1/offers HTTP/1.1\r\nX-Api-Key: {api_key}\r\n"
    postback = f"POST /{postback_key}/postback HTTP/1.1\r\n"
    sends = [
        (admin_port, offers, b'{"name": "\xed\xa0\x80"}'),
        (admin_port, offers, b'{"name": "\\udfff"}'),
        (admin_port, offers, nested),
        (live.port, postback, b'{"subid": "x", "tid": "\\ud800"}'),
        (live.port, postback, nested[:60_000]),
    ]
    for port, head, body in sends:
        raw = (
            head.encode()
            + b"Host: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        answer = raw_request(port, raw)
        assert answer.startswith(b"HTTP/1.1 400"), (head, answer[:300])
    answer = raw_request(admin_port, b"GET /panel/login?next=%ED%A0%80 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
    for port in (live.port, admin_port):
        assert request(port, "/healthz")[0] == 200
    assert "Traceback" not in live.log, live.log[-3000:]


def test_a_nul_in_an_admin_body_query_or_form_is_a_400_on_either_store(start_app, db):
    """Found by tests/test_fuzz_parsers.py (issue 32): PostgreSQL's text cannot hold a NUL, which SQLite
    keeps, so `POST /api/v1/sources {"name": "\\u0000"}` (or a `%00` in a report filter, a login form)
    was a 500 on PostgreSQL alone. routes/inputs.py refuses it for both."""
    from models.conversions.postbacks import read_secret

    app = start_app(LANNER_ADMIN_BIND="off")
    keyed = {"X-Api-Key": read_secret(db, "api_key")}
    sent = [
        ("/api/v1/sources", "POST", b'{"name": "\\u0000"}'),
        ("/api/v1/offers", "POST", b'{"name": "a\\u0000", "url": "https://o.example/"}'),
        ("/api/v1/status-maps", "PUT", b'{"word": "a\\u0000", "status": "sale"}'),
        ("/api/v1/clicks?campaign=%00", "GET", None),
        ("/api/v1/conversions?subid=x%00", "GET", None),
        ("/api/report?group=campaign&f.sub_id_1=%00", "GET", None),
    ]
    for path, method, body in sent:
        headers = {**keyed, **(JSON_TYPE if body else {})}
        status, _, answer = request(app, path, headers, method, body)
        assert status == 400 and "NUL" in json.loads(answer)["description"], (path, status, answer)
    form = b"name=a%00&password=0123456789"
    assert request(app, "/panel/login", FORM_TYPE, "POST", form)[0] == 400
    assert request(app, "/panel/login", FORM_TYPE, "POST", b"name=a\x00&password=0123456789")[0] == 400
    # A postback's JSON keeps a NUL as U+FFFD (models/conversions/postbacks.py), as its query does.
    postback = f"/{read_secret(db, 'postback_key')}/postback"
    status, _, answer = request(app, postback, JSON_TYPE, "POST", b'{"subid": "x\\u0000"}')
    assert status == 400 and "NUL" not in answer.decode()


def test_a_visitor_nul_lands_on_either_store_and_blocks_no_other_click(start_app, lanner, db, settings):
    """Found looking for the fuzzer's NUL elsewhere (issue 32): on PostgreSQL a `%00` in a sub id failed the
    flusher's whole batch at every flush (no click behind it landed), and a NUL in a User-Agent made a
    new worker's debounce probe a 500. It lands as U+FFFD there (SQLite keeps the NUL)."""
    from models.clicks.spool import flush_spool

    lanner("campaign", "create", "Demo", "--alias", "demo", "--offer-url", "https://o.example/?s={subid}")
    app = start_app()
    assert click(app, "demo", "sub1=a%00b", ip="203.0.113.1")[0] == 302
    assert click(app, "demo", "", ip="203.0.113.2", ua="Mozilla\x00x")[0] == 302
    assert click(app, "demo", "sub1=plain", ip="203.0.113.3")[0] == 302
    assert flush_spool(db, settings.spool_dir, settings.spool_segment_bytes).inserted == 3
    rows = {row[0]: row[1] for row in stored(db, "SELECT ip, sub_id_1 || '|' || user_agent FROM click")}
    nul = "\ufffd" if settings.uses_postgres else "\x00"
    assert rows["203.0.113.1"] == f"a{nul}b|Mozilla/5.0 test"
    assert rows["203.0.113.2"] == f"|Mozilla{nul}x" and rows["203.0.113.3"] == "plain|Mozilla/5.0 test"
