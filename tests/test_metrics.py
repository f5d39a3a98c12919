"""`/metrics`, `/livez`, `/readyz` and the spool's backlog (routes/metrics.py, routes/health.py).

The metrics are read from a real `lanner serve` (two web workers, its admin worker) with a strict parser of
Prometheus' text format written here (no client library in the venv): every click counted once whichever
worker took it, and still counted after a worker is killed and replaced. Readiness and the backlog's
count are asked of in-process objects on the test's real spool and database. The PostgreSQL outage's
health and metrics are in tests/test_cluster.py, on the cluster it starts anyway.
"""

from __future__ import annotations

import math
import os
import re
import signal
from types import SimpleNamespace

import falcon
from conftest import START_SECONDS, click, request, wait_until
from falcon.testing import TestClient
from test_click_http import web_workers

from models.admin.services import create_campaign
from models.clicks.backlog import SpoolBacklog
from models.clicks.spool import (
    flush_spool,
    list_segments,
    read_position,
    remove_flushed_segments,
    spool_status,
)
from models.clicks.visit import Visit
from models.ops.metrics import CATALOGUE, SLOT_SUFFIX, slot_dir
from routes.health import LivezResource, ReadyzResource
from workers.runtime.spoolwatch import MIN_FREE_BYTES, REFUSAL_WINDOW, SpoolWatch

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")
VALUE = re.compile(r"^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]Inf|NaN)$")
SUFFIXES = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def parse_exposition(text: str) -> dict[str, dict]:
    """Prometheus' text format 0.0.4, strictly: {family: {type, help, samples: {(name, labels): value}}}.

    Refuses a sample before its family's # TYPE, a family split in two, a name that is not its family's
    (with the type's suffixes), a bad label or value, a repeated series or HELP/TYPE, a histogram whose
    buckets are not cumulative or whose +Inf bucket is not its _count, and a missing final newline."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    families: dict[str, dict] = {}
    current = None
    for number, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {number}: {line!r}"
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, keyword, name, *rest = line.split(" ", 3)
            assert re.fullmatch(NAME, name), where
            family = families.setdefault(name, {"type": None, "help": None, "samples": {}})
            assert not family["samples"], f"{where}: after the family's samples"
            key = "help" if keyword == "HELP" else "type"
            if key == "help":  # Only \\ and \n are escapes in HELP text.
                assert re.fullmatch(r"(?:[^\\]|\\[\\n])*", rest[0] if rest else ""), f"{where}: a bad escape"
            assert family[key] is None, f"{where}: a second {keyword}"
            family[key] = rest[0] if rest else ""
            if key == "type":
                assert family["type"] in SUFFIXES, where
            current = name
            continue
        assert line and not line.startswith("#"), f"{where}: neither a sample nor HELP/TYPE"
        found = SAMPLE.match(line)
        assert found, f"{where}: not a sample"
        name, labels_text, value = found.group(1), found.group(2) or "", found.group(found.lastindex)
        assert VALUE.match(value), f"{where}: not a value"
        family = families.get(current or "")
        assert family is not None and family["type"] is not None, f"{where}: no # TYPE before it"
        assert name in {current + suffix for suffix in SUFFIXES[family["type"]]}, f"{where}: not of {current}"
        labels = tuple(re.findall(LABEL, labels_text))
        assert len({label for label, _ in labels}) == len(labels), f"{where}: a label twice"
        series = (name, labels)
        assert series not in family["samples"], f"{where}: the series again"
        family["samples"][series] = float(value)
    for name, family in families.items():
        if family["type"] == "histogram":
            buckets = [
                (float(dict(labels)["le"]), value)
                for (sample, labels), value in family["samples"].items()
                if sample == f"{name}_bucket"
            ]
            assert buckets and buckets[-1][0] == math.inf, f"{name}: no +Inf bucket last"
            assert [le for le, _ in buckets] == sorted(le for le, _ in buckets), (
                f"{name}: buckets out of order"
            )
            counts = [value for _, value in buckets]
            assert counts == sorted(counts), f"{name}: buckets not cumulative"
            assert family["samples"][(f"{name}_count", ())] == counts[-1], f"{name}: +Inf is not _count"
            assert (f"{name}_sum", ()) in family["samples"], f"{name}: no _sum"
    return families


def value(families: dict, name: str, **labels: str) -> float:
    family = families[name.removesuffix("_count")]
    return family["samples"][(name, tuple(labels.items()))]


def scrape(port: int) -> dict:
    status, headers, body = request(port, "/metrics")
    assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse_exposition(body.decode())


def test_the_parser_refuses_what_prometheus_would():
    good = '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n'
    assert value(parse_exposition(good), "a_total", x="1") == 2
    for bad in (
        good.rstrip("\n"),  # No final newline.
        'a_total{x="1"} 2\n',  # No TYPE.
        good + 'a_total{x="1"} 3\n',  # The series again.
        good.replace("2\n", "two\n"),
        good.replace('x="1"', "x=1"),
        good.replace("A.", 'A \\"quoted\\".'),  # Quotes are not escaped in HELP.
        good + "# TYPE b gauge\nb 1\n" + 'a_total{x="2"} 1\n',  # A family split in two.
        "# TYPE h histogram\n" + 'h_bucket{le="1.0"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
    ):
        try:
            parse_exposition(bad)
        except AssertionError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_metrics_count_each_click_once_over_both_workers_and_through_a_killed_one(
    lanner, start_server, settings
):
    lanner("campaign", "create", "M", "--alias", "m", "--offer-url", "https://offer.example/?c={subid}")
    server = start_server(workers=2, admin=True, LANNER_DEBOUNCE_SECONDS="600")
    admin = server.extra["admin_port"]
    for n in range(3):
        assert click(server.port, "m", ua=f"Visitor {n}")[0] == 302
    assert click(server.port, "m", ua="Visitor 0")[0] == 302  # Within debounce: the repeat.
    assert click(server.port, "nope")[0] == 404
    prefetch = request(server.port, "/m", {"Sec-Purpose": "prefetch", "User-Agent": "Visitor 9"})
    assert prefetch[0] == 204
    status, _, body = request(server.port, "/livez")
    assert (status, body) == (200, b'{"status": "ok"}')
    status, _, body = request(server.port, "/readyz")
    assert status == 200 and b'"ready"' in body

    families = scrape(admin)
    always = {metric.name for metric in CATALOGUE} - {
        "lanner_queue_tasks_pending",  # No queue file before a consumer or a delivery made one.
        "lanner_flusher_heartbeat_age_seconds",  # No `lanner worker` here.
        "lanner_flusher_last_landed_age_seconds",
    }
    assert always <= set(families), always - set(families)
    clicks = {o: value(families, "lanner_clicks_total", outcome=o) for o in ("stored", "repeat", "refused")}
    assert clicks == {"stored": 3, "repeat": 1, "refused": 0}
    assert value(families, "lanner_clicks_total", outcome="unknown_campaign") == 1
    assert value(families, "lanner_clicks_total", outcome="prefetch") == 1
    assert value(families, "lanner_redirects_total", outcome="click") == 3
    assert value(families, "lanner_redirects_total", outcome="repeat") == 1
    # Every web request answered is in the histogram and in one status class (health polls included).
    answered = sum(
        value(families, "lanner_http_responses_total", code=c) for c in ("2xx", "3xx", "4xx", "5xx")
    )
    assert value(families, "lanner_http_request_duration_seconds_count") == answered >= 9
    assert value(families, "lanner_http_responses_total", code="3xx") == 4
    # Three lines (a repeat writes none) that nothing lands: no consumer here.
    assert value(families, "lanner_spool_pending_clicks") == 3
    assert value(families, "lanner_dependency_up", dependency="database") == 1
    assert value(families, "lanner_dependency_up", dependency="spool") == 1
    assert value(families, "lanner_dependency_up", dependency="consumer") == 0
    assert value(families, "lanner_node_info", node=settings.node_id) == 1

    # A worker killed: its replacement takes its slot over and counts on; no slot is added.
    victim = web_workers(server.process.pid)[0]
    os.kill(int(victim), signal.SIGKILL)

    def replaced() -> bool:
        workers = web_workers(server.process.pid)
        return len(workers) == 2 and victim not in workers

    wait_until(replaced, START_SECONDS, "the killed worker's replacement", lambda: server.log)
    wait_until(lambda: request(server.port, "/readyz")[0] == 200, START_SECONDS, "/readyz")
    for n in range(3, 5):
        assert click(server.port, "m", ua=f"Visitor {n}")[0] == 302
    after = scrape(admin)
    assert value(after, "lanner_clicks_total", outcome="stored") == 5
    assert value(after, "lanner_redirects_total", outcome="click") == 5
    slots = [name for name in os.listdir(slot_dir(settings.data_dir)) if name.endswith(SLOT_SUFFIX)]
    assert len(slots) == 2, slots


def ready(tracker, watch) -> tuple[int, dict]:
    app = falcon.App()
    app.add_route("/readyz", ReadyzResource(tracker, watch))
    app.add_route("/livez", LivezResource())
    client = TestClient(app)
    assert client.simulate_get("/livez").status_code == 200
    answer = client.simulate_get("/readyz")
    return answer.status_code, answer.json


def test_readyz_is_503_only_while_the_spool_cannot_take_a_click(make_tracker, settings, clock):
    tracker = make_tracker()
    free = [10 * MIN_FREE_BYTES]

    def statvfs(path):
        assert path == settings.spool_dir
        return SimpleNamespace(f_bavail=free[0], f_frsize=1)

    watch = SpoolWatch(settings.spool_dir, settings.data_dir, clock=clock, statvfs=statvfs)
    assert ready(tracker, watch) == (200, {"status": "ready", "campaigns": 0, "problems": []})
    free[0] = MIN_FREE_BYTES - 1
    status, answer = ready(tracker, watch)
    assert (status, answer["status"]) == (503, "not ready")
    assert answer["problems"] == [f"the spool's file system has {MIN_FREE_BYTES - 1} bytes free"]
    free[0] = 10 * MIN_FREE_BYTES
    tracker.refused_at = clock()  # A click just found the journal unwritable.
    clock.advance(1)
    assert ready(tracker, watch)[1]["problems"] == ["a click found the spool unwritable 1 s ago"]
    clock.advance(REFUSAL_WINDOW)
    assert ready(tracker, watch)[0] == 200


def test_the_backlog_counts_what_the_database_has_not_landed_as_the_journal_grows(
    db, settings, make_tracker, clock
):
    create_campaign(db, "B", "b", offer_url="https://offer.example/?c={subid}")
    tracker = make_tracker()
    backlog = SpoolBacklog(settings.spool_dir)

    def track(count: int, start: int) -> None:
        for n in range(start, start + count):
            tracker.track(tracker.campaign("b"), Visit(ip=f"198.51.100.{n}", user_agent=f"UA {n}"))

    def pending() -> int:
        counted = backlog.measure(read_position(db, settings.spool_dir), clock()).clicks
        assert counted == spool_status(db, settings.spool_dir).pending_clicks  # Read whole: the same.
        return counted

    assert pending() == 0
    track(5, 0)
    clock.advance(3)
    assert pending() == 5
    assert backlog.measure(read_position(db, settings.spool_dir), clock()).oldest_s == 3.0
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes, batch_size=2)
    assert pending() == 0
    track(4, 10)
    assert pending() == 4
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    track(2, 20)
    assert pending() == 2


def test_the_backlog_is_counted_again_when_landed_segments_are_removed_between_looks(
    db, settings, make_tracker, clock
):
    create_campaign(db, "S", "s", offer_url="https://offer.example/?c={subid}")
    tracker = make_tracker(segment_bytes=600)  # Two or three lines a segment.
    backlog = SpoolBacklog(settings.spool_dir)
    for n in range(9):
        tracker.track(tracker.campaign("s"), Visit(ip=f"198.51.100.{n}", user_agent=f"UA {n}"))
    assert len(list_segments(settings.spool_dir)) >= 3
    assert backlog.measure(read_position(db, settings.spool_dir), clock()).clicks == 9
    flush_spool(db, settings.spool_dir, 600)
    remove_flushed_segments(db, settings.spool_dir)
    for n in range(9, 12):
        tracker.track(tracker.campaign("s"), Visit(ip=f"198.51.100.{n}", user_agent=f"UA {n}"))
    counted = backlog.measure(read_position(db, settings.spool_dir), clock()).clicks
    assert counted == spool_status(db, settings.spool_dir).pending_clicks == 3


def test_an_admin_worker_started_in_an_outage_serves_metrics_and_drains_once_the_database_is_back(
    settings, db
):
    from app import create_outage_admin_app
    from routes.metrics import OutageAdmin

    settings.spool_dir.mkdir(parents=True, exist_ok=True)  # As the node's web workers made it.
    app = create_outage_admin_app(settings.replace(database_url="postgresql://lanner@127.0.0.1:1/gone"))
    client = TestClient(app)
    metrics = client.simulate_get("/metrics")
    assert metrics.status_code == 200
    families = parse_exposition(metrics.text)
    assert value(families, "lanner_dependency_up", dependency="database") == 0
    assert value(families, "lanner_dependency_up", dependency="spool") == 1
    assert "lanner_postbacks_parked" not in families  # Not known: absent, not 0.
    panel = client.simulate_get("/panel")
    assert panel.status_code == 503 and panel.json["title"] == "Database unavailable"

    drained, now = [], [0.0]
    away = OutageAdmin(
        "postgresql://lanner@127.0.0.1:1/gone", clock=lambda: now[0], drain=lambda: drained.append(1)
    )
    away.process_request(None, None)  # type: ignore[arg-type]
    assert drained == [] and not away.is_back
    back = OutageAdmin(settings.database_location, clock=lambda: now[0], drain=lambda: drained.append(1))
    back.process_request(None, None)  # type: ignore[arg-type]
    back.process_request(None, None)  # type: ignore[arg-type]
    assert drained == [1] and back.is_back


def test_without_an_admin_worker_the_web_workers_answer_metrics(start_app, lanner):
    lanner("campaign", "create", "W", "--alias", "w", "--offer-url", "https://offer.example/?c={subid}")
    app = start_app(LANNER_ADMIN_BIND="off")
    assert click(app, "w")[0] == 302
    status, headers, body = request(app, "/metrics")
    assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = parse_exposition(body.decode())
    assert value(families, "lanner_dependency_up", dependency="database") == 1
    assert value(families, "lanner_spool_pending_clicks") == 1
    with_admin = start_app()  # The admin worker's then, and its socket's only.
    assert request(with_admin, "/metrics")[0] == 404
