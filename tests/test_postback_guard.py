"""Anonymous postbacks cannot write without bound or read a 500; the key is masked wherever it is kept.

Hostile bodies and parameters go to an in-process app (`app_client`: create_worker_app() here over the test's
real database, no socket; its log is pytest's `caplog`). A real `lanner serve` (`server`: two bjoern workers)
takes 2,000 refused postbacks from 8 concurrent clients (one warning a minute per worker) and bodies over
64 KB that the handler refuses unread.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import click, request

from models.conversions.postbacks import ConversionRecorder, Received
from models.conversions.refusals import RefusalCounter, utc_day
from models.store.database import dialect_of
from models.tables.conversion import PostbackLog, PostbackRefusal

DAY_MS = 86_400_000
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def key(lanner):
    lanner("offer", "create", "Offer", "--url", "https://o.example/?s={subid}", "--payout", "4")
    lanner("campaign", "create", "Demo", "--alias", "demo", "--offer-id", "1")
    return lanner("postback", "key", "show").stdout.splitlines()[0].removeprefix("key: ")


def landed_click(to, lanner, ip: str = "203.0.113.7") -> str:
    """A click through a server's port or an in-process app, flushed into the database; its subid."""
    status, headers, _ = click(to, "demo", ip=ip)
    assert status == 302
    lanner("spool", "flush")
    return parse_qs(urlsplit(headers["location"]).query)["s"][0]


def log_rows(db) -> int:
    return db.execute_sql("SELECT COUNT(*) FROM postback_log").fetchone()[0]


def database_bytes(db) -> int:
    """The database's size as SQLite sees it (WAL included), whatever has been checkpointed; on
    PostgreSQL, the bytes of its tables' live rows.

    Not PostgreSQL's file sizes: each UPDATE of a counter row leaves the old version behind until no
    snapshot needs it (vacuum reclaims it), and on a busy box a snapshot held elsewhere in the
    server kept 2,000 of them, 368 KB, for the length of the test. What a flood could grow without
    bound is what stays: the live rows."""
    if dialect_of(db) == "postgres":
        tables = [
            name
            for (name,) in db.execute_sql(
                "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchall()
        ]
        return sum(
            db.execute_sql(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {name} t").fetchone()[0]
            for name in tables
        )
    return (
        db.execute_sql("PRAGMA page_count").fetchone()[0] * db.execute_sql("PRAGMA page_size").fetchone()[0]
    )


def assert_no_traceback(log: str) -> None:
    """Nothing in a server's log, or in what an in-process app logged (caplog.text), went unhandled."""
    assert "Traceback" not in log and " 500 " not in log, log[-3000:]


def test_2000_wrong_key_postbacks_write_no_log_row_and_a_bounded_counter(key, server, lanner, db):
    subid = landed_click(server.port, lanner)
    wrong = "f" * 32
    body = f"subid={subid}&note={'x' * 16_000}".encode()
    sends = [
        (f"/{wrong}/postback?subid={subid}", FORM, body),  # Key in the path,
        (f"/postback?key={wrong}&subid={subid}", FORM, body),  # in the query,
        ("/postback", FORM, f"key={wrong}&".encode() + body),  # in the form body,
        ("/postback", JSON, json.dumps({"key": wrong, "subid": subid, "note": "x" * 16_000}).encode()),
    ]
    before_rows, before_bytes = log_rows(db), database_bytes(db)

    def send(n: int) -> int:
        path, headers, data = sends[n % 4]
        return request(server.port, path, {**headers, "X-Real-IP": f"198.51.100.{n % 3}"}, "POST", data)[0]

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(send, range(2000)))
    assert statuses == [403] * 2000
    assert log_rows(db) == before_rows
    grown = database_bytes(db) - before_bytes
    assert grown <= 64 * 1024, grown  # Before: 2,000 rows of 16 KB, 32 MB.
    counters = json.loads(lanner("postback", "refusals", "--json").stdout)
    assert sorted((row["remote_ip"], row["refusals"]) for row in counters) == [
        ("198.51.100.0", 667),
        ("198.51.100.1", 667),
        ("198.51.100.2", 666),
    ]
    for row in counters:
        assert row["sample"].startswith("forbidden: POST /") and wrong not in row["sample"]
        assert len(row["sample"]) <= 300
    table = lanner("postback", "refusals").stdout
    assert "198.51.100.0" in table and "667" in table
    # One warning a minute, not one per refusal.
    assert server.log.count("postbacks refused without the right key") <= 2 * 2  # Two workers.


def test_deeply_nested_json_gets_a_4xx_with_the_right_key_or_the_wrong_one(key, app_client, lanner, caplog):
    subid = landed_click(app_client, lanner)
    arrays = b"[" * 60_000 + b"]" * 60_000  # 120 KB: over the body cap.
    short = b"[" * 60_000  # 60 KB: under it, refused for its depth.
    objects = b'{"a":' * 60_000
    for path in (f"/{key}/postback?subid={subid}", f"/postback?key={key}&subid={subid}"):
        assert request(app_client, path, JSON, "POST", arrays)[0] == 413
        status, _, answer = request(app_client, path, JSON, "POST", short)
        assert status == 400 and b"nested deeper" in answer
        assert request(app_client, path, JSON, "POST", objects)[0] == 413
    for body in (arrays, short, objects):
        assert request(app_client, f"/{'0' * 32}/postback", JSON, "POST", body)[0] == 403
        assert request(app_client, "/postback", JSON, "POST", body)[0] in (400, 413)  # Key to be inside.
    nested_ok = json.dumps({"subid": subid, "extra": {"a": [1, {"b": 2}]}}).encode()
    assert request(app_client, f"/{key}/postback", JSON, "POST", nested_ok)[0] == 200
    assert request(app_client, "/healthz")[0] == 200
    assert_no_traceback(caplog.text)


def test_lone_surrogates_bad_utf8_and_absurd_payouts_get_a_400(key, app_client, lanner, caplog):
    subid = landed_click(app_client, lanner)
    base = f"/{key}/postback?subid={subid}"
    for path in (
        f"{base}&tid=%ED%A0%80",
        f"{base}&%ED%A0%80=1",
        f"{base}&tid=%FF",
        *(f"{base}&payout={p}" for p in ("1e308", "-1e308", "nan", "inf", "-0.01", "1e400")),
    ):
        status, _, answer = request(app_client, path)
        assert status == 400, (path, answer)
        assert json.loads(answer)["verdict"] == "invalid"
    for body in (
        b'{"subid": "%s", "tid": "\\ud800"}' % subid.encode(),
        b'{"subid": "%s", "\\udfff": "1"}' % subid.encode(),
        b'{"subid": "%s", "payout": 1e308}' % subid.encode(),
        b'{"subid": "%s", "payout": NaN}' % subid.encode(),
        b'{"subid": "%s", "payout": -1e308}' % subid.encode(),
        b'{"subid": "%s", "tid": "\xff"}' % subid.encode(),
    ):
        status, _, answer = request(app_client, f"/{key}/postback", JSON, "POST", body)
        assert status == 400, (body, answer)
    for body in (f"subid={subid}&tid=%ED%A0%80".encode(), f"subid={subid}&tid=\xff".encode("latin-1")):
        assert request(app_client, f"/{key}/postback", FORM, "POST", body)[0] == 400
    # A slot name int() refuses is not a slot: the postback is recorded without it.
    assert request(app_client, f"{base}&sub_id_%C2%B2=x")[0] == 200
    assert request(app_client, "/healthz")[0] == 200
    assert_no_traceback(caplog.text)


def test_a_body_over_64_kb_gets_a_413(key, app_client, server, lanner):
    subid = landed_click(app_client, lanner)
    big = f"subid={subid}&note={'x' * 70_000}".encode()
    # The postback's own limit, in process: the key is checked first.
    status, _, answer = request(app_client, f"/{key}/postback", FORM, "POST", big)
    assert status == 413 and b"64 KB" in answer
    assert request(app_client, f"/{'0' * 32}/postback", FORM, "POST", big)[0] == 403
    assert request(app_client, "/postback", FORM, "POST", b"key=" + key.encode() + b"&" + big)[0] == 413
    # A worker refuses it before reading it (its largest body is the postback's), whatever the key.
    for path, body in (
        (f"/{key}/postback", big),
        (f"/{'0' * 32}/postback", big),
        ("/postback", b"key=" + key.encode() + b"&" + big),
    ):
        status, _, answer = request(server.port, path, FORM, "POST", body)
        assert status == 413 and b"larger than 65536 bytes" in answer, path


def test_a_key_sent_in_a_post_body_is_stored_masked(key, app_client, lanner):
    subids = [landed_click(app_client, lanner, ip=f"192.0.2.{n}") for n in range(4)]
    bodies = [
        (FORM, f"key={key}&subid={subids[0]}&tid=a".encode()),
        (FORM, f"%6Bey={key}&subid={subids[1]}&tid=b".encode()),
        (JSON, json.dumps({"key": key, "subid": subids[2], "tid": "c"}).encode()),
        (JSON, b'{"\\u006bey": "%s", "subid": "%s", "tid": "d"}' % (key.encode(), subids[3].encode())),
    ]
    for headers, body in bodies:
        status, _, answer = request(app_client, "/postback", headers, "POST", body)
        assert status == 200 and json.loads(answer)["verdict"] == "created", answer
    rows = json.loads(lanner("postback", "list", "--json").stdout)
    assert len(rows) == 4
    assert all(key not in row["request"] for row in rows), [row["request"] for row in rows]
    assert all("…" in row["request"] for row in rows)
    assert key not in lanner("postback", "list").stdout


def test_a_500_on_the_keyed_path_logs_no_key(settings, db, make_tracker, caplog):
    from falcon.testing import TestClient

    from app import create_app
    from models.clicks.record import new_subid
    from models.conversions.postbacks import read_secret

    class BrokenRecorder(ConversionRecorder):
        def record(self, postback, received):
            raise RuntimeError("the disk is on fire")

    key = read_secret(db, "postback_key")
    app = create_app(
        settings,
        tracker=make_tracker(),
        enqueue_delivery=lambda delivery_id: None,
        recorder=BrokenRecorder(db, park_ms=1000),
    )
    with caplog.at_level(logging.INFO):
        result = TestClient(app).simulate_get(f"/{key}/postback", query_string=f"subid={new_subid()}")
    assert result.status_code == 500
    assert "the disk is on fire" in caplog.text and "/…/postback" in caplog.text
    assert key not in caplog.text
    assert key not in result.text


def test_refusal_counters_keep_a_bounded_number_of_rows_and_samples(db, clock):
    counter = RefusalCounter(db, clock=clock, max_addresses=3, samples_per_hour=2)
    for n in range(10):
        counter.count(f"203.0.113.{n}", f"forbidden: GET /postback?n={n}")
    rows = {row.remote_ip: row for row in PostbackRefusal.select()}
    assert sorted(rows) == ["203.0.113.0", "203.0.113.1", "203.0.113.2", "other"]
    assert rows["other"].refusals == 7 and rows["other"].sample.endswith("n=4")  # The 2nd of its 2.
    for n in range(5):
        counter.count("203.0.113.0", f"again {n}")
    assert PostbackRefusal.get(remote_ip="203.0.113.0").sample == "again 0"  # 2 samples an hour.
    clock.advance(3600)
    counter.count("203.0.113.0", "the next hour " + "x" * 1000)
    row = PostbackRefusal.get(remote_ip="203.0.113.0")
    assert (row.refusals, row.samples, len(row.sample)) == (7, 1, 300)
    clock.advance(86_400)  # A new day: a new row per address, the cap again.
    counter.count("203.0.113.9", "tomorrow")
    assert PostbackRefusal.select().where(PostbackRefusal.remote_ip == "203.0.113.9").count() == 1


def test_concurrent_refusals_from_new_addresses_keep_exactly_the_bound(db, clock):
    """Each thread refuses from an address of its own on a connection of its own, all released at once:
    on PostgreSQL (READ COMMITTED) each transaction used to see the day below its bound and add its row."""
    max_addresses, threads, days = 4, 24, 4
    counter = RefusalCounter(db, clock=clock, max_addresses=max_addresses)
    for day in range(days):
        barrier = threading.Barrier(threads)
        failures: list[BaseException] = []

        def refuse(n: int, barrier: threading.Barrier, day: int, failures: list[BaseException]) -> None:
            try:
                barrier.wait()
                counter.count(f"198.51.{day}.{n}", "forbidden")
            except BaseException as error:  # Reported below: a thread's exception is otherwise only logged.
                failures.append(error)
            finally:
                db.close()  # This thread's connection (peewee keeps one per thread).

        workers = [threading.Thread(target=refuse, args=(n, barrier, day, failures)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == []
        today = PostbackRefusal.select().where(PostbackRefusal.day == utc_day(int(clock() * 1000)))
        rows = {row.remote_ip: row.refusals for row in today}
        assert len(rows) == max_addresses + 1 and rows["other"] == threads - max_addresses, rows
        clock.advance(86_400)


def test_the_postback_log_and_the_counters_are_pruned_parked_postbacks_stay(db, clock, settings):
    from models.clicks.record import new_subid
    from models.conversions.postbacks import parse_postback
    from models.ops.retention import prune_postback_log
    from workers.runtime.tasks import create_huey

    received = Received("GET", "198.51.100.9", "GET /…/postback?test")
    clock.now = 1_700_000_000.0  # 2023: the hourly task below prunes by the real clock.
    recorder = ConversionRecorder(db, park_ms=90 * DAY_MS, clock=clock)
    counter = RefusalCounter(db, clock=clock)
    old_parked = recorder.record(parse_postback({"subid": new_subid()}), received)
    recorder.log_rejected(received, "invalid", "old", "")
    counter.count("198.51.100.9", "old")
    clock.advance(31 * 86_400)
    recorder.log_rejected(received, "invalid", "new", "")
    counter.count("198.51.100.9", "new")
    assert old_parked.verdict == "parked"
    pruned = prune_postback_log(db, 30, now_ms=int(clock() * 1000))
    assert (pruned.log_rows, pruned.refusal_rows) == (1, 1)
    assert sorted(row.verdict + row.detail[:3] for row in PostbackLog.select()) == ["invalidnew", "parkedNo "]
    assert [row.sample for row in PostbackRefusal.select()] == ["new"]
    assert prune_postback_log(db, 0, now_ms=int(clock() * 1e3) + 999 * DAY_MS).log_rows == 0  # 0: forever.
    # The worker's hourly task, run as its consumer would (immediate mode), with the real clock.
    huey = create_huey(settings.replace(postback_log_days=1), immediate=True)
    huey.prune_postback_log()
    assert [row.verdict for row in PostbackLog.select()] == ["parked"]


def test_lanner_prune_prunes_the_postback_log(lanner, env, db):
    recorder = ConversionRecorder(db, park_ms=1000, clock=lambda: 1_000_000.0)
    recorder.log_rejected(Received("GET", "198.51.100.9", "GET /postback"), "invalid", "ancient", "")
    out = lanner("prune").stdout
    assert "Deleted 1 postback log rows and 0 refusal counters older than 30 days." in out
    assert log_rows(db) == 0


def test_0006_masks_the_key_stored_in_the_postback_log(settings):
    from models.migrations.runner import migrate
    from models.store.database import db as database
    from models.store.database import open_database

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0005_visitor_key")
        key = database.execute_sql("SELECT value FROM meta WHERE key = 'postback_key'").fetchone()[0]
        for request_text in (
            f"POST /postback key={key}&subid=x",
            f'POST /postback {{"key": "{key}"}}',
            "GET /",
        ):
            database.execute_sql(
                "INSERT INTO postback_log (received_at, method, remote_ip, request, verdict) "
                "VALUES (1, 'POST', '192.0.2.1', ?, 'created')",
                (request_text,),
            )
        assert importlib.import_module("models.migrations.0006_postback_refusals")
        migrate(database)
        stored = [row[0] for row in database.execute_sql("SELECT request FROM postback_log ORDER BY id")]
        assert stored == ["POST /postback key=…&subid=x", 'POST /postback {"key": "…"}', "GET /"]
    finally:
        database.close()
