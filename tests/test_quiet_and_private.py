"""What a running Lanner leaves behind: a quiet consumer log, and data files only its owner can read.

The consumer is a real `lanner worker` process in both; the clicks it lands come from an in-process app
(`app_client`: create_worker_app() here, no socket), except where every file a real `lanner serve` and
`lanner worker` create is checked.
"""

from __future__ import annotations

import sqlite3
import time

import pytest
from conftest import click, subid_of


@pytest.fixture
def campaign(lanner):
    lanner(
        "campaign", "create", "Quiet", "--alias", "quiet", "--offer-url", "https://o.example/?click={subid}"
    )
    return "quiet"


def wait_landed(connection, subid: str, log) -> None:
    """Wait for the click to be in the database `connection` reads (a raw one, of either backend)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if connection.execute("SELECT 1 FROM click WHERE subid = ?", (subid,)).fetchall():
            return
        time.sleep(0.1)
    raise AssertionError(f"click {subid} did not land:\n{log()}")


@pytest.mark.parametrize("level, is_logged", [("", False), ("INFO", True)])
def test_the_consumer_logs_no_line_per_flush_unless_asked(
    campaign, app_client, start_consumer, db, level, is_logged
):
    extra = {"LANNER_TASK_LOG_LEVEL": level} if level else {}
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.05", **extra)
    subid = subid_of(click(app_client, campaign)[1]["location"])
    wait_landed(db.connection(), subid, lambda: consumer.log)
    # Huey's own INFO lines (the tasks it runs at start) only when asked for.
    assert ("huey INFO Executing" in consumer.log) is is_logged, consumer.log
    before = len(consumer.log)
    for n in range(10):  # Ten clicks landing over a dozen flushes of 0.05 s.
        subid = subid_of(click(app_client, campaign, ua=f"quiet {n}")[1]["location"])
        time.sleep(0.06)
    wait_landed(db.connection(), subid, lambda: consumer.log)
    assert "flush" not in consumer.log[before:].lower(), consumer.log[before:]


def test_every_data_file_is_created_owner_only(env, tmp_path):
    """The database, WAL, queue, spool, backups, pid file: 0600 files in 0700 directories."""
    import os
    import stat

    from conftest import LANNER, bound_port, run_lanner, start_process, wait_healthy

    data_dir = tmp_path / "fresh"  # created by lanner itself, not by the fixture
    environ = {**env, "LANNER_DATA_DIR": str(data_dir), "LANNER_FLUSH_INTERVAL": "0.05"}
    run_lanner(environ, "db", "migrate")
    run_lanner(
        environ, "campaign", "create", "P", "--alias", "p", "--offer-url", "https://o.example/?click={subid}"
    )
    server = start_process([*LANNER, "serve", "--bind", "127.0.0.1:0"], environ, tmp_path / "serve.log")
    consumer = start_process([*LANNER, "worker"], environ, tmp_path / "worker.log")
    try:
        server.port = bound_port(server)
        wait_healthy(server)
        subid = subid_of(click(server.port, "p")[1]["location"])
        from settings import load_settings

        with sqlite3.connect(load_settings(environ).database_path) as connection:
            wait_landed(connection, subid, lambda: consumer.log)
        run_lanner(environ, "backup")
        modes = {}
        for directory, _, files in os.walk(data_dir):
            modes[directory] = os.stat(directory).st_mode
            for name in files:
                modes[os.path.join(directory, name)] = os.stat(os.path.join(directory, name)).st_mode
    finally:
        server.stop()
        consumer.stop()
    names = {os.path.relpath(path, data_dir) for path in modes}
    assert {"lanner.db", "huey.db", "spool", "backups"} <= names, names
    assert any(name.startswith("spool/") for name in names) and any(n.endswith("-wal") for n in names), names
    loose = {
        os.path.relpath(path, data_dir): oct(stat.S_IMODE(mode))
        for path, mode in modes.items()
        if stat.S_IMODE(mode) & 0o077 and not stat.S_ISSOCK(mode)
    }
    assert loose == {}
