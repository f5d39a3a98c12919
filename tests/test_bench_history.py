"""`lanner bench history-reports` at a toy size: the history it writes straight into DuckDB and the row
store it leaves are what the reports it times count, checked against DuckDB and SQLite read directly."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import duckdb
import pytest
from conftest import LANNER, ROOT

from models.clicks.record import subid_ms

# SQLite only: the bench has SQLite hand the window's clicks the ids after the history's (it refuses
# PostgreSQL); the report code it times is tested on both backends in tests/test_history*.py.
pytestmark = [pytest.mark.long, pytest.mark.sqlite_only]


def test_bench_history_reports_counts_what_it_wrote(tmp_path, env, data_dir: Path):
    out = tmp_path / "bench.json"
    args = ["bench", "history-reports", "--clicks", "20000", "--recent-clicks", "2000"]
    args += ["--old-conversions", "5", "--repeat", "1", "--json", str(out)]
    result = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    bench = json.loads(out.read_text())
    reports = {row["name"]: row for row in bench["reports"]}
    position = bench["built"]["position"]

    rows = sqlite3.connect(data_dir / "lanner.db")
    tail = rows.execute("SELECT COUNT(*) FROM click WHERE id > ?", (position,)).fetchone()[0]
    assert tail == bench["built"]["tail"] > 0  # The last minute, not copied yet.
    history = duckdb.connect(str(data_dir / "history" / "clicks.duckdb"), read_only=True)
    held, zones = history.execute(
        "SELECT COUNT(*), COUNT(DISTINCT sub_id_1) FROM click WHERE id <= ?", (position,)
    ).fetchone()
    assert held == position  # Every id once: the old part written, the window appended.
    assert held + tail == 20_000
    tail_zones = {row[0] for row in rows.execute("SELECT sub_id_1 FROM click WHERE id > ?", (position,))}
    copied_zones = {row[0] for row in history.execute("SELECT DISTINCT sub_id_1 FROM click").fetchall()}
    assert reports["all campaigns, all time, by country"]["clicks"] == 20_000
    assert reports["all campaigns, all time, by sub_id_1"]["clicks"] == 20_000
    assert reports["all campaigns, all time, by sub_id_1"]["rows"] == len(copied_zones | tail_zones) >= zones
    assert reports["all campaigns, all time, by campaign"]["rows"] == 20

    # The biggest campaign's zones over the last 30 days, counted from both stores directly.
    one = reports["one campaign, last 30 days, by zone"]
    bounds = (bench["campaign"], one["start_ms"], one["end_ms"])
    where = "campaign_id = ? AND created_at >= ? AND created_at < ?"
    counted = history.execute(f"SELECT COUNT(*) FROM click WHERE {where} AND id <= ?", (*bounds, position))
    from_tail = rows.execute(f"SELECT COUNT(*) FROM click WHERE {where} AND id > ?", (*bounds, position))
    assert one["clicks"] == counted.fetchone()[0] + from_tail.fetchone()[0] > 0
    assert one["sources"] == "history"

    # Written as the appender and new_subid write them: each subid says its click's time.
    sample = history.execute("SELECT subid, created_at FROM click USING SAMPLE 200 ROWS").fetchall()
    assert all(subid_ms(subid) == created_at for subid, created_at in sample)
    # 2% of the row store's clicks and 5 clicks only the history held (put back in the row store) converted.
    converted = rows.execute("SELECT COUNT(DISTINCT click_id) FROM conversion").fetchone()[0]
    old = 20_000 - 2000  # The ids written straight into the history.
    late = rows.execute("SELECT COUNT(DISTINCT click_id) FROM conversion WHERE click_id < ?", (old,))
    assert late.fetchone()[0] == 5
    assert converted == bench["built"]["conversions"] == int(2000 * 0.02) + 5  # The window and its tail.
    assert bench["disk"]["history_bytes_per_click"] > 0

    # A second run reuses what the first built and times the same reports.
    again = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(out.read_text())["built"] == bench["built"]
