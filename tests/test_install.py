"""scripts/install.sh into a temporary root: the installed units' ExecStart lines run, a click goes
through the installed nginx site and lands; running it again upgrades in place and keeps the data."""

from __future__ import annotations

import getpass
import os
import shlex
import sqlite3
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest
from conftest import ROOT, LiveProcess, request, start_process

from workers.bench.harness import free_port

NGINX = "/usr/sbin/nginx"
pytestmark = pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is installed by `make test`")


def install(root: Path, port: int) -> subprocess.CompletedProcess:
    args = ["bash", str(ROOT / "scripts" / "install.sh"), "--root", str(root), "--user", getpass.getuser()]
    args += ["--no-packages", "--no-systemd", "--listen", f"127.0.0.1:{port}"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LANNER_", "VIRTUAL_ENV"))}
    result = subprocess.run(args, capture_output=True, text=True, timeout=600, env=environ)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def unit(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        key, separator, value = line.partition("=")
        if separator and not line.startswith("#"):
            fields.setdefault(key.strip(), value.strip())
    return fields


def start_unit(path: Path, log: Path) -> LiveProcess:
    """Run a unit's ExecStart with its EnvironmentFile and WorkingDirectory, as systemd would."""
    fields = unit(path)
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
    for line in Path(fields["EnvironmentFile"]).read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            environ[key] = value
    log_file = open(log, "wb")
    process = subprocess.Popen(
        shlex.split(fields["ExecStart"]), env=environ, cwd=fields["WorkingDirectory"], stdout=log_file,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    log_file.close()
    return LiveProcess(process, log)


def installed_lanner(root: Path, *args: str) -> str:
    environ = dict(line.split("=", 1) for line in (root / "etc/lanner/lanner.env").read_text().splitlines()
                   if line and not line.startswith("#"))  # fmt: skip
    environ["PATH"] = os.environ["PATH"]
    result = subprocess.run([str(root / "opt/lanner/venv/bin/lanner"), *args], env=environ,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_install_into_a_root_serves_a_click_through_nginx_and_upgrades_in_place(tmp_path):
    root, port = tmp_path / "root", free_port()
    first = install(root, port)
    assert "installed" in first.stdout.splitlines()[-1]
    assert "key: " in first.stdout and "report API key: " in first.stdout
    assert "First admin: admin, password: " in first.stdout
    assert f"panel: http://127.0.0.1:{port}/panel/ (from this machine only" in first.stdout
    password = first.stdout.split("First admin: admin, password: ")[1].split(" ")[0]
    web_unit, worker_unit = (
        root / "etc/systemd/system/lanner-web.service",
        root / "etc/systemd/system/lanner-worker.service",
    )
    assert unit(web_unit)["ExecStart"] == f"{root}/opt/lanner/venv/bin/lanner serve"
    site = root / "etc/nginx/sites-enabled/lanner.conf"
    assert site.resolve() == root / "etc/nginx/sites-available/lanner.conf"
    # The installed code is a copy: nothing points back into the source tree.
    assert not (root / "opt/lanner/app/.venv").exists() and (root / "opt/lanner/app/cli.py").exists()

    installed_lanner(
        root, "campaign", "create", "Live", "--alias", "live", "--offer-url", "https://o.example/?s={subid}"
    )
    services = [start_unit(web_unit, tmp_path / "web.log"), start_unit(worker_unit, tmp_path / "worker.log")]
    prefix = tmp_path / "nginx"
    (prefix / "temp").mkdir(parents=True)
    main = prefix / "nginx.conf"
    paths = ["--pid", str(prefix / "nginx.pid"), "--error-log", str(prefix / "error.log")]
    paths += ["--temp-dir", str(prefix / "temp"), "-o", str(main)]
    installed_lanner(root, "nginx", "main", "--sites", str(site), *paths)
    directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
    nginx = start_process(
        [NGINX, "-c", str(main), "-p", str(prefix), "-g", directives], os.environ.copy(), prefix / "run.log"
    )
    services.append(nginx)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, headers, _ = request(port, "/live?sub1=installed", {"User-Agent": "Install test"})
                if status == 302:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "web.log").read_text()
            time.sleep(0.2)
        subid = headers["location"].split("s=")[1]
        database = root / "var/lib/lanner/lanner.db"
        while True:  # The installed worker flushes it.
            with sqlite3.connect(database) as connection:
                rows = connection.execute(
                    "SELECT sub_id_1, ip FROM click WHERE subid = ?", (subid,)
                ).fetchall()
            if rows:
                break
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
        assert rows == [("installed", "127.0.0.1")]  # The client address nginx saw.
        assert request(port, "/healthz")[0] == 200
        # The report API goes to the admin worker through nginx's /api/ location.
        api_key = installed_lanner(root, "api", "key", "show").strip()
        report = request(port, "/api/report?preset=today", {"X-Api-Key": api_key})
        assert report[0] == 200 and b'"clicks": 1' in report[2]
        # The panel too, logged in with the password the installer printed.
        login = urllib.parse.urlencode({"name": "admin", "password": password, "next": "/panel"}).encode()
        status, headers, _ = request(
            port, "/panel/login", {"Content-Type": "application/x-www-form-urlencoded"}, "POST", login
        )
        assert status == 303 and headers["location"] == "/panel", headers
        cookie = headers["set-cookie"].split(";")[0]
        status, _, page = request(port, "/panel", {"Cookie": cookie})
        assert status == 200 and b"Live" in page  # The dashboard, with the campaign's click.
    finally:
        for service in reversed(services):
            service.stop()

    # Upgrade: the same command again keeps the configuration and the data.
    env_file = root / "etc/lanner/lanner.env"
    env_file.write_text(env_file.read_text() + "LANNER_LOG_LEVEL=WARNING\n")
    second = install(root, port)
    assert "upgraded in place" in second.stdout and "kept" in second.stdout
    assert "LANNER_LOG_LEVEL=WARNING" in env_file.read_text()
    assert "up to date" in second.stdout
    assert "First admin" not in second.stdout  # Printed once, on the first install.
    with sqlite3.connect(root / "var/lib/lanner/lanner.db") as connection:
        assert connection.execute("SELECT COUNT(*) FROM click").fetchone()[0] == 1
