"""The crawler networks the platforms publish: the shipped copy, the lookup (IpList's bisect), `lanner bots
update` against a local HTTP server (success, a failing source keeps its data, the shrink guard), the
periodic task, and a process picking up a replaced file without a restart."""

from __future__ import annotations

import http.server
import ipaddress
import json
import random
import threading
from datetime import UTC, datetime, timedelta

import pytest
from conftest import click

from models.lookups.bots import BotDetector
from models.lookups.crawlerranges import (
    SHIPPED_RANGES,
    CrawlerRanges,
    RangeData,
    RangeDataError,
    RangeSource,
    is_update_due,
    parse_published,
    update_ranges,
)
from models.lookups.iplist import IpList

CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Safari/537.36"
)
GOOGLEBOT_IP = "66.249.66.1"  # In Google's published googlebot.json (66.249.64.0/27 ... 66.249.79.224/27).
# As many networks as the shipped googlebot list, so an update is no shrink.
GOOGLEBOT_NETWORKS = tuple(f"66.{first}.{third}.0/27" for first in (249, 250) for third in range(200))


def google_list(*prefixes: str, created: str = "2026-11-30T14:46:45.000000") -> bytes:
    items = [{"ipv6Prefix" if ":" in p else "ipv4Prefix": p} for p in prefixes]
    return json.dumps({"creationTime": created, "prefixes": items}).encode()


class Served:
    """A local HTTP server (port 0) answering `files` {path: (status, body)}; the rest 404."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[int, bytes]] = {}
        self.requests: list[str] = []
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                served.requests.append(self.path)
                status, body = served.files.get(self.path, (404, b"not found"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def served():
    server = Served()
    yield server
    server.close()


# --- the shipped copy and the lookup ------------------------------------------------------------------------


def test_the_shipped_copy_names_its_sources_and_dates():
    data = RangeData.read(SHIPPED_RANGES)
    names = {source.name for source in data.sources}
    assert {"google-googlebot", "bing-bingbot", "openai-gptbot", "apple-applebot", "meta"} <= names
    assert data.updated_at.startswith("2026-09-02") and data.network_count > 3000
    assert all(source.url and source.fetched_at and source.networks for source in data.sources)
    assert all(source.extra.get("via") for source in data.sources)  # Where the copy came from, its licence.


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        (GOOGLEBOT_IP, "ip range: google-googlebot"),
        ("157.55.39.1", "ip range: bing-bingbot"),  # 157.55.39.0/24
        ("17.241.75.1", "ip range: apple-applebot"),
        ("2a03:2880:f000::1", "ip range: meta"),  # AS32934's IPv6
        ("::ffff:66.249.66.1", "ip range: google-googlebot"),
    ],
)
def test_a_published_crawler_address_with_a_chrome_user_agent_is_a_bot(ip, reason):
    detector = BotDetector(crawler_ranges=CrawlerRanges(None))
    assert detector.reason(CHROME, ip) == reason
    assert BotDetector().reason(CHROME, ip) is None  # What the User-Agent alone says.


def test_other_addresses_are_not_and_the_user_agent_and_ip_list_reasons_come_first():
    detector = BotDetector(["66.249.66.0/24"], crawler_ranges=CrawlerRanges(None))
    assert detector.reason(CHROME, "203.0.113.9") is None
    assert detector.reason(CHROME, "not an ip") is None
    assert detector.reason(CHROME, GOOGLEBOT_IP) == "ip list"
    assert detector.reason("Googlebot/2.1", GOOGLEBOT_IP) == "crawler: Googlebot"


def test_ip_list_bisect_agrees_with_ipaddress_on_overlapping_and_adjacent_networks():
    rng = random.Random(18)
    networks = []
    for _ in range(400):
        length = rng.randrange(8, 33)
        address = rng.getrandbits(32) >> (32 - length) << (32 - length)
        networks.append(ipaddress.ip_network((address, length)))
    networks += [ipaddress.ip_network("10.0.0.0/25"), ipaddress.ip_network("10.0.0.128/25")]  # Adjacent.
    networks += [ipaddress.ip_network("2001:db8::/32"), ipaddress.ip_network("2001:db8:1::/48")]  # Nested.
    ip_list = IpList(str(network) for network in networks)
    halves = IpList.union([IpList(map(str, networks[::2])), IpList(map(str, networks[1::2]))])
    assert len(halves) == len(ip_list)
    probes = [ipaddress.ip_address(rng.getrandbits(32)) for _ in range(3000)]
    probes += [network.network_address for network in networks] + [
        network.broadcast_address for network in networks
    ]
    probes += [
        n.broadcast_address + 1 for n in networks if n.version == 4 and int(n.broadcast_address) < 2**32 - 1
    ]
    probes += [ipaddress.ip_address("2001:db8:ffff::1"), ipaddress.ip_address("2001:db9::")]
    for probe in probes:
        expected = any(probe in network for network in networks if network.version == probe.version)
        assert (str(probe) in ip_list) == expected == (str(probe) in halves), probe


# --- parsing a downloaded list ------------------------------------------------------------------------------


def test_google_s_format_bing_s_zero_width_spaces_and_cidr_lines_parse():
    networks, created = parse_published(google_list("66.249.64.0/27", "2001:4860:4801:10::/64"))
    assert networks == ["2001:4860:4801:10::/64", "66.249.64.0/27"] and created.startswith("2026-11-30")
    bing = '{"prefixes": [{"ipv4Prefix": "157.55.39.0/24\u200b"}]}'.encode()
    assert parse_published(bing) == (["157.55.39.0/24"], "")
    assert parse_published(b"# Meta\n31.13.24.0/21\n\n2a03:2880::/32  # AS32934\n")[0] == [
        "2a03:2880::/32",
        "31.13.24.0/21",
    ]


@pytest.mark.parametrize(
    "body", [b"", b'{"prefixes": []}', b'{"prefixes": [', b"31.13.24.0/21\n<html>", b"\xff\xfe"]
)
def test_an_unusable_list_is_refused(body):
    with pytest.raises(RangeDataError):
        parse_published(body)


# --- `lanner bots update` -----------------------------------------------------------------------------------


def test_update_fetches_every_source_and_keeps_the_unconfigured_ones(served, tmp_path):
    served.files["/googlebot.json"] = (200, google_list(*GOOGLEBOT_NETWORKS))
    meta = [f"31.13.{n}.0/24" for n in range(40)]
    served.files["/v4.txt"] = (200, "\n".join(meta).encode())
    served.files["/v6.txt"] = (200, b"2a03:2880::/32\n")
    path = tmp_path / "bots" / "ranges.json"
    sources = [
        ("google-googlebot", served.url("/googlebot.json")),
        ("meta", served.url("/v4.txt")),
        ("meta", served.url("/v6.txt")),  # One name, two lists: the union.
    ]
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    report = update_ranges(sources, path, now=now)
    assert report.is_complete, report.lines
    data = RangeData.read(path)
    by_name = {source.name: source for source in data.sources}
    assert set(by_name["google-googlebot"].networks) == set(GOOGLEBOT_NETWORKS)
    assert by_name["google-googlebot"].created.startswith("2026-11-30")
    assert by_name["google-googlebot"].extra["operator"] == "Google"  # Kept from the shipped copy.
    assert set(by_name["meta"].networks) == {"2a03:2880::/32", *meta}
    assert by_name["meta"].fetched_at == data.updated_at == "2026-12-01T12:00:00+00:00"
    # The shipped copy's other sources are kept as they were; nothing else is left in the directory.
    assert len(by_name["bing-bingbot"].networks) > 10 and by_name["bing-bingbot"].fetched_at.startswith(
        "2026-09"
    )
    assert [p.name for p in path.parent.iterdir()] == ["ranges.json"]


def test_a_failing_source_keeps_its_previous_networks(served, tmp_path):
    path = tmp_path / "ranges.json"
    before = RangeData(
        (
            RangeSource("google-googlebot", ("66.249.64.0/27", "66.249.66.0/27"), "u", "c", "2026-11-01"),
            RangeSource("bing-bingbot", ("157.55.39.0/24",), "u", "", "2026-11-01"),
            RangeSource("openai-gptbot", ("20.171.206.0/24",), "u", "", "2026-11-01"),
        ),
        "2026-11-01",
    )
    before.write(path)
    served.files["/broken.json"] = (200, b'{"prefixes": [')
    served.files["/bingbot.json"] = (200, google_list("157.55.39.0/24", "40.77.167.0/24"))
    report = update_ranges(
        [
            ("google-googlebot", served.url("/broken.json")),
            ("openai-gptbot", served.url("/missing.json")),  # 404
            ("bing-bingbot", served.url("/bingbot.json")),
            ("perplexity-bot", "http://127.0.0.1:9/unreachable.json"),  # Refused connection, no data yet.
        ],
        path,
    )
    assert sorted(report.failed) == ["google-googlebot", "openai-gptbot", "perplexity-bot"]
    assert any(
        "google-googlebot: not updated" in line and "kept its 2 networks" in line for line in report.lines
    )
    after = {source.name: source for source in RangeData.read(path).sources}
    assert after["google-googlebot"] == before.sources[0]
    assert after["openai-gptbot"] == before.sources[2]
    assert after["bing-bingbot"].networks == ("157.55.39.0/24", "40.77.167.0/24")
    assert "perplexity-bot" not in after


def test_a_source_that_shrank_by_more_than_half_is_refused(served, tmp_path):
    path = tmp_path / "ranges.json"
    networks = tuple(f"66.249.{n}.0/24" for n in range(10))
    RangeData((RangeSource("google-googlebot", networks, "u", "", "2026-11-01"),), "2026-11-01").write(path)
    served.files["/cut.json"] = (200, google_list(*networks[:4]))  # A truncated download: 4 of 10.
    served.files["/half.json"] = (200, google_list(*networks[:5]))
    report = update_ranges([("google-googlebot", served.url("/cut.json"))], path)
    assert report.failed == ["google-googlebot"] and "shrank from 10 to 4" in report.lines[0]
    assert RangeData.read(path).sources[0].networks == networks
    assert update_ranges([("google-googlebot", served.url("/half.json"))], path).is_complete
    assert RangeData.read(path).sources[0].networks == networks[:5]


def test_lanner_bots_update_and_status(served, env, lanner, data_dir):
    served.files["/googlebot.json"] = (200, google_list(*GOOGLEBOT_NETWORKS))
    env["LANNER_BOT_RANGE_SOURCES"] = f"google-googlebot={served.url('/googlebot.json')}"
    shipped = json.loads(lanner("status", "--json").stdout)["bot_ranges"]
    assert shipped["path"] == str(SHIPPED_RANGES) and shipped["updated_at"].startswith("2026-09-02")
    result = lanner("bots", "update")
    assert f"google-googlebot: {len(GOOGLEBOT_NETWORKS)} networks, published 2026-11-30" in result.stdout
    status = json.loads(lanner("status", "--json").stdout)["bot_ranges"]
    assert status["path"] == str(data_dir / "bots" / "ranges.json")
    assert status["updated_at"] > shipped["updated_at"] and status["sources"] == 16
    env["LANNER_BOT_RANGE_SOURCES"] = f"google-googlebot={served.url('/gone.json')}"
    failed = lanner("bots", "update", check=False)
    assert failed.returncode == 1 and "google-googlebot: not updated" in failed.stdout
    assert "keep their previous networks" in failed.stderr
    assert "bot_ranges: path" in lanner("status").stdout


def test_the_periodic_task_updates_only_when_enabled_and_due(served, env, data_dir):
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    served.files["/googlebot.json"] = (200, google_list(*GOOGLEBOT_NETWORKS))
    sources = f"google-googlebot={served.url('/googlebot.json')}"
    path = data_dir / "bots" / "ranges.json"
    create_huey(
        load_settings({**env, "LANNER_BOT_RANGE_SOURCES": sources}), immediate=True
    ).update_bot_ranges()
    assert not path.exists() and served.requests == []  # LANNER_BOT_RANGES_UPDATE_DAYS=0: never.
    settings = load_settings(
        {**env, "LANNER_BOT_RANGE_SOURCES": sources, "LANNER_BOT_RANGES_UPDATE_DAYS": "7"}
    )
    huey = create_huey(settings, immediate=True)
    huey.update_bot_ranges()
    assert path.exists() and len(served.requests) == 1
    huey.update_bot_ranges()  # Updated moments ago: not due for a week.
    assert len(served.requests) == 1
    assert is_update_due(path, 7, now=datetime.now(UTC) + timedelta(days=7, seconds=1))


# --- a long-running process ---------------------------------------------------------------------------------


class Tick:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_process_switches_to_a_new_file_without_a_restart(tmp_path):
    path = tmp_path / "ranges.json"
    tick = Tick()
    ranges = CrawlerRanges(path, clock=tick)
    assert ranges.in_use is None  # Nothing loaded until a click asks.
    assert ranges.reason(GOOGLEBOT_IP) == "ip range: google-googlebot" and ranges.in_use == SHIPPED_RANGES
    RangeData((RangeSource("test-crawler", ("203.0.113.0/24",)),), "2026-12-01").write(path)
    assert ranges.reason("203.0.113.9") is None
    assert not ranges.refresh()  # Looked at less than a second ago... (at construction)
    tick.now += 1.5
    assert ranges.refresh() and ranges.in_use == path
    assert ranges.reason("203.0.113.9") == "ip range: test-crawler" and ranges.reason(GOOGLEBOT_IP) is None
    path.write_text("{broken")  # A hand edit gone wrong: the ranges in use stay.
    tick.now += 1.5
    assert not ranges.refresh() and ranges.reason("203.0.113.9") == "ip range: test-crawler"


def test_the_flusher_uses_a_replaced_file_from_its_next_batch(tmp_path):
    from models.clicks.record import CLICK_COLUMNS, IP, IS_BOT, NOT_CHECKED, USER_AGENT
    from models.clicks.spool import fill_lookups
    from models.lookups.useragent import UserAgentParser

    path = tmp_path / "ranges.json"
    tick = Tick()
    detector = BotDetector(crawler_ranges=CrawlerRanges(path, clock=tick))

    def is_bot(ip: str) -> int:
        row = [""] * len(CLICK_COLUMNS)
        row[USER_AGENT], row[IP], row[IS_BOT] = CHROME, ip, NOT_CHECKED
        fill_lookups([row], UserAgentParser(), detector)
        return row[IS_BOT]

    assert is_bot("203.0.113.9") == 0
    RangeData((RangeSource("test-crawler", ("203.0.113.0/24",)),), "2026-12-01").write(path)
    tick.now += 1.5
    assert is_bot("203.0.113.9") == 1


@pytest.mark.parametrize(("setting", "answer"), [("", 200), ("off", 302)])
def test_the_click_path_routes_a_crawler_address_as_a_bot_unless_ranges_are_off(
    start_app, lanner, setting, answer
):
    lanner(
        "campaign", "create", "Plain", "--alias", "plain", "--offer-url", "https://offer.example/?c={subid}"
    )
    lanner(
        "stream",
        "add",
        "plain",
        "--type",
        "intercepting",
        "--filter",
        "bot=yes",
        "--action",
        "html",
        "--html",
        "bot",
    )
    app = start_app(LANNER_BOT_RANGES=setting)
    status, _, body = click(app, "plain", ip=GOOGLEBOT_IP, ua=CHROME)
    assert status == answer and (body == b"bot") == (answer == 200)
