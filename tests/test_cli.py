"""The `lanner` command line against a real database file, run as a subprocess like a user would."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from conftest import run_lanner


def test_db_migrate_is_idempotent_and_status_lists_migrations(env):
    names = ["0001_initial", "0002_routing", "0003_conversions", "0004_rollups", "0005_visitor_key"]
    unknown = run_lanner(env, "db", "migrate", "--to", "0099_nope", check=False)
    assert unknown.returncode == 1 and "No migration is named '0099_nope'" in unknown.stderr
    applied = run_lanner(env, "db", "migrate", "--to", "0004_rollups").stdout
    assert f"Applied 4 migration(s): {', '.join(names[:4])}" in applied
    assert "Applied 1 migration(s): 0005_visitor_key" in run_lanner(env, "db", "migrate").stdout
    assert "up to date" in run_lanner(env, "db", "migrate").stdout
    status = json.loads(run_lanner(env, "db", "status", "--json").stdout)
    assert [row["migration"] for row in status if row["applied_at"] != "deferred"] == names
    # An empty database: 0005's work was done at once, only 0004's (instant) step is listed.
    assert [row["migration"] for row in status if row["applied_at"] == "deferred"] == ["rollup_backfill"]
    assert all(row["applied_at"] != "pending" for row in status)


def test_commands_refuse_an_unmigrated_database(env):
    result = run_lanner(env, "campaign", "list", check=False)
    assert result.returncode != 0
    assert "not migrated: run `lanner db migrate`" in result.stderr


def test_campaign_create_prints_its_path_and_lists_as_json_and_csv(lanner):
    created = lanner(
        "campaign", "create", "Summer", "--alias", "summer", "--offer-url", "https://o.example/?c={subid}"
    )
    assert created.stdout.strip() == "/summer"
    (row,) = json.loads(lanner("campaign", "list", "--json").stdout)
    assert (row["alias"], row["name"], row["status"], row["url"]) == ("summer", "Summer", "active", "/summer")
    csv_lines = lanner("campaign", "list", "--csv").stdout.splitlines()
    assert csv_lines[0].startswith("id,alias,name") and ",summer," in csv_lines[1]
    shown = json.loads(lanner("campaign", "show", "summer", "--json").stdout)
    assert len(shown["streams"]) == 1 and shown["streams"][0]["offers"] == "1:100"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["campaign", "create", "X", "--alias", "bad alias!", "--offer-url", "https://o.example/"],
            "Alias 'bad alias!'",
        ),
        (
            ["campaign", "create", "X", "--alias", "healthz", "--offer-url", "https://o.example/"],
            "Alias 'healthz'",
        ),
        (
            ["campaign", "create", "X", "--alias", "x", "--offer-url", "https://o.example/{nope}"],
            "Unknown macro {nope}",
        ),
        (
            ["campaign", "create", "X", "--alias", "x", "--offer-url", "https://{sub_id_1}.evil/"],
            "not allowed in the",
        ),
        (["campaign", "create", "X", "--alias", "x"], "exactly one of an offer URL or an existing offer id"),
        (["campaign", "show", "missing"], "There is no campaign 'missing'."),
        (["offer", "update", "99", "--name", "x"], "There is no offer 99."),
        (["stream", "update", "99", "--weight", "5"], "There is no stream 99."),
    ],
)
def test_bad_commands_fail_with_one_clear_sentence(lanner, args, message):
    result = lanner(*args, check=False)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_duplicate_alias_is_refused(lanner):
    lanner("campaign", "create", "A", "--alias", "dup", "--offer-url", "https://o.example/")
    result = lanner(
        "campaign", "create", "B", "--alias", "dup", "--offer-url", "https://o.example/", check=False
    )
    assert result.returncode != 0 and "A campaign with alias 'dup' already exists." in result.stderr


def test_streams_keep_their_ids_when_edited_and_removed(lanner, settings):
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", "https://o.example/a?c={subid}")
    offer = lanner("offer", "create", "B", "--url", "https://o.example/b?c={subid}").stdout.strip()
    stream = lanner("stream", "add", "s", "--offer", "1:70", "--offer", f"{offer}:30").stdout.strip()
    lanner("stream", "update", stream, "--weight", "40", "--type", "intercepting")
    lanner("stream", "update", "1", "--offer", f"{offer}:100")
    rows = json.loads(lanner("stream", "list", "s", "--json").stdout)
    by_id = {str(row["id"]): row for row in rows}
    assert set(by_id) == {"1", stream}
    assert (by_id[stream]["weight"], by_id[stream]["type"], by_id[stream]["offers"]) == (
        40,
        "intercepting",
        f"1:70 {offer}:30",
    )
    assert by_id["1"]["offers"] == f"{offer}:100"
    lanner("stream", "remove", stream)
    assert [row["id"] for row in json.loads(lanner("stream", "list", "s", "--json").stdout)] == [1]
    with sqlite3.connect(settings.database_path) as connection:
        assert connection.execute("SELECT status FROM stream WHERE id = ?", (stream,)).fetchone() == (
            "deleted",
        )


def test_offer_update_and_list(lanner):
    offer = lanner(
        "offer", "create", "O", "--url", "https://o.example/?c={subid}", "--payout", "2.5"
    ).stdout.strip()
    lanner("offer", "update", offer, "--status", "paused", "--url", "https://o2.example/?c={subid}")
    (row,) = json.loads(lanner("offer", "list", "--json").stdout)
    assert (row["status"], row["url"], row["payout"]) == ("paused", "https://o2.example/?c={subid}", 2.5)


def test_settings_lists_every_variable(lanner):
    from settings import SETTINGS

    rows = json.loads(lanner("settings", "--json").stdout)
    assert [row["env"] for row in rows] == [setting.env for setting in SETTINGS]


def test_generate_clicks_fills_realistic_rows_with_consistent_flags(lanner, settings):
    out = lanner("generate", "clicks", "--count", "20000", "--days", "2", "--campaigns", "5", "--seed", "3")
    assert "Added 20000 clicks" in out.stdout
    with sqlite3.connect(settings.database_path) as connection:
        total, campaigns, ips, unique_global = connection.execute(
            "SELECT count(*), count(DISTINCT campaign_id), count(DISTINCT ip), sum(is_unique_global) "
            "FROM click"
        ).fetchone()
        assert total == 20000 and campaigns == 5
        assert ips < total  # Repeat visitors and NAT addresses.
        shared = connection.execute(
            "SELECT max(uas) FROM (SELECT count(DISTINCT ua_hash) AS uas FROM click GROUP BY ip)"
        ).fetchone()[0]
        assert shared > 20  # Carrier NAT: one address, many browsers.
        assert 0 < unique_global < total
        # Recompute the global flag from the rows themselves: the generator's flags must agree.
        rows = connection.execute(
            "SELECT ip, ua_hash, created_at, is_unique_global FROM click ORDER BY created_at"
        ).fetchall()
    last_seen: dict[tuple[str, int], int] = {}
    for ip, visitor_hash, created_at, is_unique in rows:
        previous = last_seen.get((ip, visitor_hash))
        assert is_unique == int(previous is None or created_at - previous >= 24 * 3_600_000)
        last_seen[(ip, visitor_hash)] = created_at


def test_spool_status_and_flush(lanner, settings):
    from models.record import encode_line, line_tail

    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", "https://o.example/")
    with open(settings.spool_dir / "clicks.00000001.log", "ab") as journal:
        for n in range(3):
            tail = line_tail(f"subid{n:012d}", 1, 1, 1, 0.0, False, [f"UA {n}", "", "", "", *[""] * 30, ""])
            journal.write(encode_line("192.0.2.1", n, 1_800_000_000_000 + n, (1, 1, 1), tail))
    status = json.loads(lanner("spool", "status", "--json").stdout)[0]
    assert status["pending_clicks"] == 3
    assert "Inserted 3, already present 0, rejected 0." in lanner("spool", "flush").stdout
    assert json.loads(lanner("spool", "status", "--json").stdout)[0]["pending_clicks"] == 0


def test_lanner_run_serves_the_demo_campaign_and_lands_its_clicks(env, tmp_path, settings):
    """What `make run` starts: migrate, demo campaign, web workers and the Huey consumer together."""
    import re
    import signal
    import subprocess
    import time
    from urllib.parse import urlsplit

    from conftest import LANNER, ROOT, free_port, request

    port = free_port()
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*LANNER, "run"],
            env={**env, "LANNER_BIND": f"127.0.0.1:{port}", "LANNER_ADMIN_BIND": f"127.0.0.1:{free_port()}"},
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 30
        url = None
        while time.monotonic() < deadline and url is None:
            found = re.search(r"Demo campaign URL: (\S+)", log_path.read_text())
            url = found.group(1) if found else None
            time.sleep(0.1)
        assert url, log_path.read_text()
        target = urlsplit(url)
        status = None
        while time.monotonic() < deadline and status != 302:
            try:
                status, headers, _ = request(port, f"{target.path}?{target.query}")
            except OSError:
                time.sleep(0.1)
        assert status == 302 and "subid=" in headers["location"], log_path.read_text()
        subid = headers["location"].split("subid=")[1].split("&")[0]
        landed = []
        while time.monotonic() < deadline and not landed:
            with sqlite3.connect(settings.database_path) as connection:
                landed = connection.execute("SELECT subid FROM click WHERE subid = ?", (subid,)).fetchall()
            time.sleep(0.2)
        assert landed == [(subid,)], log_path.read_text()
        shown = json.loads(run_lanner(env, "status", "--json").stdout)  # The consumer is not a web worker.
        assert sorted(w["role"] for w in shown["web"]["workers"]) == ["admin", "consumer", "web", "web"]
        assert shown["consumer"]["state"] == "ok" and shown["consumer"]["alive"], shown["consumer"]
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 4  # The consumer, two web workers and the report API's worker.
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=40)
    assert process.returncode == 0, log_path.read_text()
    time.sleep(0.5)
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")], "processes left behind"


def test_serve_explains_an_address_in_use(lanner, env):
    import socket

    from conftest import free_port

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        admin = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_lanner(
            {**env, "LANNER_ADMIN_BIND": admin}, "serve", "--bind", f"127.0.0.1:{free_port()}", check=False
        )
    finally:
        taken.close()
    assert result.returncode == 1
    assert f"cannot listen on {admin}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr
