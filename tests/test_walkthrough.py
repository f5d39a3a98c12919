"""The buyer's walkthrough of docs/walkthrough.md (traffic source, campaign, lander, offer, postback, report
by zone), run as written by bash against a real `lanner serve`: the guide cannot drift from what the tracker
does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long

WALKTHROUGH = Path(__file__).resolve().parent.parent / "docs" / "walkthrough.md"
HEADING = "## A buyer's walkthrough"


def walkthrough() -> str:
    text = WALKTHROUGH.read_text()
    section = text[text.index(HEADING) :]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


@pytest.mark.skipif(not Path("/usr/bin/curl").exists(), reason="the walkthrough uses curl")
def test_the_walkthrough_runs_as_written_and_reports_the_zone(env, start_server, tmp_path):
    server = start_server(workers=2)
    bin_dir = tmp_path / "bin"  # `lanner` on PATH, as the walkthrough asks.
    bin_dir.mkdir()
    (bin_dir / "lanner").write_text(f'#!/bin/sh\nexec {sys.executable} -m cli "$@"\n')
    (bin_dir / "lanner").chmod(0o755)
    environ = {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TRACKER": f"http://127.0.0.1:{server.port}",
    }
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", walkthrough()],
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parent.parent,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "/push-us?zoneid={zoneid}&campaignid={campaignid}&external_id=${SUBID}" in out
    subid = re.search(r"https://lp\.example/quiz/\?s=([0-9a-z]{17})&go=", out).group(1)
    assert f"go=http%3A%2F%2F127.0.0.1%3A{server.port}%2Flp%2Fclick%3Fsubid%3D{subid}" in out
    assert f"https://shop.example/?aff=7&sub1={subid}" in out
    # The sale's Purchase event is queued for Meta (no worker runs here to send it).
    assert re.search(r"lanner-\d+-sale\s+sale\s+pending\s+0", out), out
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "report",
            "--campaign",
            "push-us",
            "-g",
            "zoneid",
            "--preset",
            "today",
            "--json",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    import json

    (row,) = json.loads(report.stdout)["rows"]
    assert row["zoneid"] == "4417"
    assert (row["clicks"], row["lp_views"], row["lp_clicks"], row["sales"]) == (1, 1, 1, 1), row
    assert (row["revenue"], row["cost"], row["profit"]) == (4, 0.5, 3.5), row
    assert row["roi"] == pytest.approx(700.0), row
