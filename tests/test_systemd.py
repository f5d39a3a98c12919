"""The rendered systemd units: `systemd-analyze verify` where it exists, and their commands run for real."""

from __future__ import annotations

import getpass
import grp
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LANNER, ROOT, LiveProcess, start_process, unix_request, wait_until


def read_unit(path) -> dict[str, str]:
    """The [Service] keys of a unit file (last one wins, as systemd does for these keys)."""
    keys, section = {}, None
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            keys[key] = value
    return keys


def read_env_file(path) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )


@pytest.fixture
def units(tmp_path):
    socket_path = str(tmp_path / "web.sock")  # no TCP port that another process could take first
    out = tmp_path / "units"
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    subprocess.run(
        [
            *LANNER,
            "systemd",
            "render",
            "--venv",
            sys.prefix,
        ]
        + ["--user", getpass.getuser(), "--group", grp.getgrgid(os.getgid()).gr_name]
        + ["--data-dir", str(data_dir), "--env-file", str(out / "lanner.env")]
        + ["--bind", f"unix:{socket_path}"]
        + ["-o", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return out, socket_path, data_dir


def unit_environment(unit: dict[str, str]) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], **read_env_file(Path(unit["EnvironmentFile"]))}


def start_unit(unit: dict[str, str], log_path) -> LiveProcess:
    return start_process(shlex.split(unit["ExecStart"]), unit_environment(unit), log_path)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_units_pass_systemd_analyze_verify(units):
    out, _, _ = units
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "lanner-web.service", "lanner-worker.service"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lanner-" not in result.stdout + result.stderr  # No warning about our units.


def test_units_are_hardened_and_stop_the_right_way(units):
    out, _, data_dir = units
    web, worker = read_unit(out / "lanner-web.service"), read_unit(out / "lanner-worker.service")
    for unit in (web, worker):
        assert unit["NoNewPrivileges"] == "yes" and unit["ProtectSystem"] == "strict"
        assert unit["ReadWritePaths"] == str(data_dir) and unit["PrivateTmp"] == "yes"
        assert unit["Restart"] == "always" and unit["EnvironmentFile"] == str(out / "lanner.env")
        assert unit["UMask"] == "0077"  # data files owner-only, as lanner itself sets
    assert web["ExecReload"] == "/bin/kill -HUP $MAINPID" and web["KillSignal"] == "SIGTERM"
    assert worker["KillSignal"] == "SIGINT"  # Huey's graceful stop.


def test_exec_start_lines_serve_flush_reload_and_stop(units, tmp_path):
    out, socket_path, data_dir = units
    web, worker = read_unit(out / "lanner-web.service"), read_unit(out / "lanner-worker.service")
    environment = unit_environment(web)
    lanner_bin = shlex.split(web["ExecStart"])[0]
    subprocess.run(
        [lanner_bin, "db", "migrate"], env=environment, cwd=data_dir, check=True, capture_output=True
    )
    subprocess.run(
        [
            lanner_bin,
            "campaign",
            "create",
            "U",
            "--alias",
            "u",
            "--offer-url",
            "https://o.example/?c={subid}",
        ],
        env=environment,
        cwd=data_dir,
        check=True,
        capture_output=True,
    )
    served = start_unit(web, tmp_path / "web.log")
    flusher = start_unit(worker, tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 90
        status = None
        while status != 302:
            assert time.monotonic() < deadline, served.log
            try:
                status, headers, _ = unix_request(socket_path, "/u", {"User-Agent": "systemd test"})
            except OSError:
                time.sleep(0.1)
        subid = headers["location"].rsplit("=", 1)[1]
        rows: list = []
        while not rows:
            assert time.monotonic() < deadline, flusher.log
            with sqlite3.connect(data_dir / "lanner.db") as connection:
                rows = connection.execute("SELECT subid FROM click WHERE subid = ?", (subid,)).fetchall()
            time.sleep(0.1)
        # ExecReload, with $MAINPID as systemd would substitute it.
        reload_command = shlex.split(web["ExecReload"].replace("$MAINPID", str(served.process.pid)))
        subprocess.run(reload_command, check=True)
        reloaded = "reloaded: generation 2 serving"
        wait_until(lambda: reloaded in served.log, 60, "the reload", lambda: served.log)
        assert unix_request(socket_path, "/healthz")[0] == 200
    finally:
        web_code = served.stop(getattr(signal, web["KillSignal"]), timeout=float(web["TimeoutStopSec"]))
        worker_code = flusher.stop(
            getattr(signal, worker["KillSignal"]), timeout=float(worker["TimeoutStopSec"])
        )
    assert web_code == 0, served.log
    assert worker_code == 0, flusher.log
