"""What a running Lanner leaves behind: a quiet consumer log, and data files only its owner can read."""

from __future__ import annotations

import sqlite3
import time

import pytest
from conftest import click, subid_of


@pytest.fixture
def campaign(lanner):
    lanner("campaign", "create", "Quiet", "--alias", "quiet", "--offer-url", "https://o.example/?click={subid}")
    return "quiet"


def wait_landed(settings, subid: str, log) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with sqlite3.connect(settings.database_path) as connection:
            if connection.execute("SELECT 1 FROM click WHERE subid = ?", (subid,)).fetchall():
                return
        time.sleep(0.1)
    raise AssertionError(f"click {subid} did not land:\n{log()}")


@pytest.mark.parametrize("level, is_logged", [("", False), ("INFO", True)])
def test_the_consumer_logs_no_line_per_flush_unless_asked(
    campaign, server, start_consumer, settings, level, is_logged
):
    extra = {"LANNER_TASK_LOG_LEVEL": level} if level else {}
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.05", **extra)
    subid = subid_of(click(server.port, campaign)[1]["location"])
    wait_landed(settings, subid, lambda: consumer.log)
    time.sleep(0.5)  # about ten more flushes
    assert ("Executing workers.tasks.flush_spool" in consumer.log) is is_logged, consumer.log
