"""Postbacks and pixels over a real SQLite file, in two tiers.

In-process (`app_client`/`start_app`: create_worker_app() here, no socket): the postback, pixel and report
API handlers' answers and what they store. A real `lanner serve` (`server`/`start_server`: master, bjoern
workers) and a real Huey consumer: 32 concurrent postbacks over 4 workers, a parked postback settled by
the consumer's flusher, a 70 KB header bjoern must survive, the report API's own worker.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import click, raw_request, request


@pytest.fixture
def demo(db):
    """Offer 1 and campaign `demo`, made by the services the CLI calls (three CLI processes a test saved:
    the postbacks are the subject); the postback key."""
    from models.admin.services import create_campaign, create_offer
    from models.conversions.postbacks import read_secret

    offer = create_offer(db, "Offer", "https://o.example/?s={subid}", payout=4)
    assert offer.id == 1
    create_campaign(db, "Demo", "demo", offer_id=offer.id)
    return read_secret(db, "postback_key")


def landed_click(to, lanner, alias: str = "demo", **visitor: str) -> str:
    """A click through a server's port or an in-process app, flushed into the database; its subid."""
    status, headers, _ = click(to, alias, **visitor)
    assert status == 302
    lanner("spool", "flush")
    return parse_qs(urlsplit(headers["location"]).query)["s"][0]


def answer(response) -> dict:
    return json.loads(response[2])


def conversions(lanner, *args: str) -> list[dict]:
    return json.loads(lanner("conversion", "list", "--json", *args).stdout)


def postbacks(lanner, *args: str) -> list[dict]:
    return json.loads(lanner("postback", "list", "--json", *args).stdout)


def test_key_in_the_path_or_the_query_records_a_conversion(demo, app_client, lanner):
    subid = landed_click(app_client, lanner)
    first = request(app_client, f"/{demo}/postback?subid={subid}&status=lead&tid=a")
    assert first[0] == 200 and answer(first)["verdict"] == "created"
    second = request(app_client, f"/postback?key={demo}&subid={subid}&status=approved&tid=a&payout=9.5")
    assert answer(second)["verdict"] == "updated"
    [conversion] = conversions(lanner)
    assert (conversion["status"], conversion["original_status"], conversion["payout"]) == (
        "sale",
        "lead",
        9.5,
    )
    assert all(demo not in row["request"] for row in postbacks(lanner))  # The key is masked in the log.


def test_post_form_and_json_bodies(demo, app_client, lanner):
    form_subid, json_subid = (
        landed_click(app_client, lanner),
        landed_click(app_client, lanner, ip="198.51.100.2"),
    )
    form = request(
        app_client,
        f"/{demo}/postback",
        {"Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
        body=f"subid={form_subid}&status=sale&payout=3".encode(),
    )
    assert answer(form)["verdict"] == "created"
    body = json.dumps({"subid": json_subid, "status": "lead", "payout": 2, "tid": "j1"}).encode()
    sent = request(app_client, f"/{demo}/postback", {"Content-Type": "application/json"}, "POST", body)
    assert answer(sent)["verdict"] == "created"
    assert {(c["subid"], c["status"]) for c in conversions(lanner)} == {
        (form_subid, "sale"),
        (json_subid, "lead"),
    }


def test_a_wrong_key_is_403_counted_and_never_processed(demo, app_client, lanner):
    subid = landed_click(app_client, lanner)
    for path in (
        f"/wrong{demo}/postback?subid={subid}",
        f"/postback?key=&subid={subid}",
        f"/postback?subid={subid}",
    ):
        status, _, body = request(app_client, path)
        assert status == 403, path
        assert json.loads(body)["verdict"] == "forbidden"
    assert conversions(lanner) == []
    assert postbacks(lanner) == []  # Anonymous: counted, not logged row by row.
    [counter] = json.loads(lanner("postback", "refusals", "--json").stdout)
    assert (counter["remote_ip"], counter["refusals"]) == ("127.0.0.1", 3)


def test_a_rotated_key_is_refused_at_once(demo, app_client, lanner):
    subid = landed_click(app_client, lanner)
    new_key = lanner("postback", "key", "rotate", "--yes").stdout.splitlines()[0].removeprefix("key: ")
    assert request(app_client, f"/{demo}/postback?subid={subid}")[0] == 403
    assert request(app_client, f"/{new_key}/postback?subid={subid}")[0] == 200


def test_32_concurrent_identical_postbacks_make_one_conversion(demo, start_server, lanner):
    server = start_server(workers=4)
    subid = landed_click(server.port, lanner)
    path = f"/{demo}/postback?subid={subid}&status=sale&payout=5&tid=order-77"
    with ThreadPoolExecutor(32) as pool:
        responses = list(pool.map(lambda _: request(server.port, path), range(32)))
    assert [status for status, _, _ in responses] == [200] * 32
    verdicts = sorted(answer(response)["verdict"] for response in responses)
    assert verdicts == ["created"] + ["duplicate"] * 31
    assert len(conversions(lanner)) == 1
    assert len(postbacks(lanner, "--limit", "100")) == 32


def test_a_postback_before_its_click_lands_is_parked_then_matched(demo, server, lanner, start_consumer):
    status, headers, _ = click(server.port, "demo")
    subid = parse_qs(urlsplit(headers["location"]).query)["s"][0]
    parked = request(server.port, f"/{demo}/postback?subid={subid}&status=sale&tid=early")
    assert answer(parked)["verdict"] == "parked"
    [orphan] = postbacks(lanner, "--orphans")
    assert orphan["subid"] == subid and orphan["expires_at"]
    start_consumer()  # Its flusher lands the click and settles the parked postback.
    deadline = time.monotonic() + 20
    while not conversions(lanner) and time.monotonic() < deadline:
        time.sleep(0.2)
    [conversion] = conversions(lanner)
    assert (conversion["subid"], conversion["tid"], conversion["status"]) == (subid, "early", "sale")
    assert postbacks(lanner, "--orphans") == []
    assert "parked" in postbacks(lanner)[0]["detail"]


def test_hostile_postbacks_get_a_4xx_never_a_500(demo, app_client, lanner):
    subid = landed_click(app_client, lanner)
    paths = [
        f"/{demo}/postback",
        f"/{demo}/postback?subid=%FF%FE%00",
        f"/{demo}/postback?subid={subid}%27%3B%20DROP%20TABLE%20click%3B--",
        f"/{demo}/postback?subid={subid}&payout=1e400",
        f"/{demo}/postback?subid={subid}&status=%FF%FF",
        f"/{demo}/postback?subid={{subid}}",
    ]
    for path in paths:
        status, _, body = request(app_client, path)
        assert status == 400, (path[:80], status, body)
        assert json.loads(body)["verdict"] == "invalid"
    # 3,000 extra parameters: the first 100 are read, the postback is valid.
    other = landed_click(app_client, lanner, ip="198.51.100.77")
    many = request(app_client, f"/{demo}/postback?subid={other}&" + "x=1&" * 3000)
    assert answer(many)["verdict"] == "created"
    bad_json = request(
        app_client, f"/{demo}/postback", {"Content-Type": "application/json"}, "POST", b"{nope"
    )
    array = request(app_client, f"/{demo}/postback", {"Content-Type": "application/json"}, "POST", b"[1]")
    assert (bad_json[0], array[0]) == (400, 400)
    # SQL in the tid and sub_id values is stored as text.
    tid = "1'); DELETE FROM conversion; --"
    ok = request(
        app_client,
        f"/{demo}/postback?subid={subid}&tid=1%27%29%3B%20DELETE%20FROM%20conversion%3B%20--&sub_id_3=%27%20OR%201%3D1",
    )
    assert answer(ok)["verdict"] == "created"
    assert conversions(lanner, "--subid", subid)[0]["tid"] == tid


def test_a_postback_with_a_70_kb_header_never_gets_a_500_and_the_worker_stays(demo, server):
    huge = raw_request(
        server.port,
        f"GET /{demo}/postback?subid=0 HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 70000}\r\n\r\n".encode(),
    )
    assert not huge.startswith(b"HTTP/1.1 5") and not huge.startswith(b"HTTP/1.0 5")
    assert request(server.port, "/healthz")[0] == 200


def test_click_pixel_and_conversion_pixel(demo, app_client, lanner):
    status, headers, body = request(app_client, "/px/click/demo?sub1=lander", {"X-Real-IP": "192.0.2.44"})
    assert (status, headers["content-type"], body[:6]) == (200, "image/gif", b"GIF89a")
    subid = headers["x-lanner-subid"]
    assert f"lanner_subid={subid}" in headers["set-cookie"]
    lanner("spool", "flush")
    clicks = json.loads(lanner("click", "list", "--json").stdout)
    assert [c["subid"] for c in clicks] == [subid]
    converted = request(
        app_client, f"/px/conversion?key={demo}&status=lead&payout=1", {"Cookie": f"lanner_subid={subid}"}
    )
    assert (converted[0], converted[1]["content-type"], converted[1]["x-lanner-verdict"]) == (
        200,
        "image/gif",
        "created",
    )
    assert conversions(lanner)[0]["subid"] == subid
    forged = request(app_client, f"/px/conversion?key=nope&subid={subid}")
    assert (forged[0], forged[1]["content-type"]) == (403, "image/gif")
    assert request(app_client, "/px/click/no-such-campaign")[0] == 404


def test_the_report_api_has_its_own_worker_and_the_campaign_url_workers_do_not_answer_it(
    demo, start_server, lanner
):
    server = start_server(admin=True)
    subid = landed_click(server.port, lanner)
    request(server.port, f"/{demo}/postback?subid={subid}&status=sale&payout=6")
    lanner("db", "run-deferred")
    api_key = lanner("api", "key", "show").stdout.strip()
    assert request(server.port, "/api/report", {"X-Api-Key": api_key})[0] == 404
    admin = server.extra["admin_port"]
    assert json.loads(request(admin, "/healthz")[2])["role"] == "admin"
    assert request(admin, "/api/report")[0] == 403
    status, _, body = request(admin, "/api/report?preset=today", {"X-Api-Key": api_key})
    assert status == 200
    assert json.loads(body)["total"]["revenue"] == 6


def test_report_api_needs_the_key_and_answers_json_and_csv(demo, start_app, lanner):
    # The admin worker's resource, served by this app as with LANNER_ADMIN_BIND=off.
    app = start_app(LANNER_ADMIN_BIND="off")
    subid = landed_click(app, lanner)
    request(app, f"/{demo}/postback?subid={subid}&status=sale&payout=6")
    lanner("db", "run-deferred")
    api_key = lanner("api", "key", "show").stdout.strip()
    assert request(app, "/api/report")[0] == 403
    assert request(app, "/api/report", {"X-Api-Key": demo})[0] == 403
    status, _, body = request(app, "/api/report?group=campaign,country&preset=today", {"X-Api-Key": api_key})
    assert status == 200
    report = json.loads(body)
    assert (
        report["total"]["clicks"] == 1 and report["total"]["sales"] == 1 and report["total"]["revenue"] == 6
    )
    assert [(row["campaign"], row["campaign_name"]) for row in report["rows"]] == [(1, "demo")]
    csv_text = request(app, f"/api/report?api_key={api_key}&format=csv&f.country=ZZ")[2].decode()
    assert csv_text.splitlines()[0].startswith("campaign,campaign_name,clicks")
    assert len(csv_text.splitlines()) == 1  # No row for a country nobody came from.
    bad = request(app, "/api/report?group=planet", {"X-Api-Key": api_key})
    assert bad[0] == 400 and b"Cannot group" in bad[2]
