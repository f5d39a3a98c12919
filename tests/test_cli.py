"""The `lanner` command line against a real database file, run as a subprocess like a user would."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from conftest import ROOT, run_lanner, wait_until


def test_db_migrate_is_idempotent_and_status_lists_migrations(env):
    names = [
        "0001_initial",
        "0002_routing",
        "0003_conversions",
        "0004_rollups",
        "0005_visitor_key",
        "0006_postback_refusals",
        "0007_currencies",
        "0008_accounts",
        "0009_panel_sessions",
        "0010_user_timezone",
        "0011_country_rollups",
        "0012_spool_nodes",
        "0013_traffic_sources",
        "0014_networks",
        "0015_landers",
        "0016_lp_clicks",
        "0017_cost_entries",
        "0018_domains",
        "0019_campaign_tokens",
        "0020_login_lockout",
        "0021_history",
        "0022_status_changes",
        "0024_platform_connections",
        "0025_labels_rules",
        "0026_bandit_shares",
        "0027_campaign_tags",
        "0028_spend_sync",
        "0029_alerts",
        "0030_column_sets",
        "0031_rule_action_state",
        "0033_lander_bandit",
        "0034_cost_waits",
        "0035_history_conversions",
        "0036_partial_rollups",
    ]
    unknown = run_lanner(env, "db", "migrate", "--to", "0099_nope", check=False)
    assert unknown.returncode == 1 and "No migration is named '0099_nope'" in unknown.stderr
    applied = run_lanner(env, "db", "migrate", "--to", "0004_rollups").stdout
    assert f"Applied 4 migration(s): {', '.join(names[:4])}" in applied
    rest = run_lanner(env, "db", "migrate").stdout
    assert f"Applied {len(names) - 4} migration(s): {', '.join(names[4:])}" in rest
    assert "up to date" in run_lanner(env, "db", "migrate").stdout
    status = json.loads(run_lanner(env, "db", "status", "--json").stdout)
    assert [row["migration"] for row in status if row["applied_at"] != "deferred"] == names
    # An empty database: 0005's work was done at once, only 0004's (instant) step is listed.
    assert [row["migration"] for row in status if row["applied_at"] == "deferred"] == ["rollup_backfill"]
    assert all(row["applied_at"] != "pending" for row in status)


def test_commands_refuse_an_unmigrated_database(env):
    result = run_lanner(env, "campaign", "list", check=False)
    assert result.returncode != 0
    assert "needs migrating: run `lanner db migrate`." in result.stderr


def test_serve_refuses_an_unmigrated_database_in_one_sentence(env):
    # The check runs in a child process (the master never imports the models): its sentence must come through.
    result = run_lanner(env, "serve", "--bind", "127.0.0.1:0", check=False)
    assert result.returncode == 1
    assert "needs migrating: run `lanner db migrate`." in result.stderr
    assert "Traceback" not in result.stderr


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
        (["nginx", "site", "--upstream", "127.0.0.1:0"], "nginx needs the port Lanner listens on"),
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


def test_streams_keep_their_ids_when_edited_and_removed(lanner, db):
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
    assert db.connection().execute("SELECT status FROM stream WHERE id = ?", (stream,)).fetchone() == (
        "deleted",
    )


def test_offer_update_and_list(lanner):
    offer = lanner(
        "offer", "create", "O", "--url", "https://o.example/?c={subid}", "--payout", "2.5"
    ).stdout.strip()
    lanner("offer", "update", offer, "--status", "paused", "--url", "https://o2.example/?c={subid}")
    (row,) = json.loads(lanner("offer", "list", "--json").stdout)
    assert (row["status"], row["url"], row["payout"]) == ("paused", "https://o2.example/?c={subid}", 2.5)


def test_lanner_imports_only_the_named_commands_module_and_help_lists_every_command():
    """`lanner X` as a process of its own imports X's module alone (cli.COMMANDS, loaded when named),
    and `lanner --help` still lists every command, each the one its entry names."""
    import subprocess
    import sys

    import click

    import cli

    script = (
        "import sys, cli\n"
        "try:\n    cli.main(['spool', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(name for name in sys.modules if name.startswith('cli.')))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    loaded = shown.stdout.splitlines()[-1]
    assert "'cli.spool'" in loaded and "'cli.bench'" not in loaded and "'cli.campaigns'" not in loaded, shown
    ctx = click.Context(cli.main, info_name="lanner")
    assert cli.main.list_commands(ctx) == sorted(cli.COMMANDS)
    help_text = cli.main.get_help(ctx)
    for name in cli.COMMANDS:
        assert cli.main.get_command(ctx, name) is cli.load_command(name)
        assert f"\n  {name} " in help_text, name
    assert cli.main.get_command(ctx, "no-such-command") is None


def test_settings_lists_every_variable(lanner):
    from settings import SETTINGS

    rows = json.loads(lanner("settings", "--json").stdout)
    assert [row["env"] for row in rows] == [setting.env for setting in SETTINGS]


def test_generate_clicks_fills_realistic_rows_with_consistent_flags(db, lanner):
    out = lanner("generate", "clicks", "--count", "20000", "--days", "2", "--campaigns", "5", "--seed", "3")
    assert "Added 20000 clicks" in out.stdout
    connection = db.connection()
    total, campaigns, ips, unique_global = connection.execute(
        "SELECT count(*), count(DISTINCT campaign_id), count(DISTINCT ip), sum(is_unique_global) FROM click"
    ).fetchone()
    assert total == 20000 and campaigns == 5
    assert ips < total  # Repeat visitors and NAT addresses.
    shared = connection.execute(
        "SELECT max(uas) FROM (SELECT count(DISTINCT ua_hash) AS uas FROM click GROUP BY ip) AS per_ip"
    ).fetchone()[0]
    assert shared > 20  # Carrier NAT: one address, many browsers.
    assert 0 < unique_global < total
    # Each click's decision path is recorded (a 302 to its stream's offer), never "not recorded".
    from models.routing.path import is_recorded

    routes = [row[0] for row in connection.execute("SELECT route FROM click LIMIT 100").fetchall()]
    assert routes and all(is_recorded(route) and route.endswith(" =h") for route in routes), routes[:3]
    # Recompute the global flag from the rows themselves: the generator's flags must agree.
    rows = connection.execute(
        "SELECT ip, ua_hash, created_at, is_unique_global FROM click ORDER BY created_at"
    ).fetchall()
    last_seen: dict[tuple[str, int], int] = {}
    for ip, visitor_hash, created_at, is_unique in rows:
        previous = last_seen.get((ip, visitor_hash))
        assert is_unique == int(previous is None or created_at - previous > 24 * 3_600_000)
        last_seen[(ip, visitor_hash)] = created_at


def test_generated_uniqueness_flags_are_the_trackers_per_scope_and_window(env, db, lanner):
    """Each flag as the tracker sets it: no click of the visitor in its scope within its window before."""
    lanner("offer", "create", "Gen", "--url", "https://gen.example/?c={subid}")
    lanner("campaign", "create", "Generated 0", "--alias", "gen-0", "--offer-id", "1")
    lanner(
        "campaign", "create", "Generated 1", "--alias", "gen-1", "--offer-id", "1", "--uniqueness-hours", "6"
    )
    for campaign, streams in (("gen-0", 2), ("gen-1", 1)):
        for _ in range(streams):
            lanner("stream", "add", campaign, "--offer", "1")
    run_lanner(
        {**env, "LANNER_UNIQUENESS_HOURS": "12"},
        "generate",
        "clicks",
        "--count",
        "8000",
        "--days",
        "3",
        "--campaigns",
        "2",
        "--seed",
        "8",
    )
    connection = db.connection()
    connection.execute("CREATE INDEX test_visitor ON click (ip, ua_hash, campaign_id, stream_id, created_at)")
    earlier = "SELECT 1 FROM click AS p WHERE p.ip = c.ip AND p.ua_hash = c.ua_hash AND p.id < c.id"
    window = "p.created_at >= c.created_at - k.uniqueness_hours * 3600000"
    flags = connection.execute(
        f"""SELECT c.is_unique_global, c.is_unique_campaign, c.is_unique_stream,
            NOT EXISTS ({earlier} AND p.created_at >= c.created_at - 12 * 3600000),
            NOT EXISTS ({earlier} AND p.campaign_id = c.campaign_id AND {window}),
            NOT EXISTS ({earlier} AND p.campaign_id = c.campaign_id AND p.stream_id = c.stream_id
                        AND {window})
        FROM click AS c JOIN campaign AS k ON k.id = c.campaign_id"""
    ).fetchall()
    assert len(flags) == 8000
    assert [row[:3] for row in flags] == [row[3:] for row in flags]
    assert sum(row[1] != row[2] for row in flags) > 100  # Several streams per campaign: the flags differ.


def test_spool_status_and_flush(lanner, settings):
    from models.clicks.record import encode_line, line_tail, new_subid

    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", "https://o.example/")
    with open(settings.spool_dir / "clicks.00000001.log", "ab") as journal:
        for n in range(3):
            tail = line_tail(new_subid(), 1, 1, 1, 0.0, False, [f"UA {n}", "", "", "", *[""] * 39, ""])
            journal.write(encode_line("192.0.2.1", n, 1_800_000_000_000 + n, (1, 1, 1), tail))
    status = json.loads(lanner("spool", "status", "--json").stdout)[0]
    assert status["pending_clicks"] == 3
    assert "Inserted 3, already present 0, rejected 0." in lanner("spool", "flush").stdout
    assert json.loads(lanner("spool", "status", "--json").stdout)[0]["pending_clicks"] == 0


def test_lanner_run_serves_the_demo_campaign_and_lands_its_clicks(env, tmp_path, settings):
    """What `make run` starts: migrate, demo campaign, first admin, web workers and the Huey consumer."""
    import re
    import signal
    import subprocess
    import time
    from urllib.parse import urlsplit

    from conftest import LANNER, ROOT, request, unix_request

    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*LANNER, "run"],
            env={**env, "LANNER_BIND": "127.0.0.1:0"},  # the report API on its default unix socket
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
    try:
        # It builds the country database first: 14 s on a quiet box, 40 s and more on a busy one.
        deadline = time.monotonic() + 180
        url = port = None
        while time.monotonic() < deadline and not (url and port):
            found = re.search(r"Demo campaign URL: (\S+)", log_path.read_text())
            url = found.group(1) if found else None
            bound = re.search(r"web: listening on 127\.0\.0\.1:(\d+) ", log_path.read_text())
            port = int(bound.group(1)) if bound else None
            time.sleep(0.1)
        assert url and port, log_path.read_text()
        assert f"admin: listening on unix:{settings.data_dir / 'admin.sock'}" in log_path.read_text()
        # The first admin, created because there was no user, its password printed once.
        first = re.search(r"First admin: admin, password: (\S+) \(shown once", log_path.read_text())
        assert first, log_path.read_text()
        assert log_path.read_text().count(first.group(1)) == 1
        # Next to it, where the web panel is (it answers there: below, once the workers are counted).
        assert (
            f"Web panel: /panel/ on the admin socket {settings.data_dir / 'admin.sock'}"
            in log_path.read_text()
        )
        users = json.loads(run_lanner(env, "user", "list", "--json").stdout)
        assert [(u["name"], u["role"]) for u in users] == [("admin", "admin")]
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
        assert sorted(w["role"] for w in shown["web"]["workers"]) == ["consumer", "web", "web"]
        assert unix_request(str(settings.data_dir / "admin.sock"), "/panel/login")[0] == 200
        assert shown["consumer"]["state"] == "ok" and shown["consumer"]["alive"], shown["consumer"]
        # The report API's worker starts at its first request.
        assert unix_request(str(settings.data_dir / "admin.sock"), "/healthz")[0] == 200
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 4  # The consumer, two web workers and the report API's worker.
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=40)
    assert process.returncode == 0, log_path.read_text()
    # Reaped, by the master or (once reparented) by init: a process left behind would stay.
    wait_until(lambda: not [pid for pid in children if os.path.exists(f"/proc/{pid}")], 30, "no process left")
    from models.accounts.passwords import verify_password
    from models.accounts.users import get_user
    from models.store.database import db as database
    from models.store.database import open_database

    open_database(settings.database_location)
    try:
        assert verify_password(get_user(database, "admin"), first.group(1))
    finally:
        database.close()


def test_serve_explains_an_address_in_use(lanner, env):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        admin = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_lanner(
            {**env, "LANNER_ADMIN_BIND": admin}, "serve", "--bind", "127.0.0.1:0", check=False
        )
    finally:
        taken.close()
    assert result.returncode == 1
    assert f"cannot listen on {admin}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_admin_worker_listens_on_a_unix_socket_in_the_data_dir_by_default(
    lanner, env, settings, tmp_path
):
    import json as json_module

    from conftest import LANNER, start_process, unix_request, wait_healthy

    assert settings.replace(bind="127.0.0.1:8080").admin_address == f"unix:{settings.data_dir}/admin.sock"
    assert settings.replace(bind="unix:/run/l/web.sock").admin_address == "unix:/run/l/web-admin.sock"
    live = start_process([*LANNER, "serve", "--bind", "127.0.0.1:0"], env, tmp_path / "serve.log")
    try:
        from conftest import bound_port

        live.port = bound_port(live)
        wait_healthy(live)
        socket_path = str(settings.data_dir / "admin.sock")
        status, _, body = unix_request(socket_path, "/healthz")
        assert status == 200 and json_module.loads(body)["role"] == "admin"
        assert f"Lanner listening on 127.0.0.1:{live.port}" in live.log
    finally:
        assert live.stop() == 0, live.log
    assert not os.path.exists(socket_path)


def test_an_admin_socket_path_too_long_for_a_unix_socket_is_one_sentence(env, tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    result = run_lanner({**env, "LANNER_DATA_DIR": str(deep)}, "serve", "--bind", "127.0.0.1:0", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        "at most 107 bytes" in result.stderr and "set LANNER_ADMIN_BIND to another address" in result.stderr
    )


def test_the_database_can_live_outside_the_data_dir(env, tmp_path, settings):
    import sqlite3

    from conftest import LANNER, bound_port, click, start_process, wait_healthy

    elsewhere = tmp_path / "fast-disk" / "tracker.db"
    moved = {**env, "LANNER_DATABASE_URL": f"sqlite:///{elsewhere}"}
    run_lanner(moved, "db", "migrate")
    run_lanner(
        moved, "campaign", "create", "Away", "--alias", "away", "--offer-url", "https://o.example/?c={subid}"
    )
    live = start_process([*LANNER, "serve", "--bind", "127.0.0.1:0"], moved, tmp_path / "serve.log")
    try:
        live.port = bound_port(live)
        wait_healthy(live)
        assert click(live.port, "away")[0] == 302
    finally:
        assert live.stop() == 0, live.log
    assert "Inserted 1," in run_lanner(moved, "spool", "flush").stdout
    with sqlite3.connect(elsewhere) as connection:
        assert connection.execute("SELECT COUNT(*) FROM click").fetchone() == (1,)
    assert not settings.database_path.exists()  # Nothing in DATA_DIR/lanner.db.
    assert settings.spool_dir.exists()  # The spool stays in the data dir.


def test_a_database_url_lanner_cannot_open_is_refused_in_one_sentence(env):
    result = run_lanner({**env, "LANNER_DATABASE_URL": "mysql://tracker@db/lanner"}, "status", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "LANNER_DATABASE_URL='mysql://tracker@db/lanner' is invalid" in result.stderr


def test_a_postgresql_server_that_does_not_answer_is_one_sentence_without_the_password(env, tmp_path):
    url = f"postgresql://tracker:hunter2@/lanner?host={tmp_path}"  # No server listens there.
    result = run_lanner({**env, "LANNER_DATABASE_URL": url}, "db", "migrate", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Cannot connect to PostgreSQL" in result.stderr and "LANNER_DATABASE_URL" in result.stderr
    assert "hunter2" not in result.stderr
