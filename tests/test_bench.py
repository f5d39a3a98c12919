"""The bench harness end to end at toy sizes: real k6, real server and worker, real database."""

from __future__ import annotations

import json
import subprocess

from conftest import LANNER, ROOT


def test_bench_migration_upgrades_a_live_database_and_accounts_for_every_click(tmp_path, env):
    out = tmp_path / "rehearsal.json"
    args = [
        "bench", "migration", "--clicks", "6000", "--recent", "2000", "--rate", "40", "--seconds", "12",
        "--data-dir", str(tmp_path / "rehearsal"), "--json", str(out),
    ]  # fmt: skip
    result = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["is_complete"] and report["migration"] == "0005_visitor_key"
    assert report["settings"]["pre_upgrade_schema"] == "0004_rollups"
    assert report["database"]["clicks"] == 6000
    # The recent part spans exactly the 24 h before it was generated; a few seconds have passed.
    assert 1900 < report["database"]["clicks_last_24h"] <= 2000
    steps = {step["name"]: step for step in report["steps"]}
    assert steps["visitor_key_backfill"]["state"] == "done"
    assert steps["visitor_key_backfill"]["units"] == 6000
    assert steps["visitor_key_index"]["state"] == "done"
    assert steps["click_visitor_drop"]["state"] == "pending"  # Waits out its grace period.
    load = report["load"]
    assert load["accepted"] > 0 and load["logged"] == load["accepted"]
    assert (load["lost"], load["duplicated"], load["errors"]) == (0, 0, 0)
    assert set(report["probes_us"]) == {"new", "returning", "nat"}
    assert "Upgrade to 0005_visitor_key on 6,000 clicks" in result.stdout

    # A second run reuses the pre-upgrade database: the same clicks, upgraded again from a copy.
    again = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Building the pre-upgrade database" not in again.stderr
    assert json.loads(out.read_text())["database"]["clicks"] == 6000
