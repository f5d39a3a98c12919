"""scripts/install.sh into a temporary root: the installed units' ExecStart lines run, a click goes
through the installed nginx site and lands; running it again upgrades in place and keeps the data."""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import socket
import sqlite3
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest
from conftest import ROOT, TEST_COUNTRY_DATABASE, LiveProcess, request, start_process

from workers.bench.harness import free_port

NGINX = "/usr/sbin/nginx"
pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is installed by `make test`"),
]


@pytest.fixture(scope="module")
def pip_env(tmp_path_factory) -> dict[str, str]:
    """What makes the installer's pip take Lanner's dependencies from a wheelhouse made once per run
    (with what building Lanner itself needs), not from the package index: the installer still creates
    its venv and installs every package into it, and the index's pages cost ~2.7 s of CPU an install
    (four in this module). Under xdist the run's processes share one, made by the first to get here."""
    import fcntl
    import sys
    import tomllib

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # The run's directory, above each xdist process's own.
    wheelhouse = shared / "install-wheelhouse"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = project["build-system"]["requires"] + ["wheel"]  # pip's isolated build of the editable
    wanted = (
        build + project["project"]["dependencies"] + project["project"]["optional-dependencies"]["cluster"]
    )
    with open(shared / "install-wheelhouse.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (wheelhouse / "done").exists():
            made = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "-q", "-w", str(wheelhouse), *wanted],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert made.returncode == 0, made.stdout + made.stderr
            (wheelhouse / "done").touch()
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}


def install(root: Path, port: int, pip_env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    args = ["bash", str(ROOT / "scripts" / "install.sh"), "--root", str(root), "--user", getpass.getuser()]
    args += ["--no-packages", "--no-systemd", "--listen", f"127.0.0.1:{port}", *extra]
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LANNER_", "VIRTUAL_ENV"))}
    environ.update(pip_env)
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
    fields = unit(path)  # The first ExecStart only.
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
    for line in Path(fields["EnvironmentFile"]).read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            environ[key] = value
    # As every test's processes (conftest.env): on a busy box an idle-priority admin worker waits minutes.
    environ.update(LANNER_ADMIN_IDLE_PRIORITY="off", LANNER_WORKER_NICE="0")
    log_file = open(log, "wb")
    process = subprocess.Popen(
        shlex.split(fields["ExecStart"]),
        env=environ,
        cwd=fields["WorkingDirectory"],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()
    return LiveProcess(process, log)


def installed_lanner(root: Path, *args: str) -> str:
    environ = dict(
        line.split("=", 1)
        for line in (root / "etc/lanner/lanner.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    environ["PATH"] = os.environ["PATH"]
    result = subprocess.run(
        [str(root / "opt/lanner/venv/bin/lanner"), *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_install_into_a_root_serves_a_click_through_nginx_and_upgrades_in_place(tmp_path, pip_env):
    root, port = tmp_path / "root", free_port()
    first = install(root, port, pip_env, "--domain", "Track.lanner.test", "--email", "ops@lanner.test")
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
    data = root / "var/lib/lanner"
    # Root's file under /etc/nginx, never in the data directory the web-facing user writes.
    rendered = root / "etc/nginx/sites-available/lanner.conf"
    assert site.resolve() == rendered and not rendered.is_symlink()
    assert rendered.stat().st_mode & 0o777 == 0o644 and not (data / "nginx/lanner.conf").exists()
    assert f"root {data}/acme;" in site.read_text()  # certbot's challenges, served on plain HTTP.
    reload_path = (root / "etc/systemd/system/lanner-nginx-reload.path").read_text()
    assert reload_path.count(f"{data}/nginx/reload") == 2
    # The reload service (root: no User=) renders the site itself from the saved options, with the
    # installed code and settings, and only then tests and reloads nginx.
    reload_unit = (root / "etc/systemd/system/lanner-nginx-reload.service").read_text()
    assert "User=" not in reload_unit and f"EnvironmentFile={root}/etc/lanner/lanner.env" in reload_unit
    starts = [line.partition("=")[2] for line in reload_unit.splitlines() if line.startswith("ExecStart=")]
    assert starts == [
        f"{root}/opt/lanner/venv/bin/lanner nginx site --saved -o {rendered}",
        "/usr/sbin/nginx -t -q",
        "/bin/systemctl reload nginx",
    ]
    rendered.unlink()  # Run as the path unit would: the site comes back, whole.
    reload = start_unit(root / "etc/systemd/system/lanner-nginx-reload.service", tmp_path / "reload.log")
    assert reload.process.wait(60) == 0, reload.log
    assert f"root {data}/acme;" in rendered.read_text() and rendered.stat().st_mode & 0o777 == 0o644
    env_text = (root / "etc/lanner/lanner.env").read_text()
    assert "LANNER_ACME_EMAIL=ops@lanner.test" in env_text and f"LANNER_ACME_WEBROOT={data}/acme" in env_text
    # --no-systemd: no nginx runs yet, so the domain waits for `lanner domain cert`.
    assert "Domain track.lanner.test added" in first.stdout
    # The columnar history's directory: the service user's own, closed to others.
    assert (data / "history").stat().st_uid == os.getuid()
    assert (data / "history").stat().st_mode & 0o777 == 0o700
    # The installed code is a copy: nothing points back into the source tree.
    assert not (root / "opt/lanner/app/.venv").exists() and (root / "opt/lanner/app/cli/__init__.py").exists()

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
        deadline = time.monotonic() + 90
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
        # With a domain, the Host decides: the domain answers the campaign, another host does not.
        # Another visitor (another User-Agent): within debounce the same one's click would be a repeat.
        visitor = {"User-Agent": "Install test, by domain"}
        assert request(port, "/live", {"Host": "track.lanner.test", **visitor})[0] == 302
        assert request(port, "/live", {"Host": "other.lanner.test", **visitor})[0] == 404
        assert request(port, "/healthz")[0] == 200
        # The report API goes to the admin worker through nginx's /api/ location.
        api_key = installed_lanner(root, "api", "key", "show").strip()
        deadline = time.monotonic() + 90
        while True:  # The smoke click and the domain's, once the installed worker has flushed the second.
            report = request(port, "/api/report?preset=today", {"X-Api-Key": api_key})
            if report[0] != 200 or b'"clicks": 2' in report[2]:
                break
            assert time.monotonic() < deadline, report
            time.sleep(0.2)
        assert report[0] == 200 and b'"clicks": 2' in report[2]
        # The panel too, logged in with the password the installer printed.
        login = urllib.parse.urlencode({"name": "admin", "password": password, "next": "/panel"}).encode()
        status, headers, _ = request(
            port, "/panel/login", {"Content-Type": "application/x-www-form-urlencoded"}, "POST", login
        )
        assert status == 303 and headers["location"] == "/panel", headers
        cookie = headers["set-cookie"].split(";")[0]
        status, _, page = request(port, "/panel", {"Cookie": cookie})
        assert status == 200 and b"Live" in page  # The dashboard, with the campaign's click.
        history = data / "history/clicks.duckdb"
        while not history.exists():  # The installed worker appends once as it starts.
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
    finally:
        for service in reversed(services):
            service.stop()

    # Upgrade: the same command again keeps the configuration and the data, the history included.
    held = history.read_bytes()
    env_file = root / "etc/lanner/lanner.env"
    env_file.write_text(env_file.read_text() + "LANNER_LOG_LEVEL=WARNING\n")
    second = install(root, port, pip_env, "--domain", "track.lanner.test")
    assert "upgraded in place" in second.stdout and "kept" in second.stdout
    assert "track.lanner.test: kept" in second.stdout
    assert "LANNER_LOG_LEVEL=WARNING" in env_file.read_text()
    assert "up to date" in second.stdout
    # The same packages and C extension: pip is not run again, and the extension came along.
    assert "packages and the C extension unchanged: kept" in second.stdout
    venv_python = str(root / "opt/lanner/venv/bin/python")
    subprocess.run([venv_python, "-c", "import workers.runtime._bjoern"], cwd="/", check=True, timeout=60)
    assert "First admin" not in second.stdout  # Printed once, on the first install.
    with sqlite3.connect(root / "var/lib/lanner/lanner.db") as connection:
        assert connection.execute("SELECT COUNT(*) FROM click").fetchone()[0] == 2  # Both clicks kept.
    assert history.read_bytes() == held and (data / "history").stat().st_mode & 0o777 == 0o700


# -- cluster mode: --cluster on the first host, --join on the others ------------------------------

STUBS = {
    # Every package counts as missing, and apt-get only notes what it was asked for.
    "dpkg": "exit 1\n",
    "apt-get": 'echo "apt-get $*" >>"$STUB_LOG"\n',
    "systemctl": 'echo "systemctl $*" >>"$STUB_LOG"\n',
    # `runuser -u postgres -- psql …`: psql as this user, whom PGUSER makes the test server's superuser.
    "runuser": 'while [ "$1" != -- ]; do shift; done; shift; exec "$@"\n',
}


@pytest.fixture
def first_postgres():
    """A PostgreSQL of its own whose superuser is `postgres`, as Debian's cluster has it (the suite's
    shared server has `lanner`, the very role the installer makes)."""
    import servers

    try:
        server = servers.PostgresServer(superuser="postgres")
    except servers.ServerMissing as error:
        pytest.skip(str(error))
    server.start()
    yield server
    server.stop()


def stubbed_environment(tmp_path: Path, server, pip_env: dict[str, str]) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STUBS.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LANNER_", "VIRTUAL_ENV"))}
    environ.update(PATH=f"{bin_dir}:{os.environ['PATH']}", STUB_LOG=str(tmp_path / "stubs.log"))
    environ.update(PGHOST=str(server.socket_dir), PGUSER="postgres", **pip_env)
    return environ


def install_cluster(root: Path, environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    command = ["bash", str(ROOT / "scripts" / "install.sh"), "--root", str(root), "--user", getpass.getuser()]
    command += ["--no-systemd", "--listen", f"127.0.0.1:{free_port()}", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environ)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def env_file(root: Path) -> dict[str, str]:
    lines = (root / "etc/lanner/lanner.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def cluster_check(root: Path, **overrides: str) -> subprocess.CompletedProcess:
    environ = {**env_file(root), **overrides, "PATH": os.environ["PATH"]}
    return subprocess.run(
        [str(root / "opt/lanner/venv/bin/lanner"), "cluster", "check"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cluster_first_host_makes_postgres_and_redis_and_a_further_host_joins_them(
    tmp_path, first_postgres, pip_env
):
    environ = stubbed_environment(tmp_path, first_postgres, pip_env)
    first, further = tmp_path / "first", tmp_path / "further"
    redis_port = free_port()
    (first / "etc/redis").mkdir(parents=True)
    debian_conf = f'port {redis_port}\nbind 127.0.0.1 -::1\nsave ""\nappendonly no\ndir {tmp_path}\n'
    (first / "etc/redis/redis.conf").write_text(debian_conf)

    for host in (first, further):  # Not `lanner geo build` (~3 s of CPU each): the first test builds it.
        (host / "var/lib/lanner/geo").mkdir(parents=True)
        shutil.copyfile(TEST_COUNTRY_DATABASE, host / "var/lib/lanner/geo/country.mmdb")
    installed = install_cluster(
        first, environ, "--cluster", "--cluster-listen", "127.0.0.2", "--node-id", "first"
    )
    assert "apt-get install" in (tmp_path / "stubs.log").read_text()
    assert "postgresql redis-server" in (tmp_path / "stubs.log").read_text()
    settings = env_file(first)
    database_url, redis_url = settings["LANNER_DATABASE_URL"], settings["LANNER_REDIS_URL"]
    assert (
        database_url.startswith("postgresql://lanner:")
        and f"host={first_postgres.socket_dir}" in database_url
    )
    assert redis_url.startswith("redis://:") and redis_url.endswith(f"@127.0.0.1:{redis_port}/0")
    assert settings["LANNER_NODE_ID"] == "first"
    assert (first / "etc/lanner/lanner.env").stat().st_mode & 0o777 == 0o600  # It holds both passwords.
    db_password, redis_password = (
        database_url.split(":")[2].split("@")[0],
        redis_url.split(":")[2].split("@")[0],
    )
    assert len(db_password) == 48 and len(redis_password) == 48 and db_password != redis_password
    # The printed command for the further hosts, on the --cluster-listen address.
    assert (
        f"--join 'postgresql://lanner:{db_password}@127.0.0.2:5432/lanner' "
        f"--redis 'redis://:{redis_password}@127.0.0.2:{redis_port}/0'"
    ) in installed.stdout
    # PostgreSQL: the role, its database (migrated by the installer), and the other hosts let in.
    with first_postgres.admin() as admin:
        assert admin.execute(
            "SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = 'lanner'"
        ).fetchall() == [(True, False)]
        owner = admin.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'lanner'")
        assert owner.fetchall() == [("lanner",)]
        assert admin.execute(
            "SELECT setting FROM pg_file_settings WHERE name = 'listen_addresses'"
        ).fetchall() == [("localhost,127.0.0.2",)]
        hba = Path(admin.execute("SHOW hba_file").fetchone()[0])
    with psycopg_connect(first_postgres, "lanner") as lanner_db:
        assert lanner_db.execute("SELECT COUNT(*) FROM spool_node").fetchone()[0] >= 1
    # Redis: Debian's file untouched but for the include of Lanner's, which sets the password.
    redis_conf = (first / "etc/redis/redis.conf").read_text()
    assert redis_conf.startswith(debian_conf) and redis_conf.count("include ") == 1
    own = (first / "etc/redis/lanner.conf").read_text()
    assert f"requirepass {redis_password}\n" in own and "bind 127.0.0.1 -::1 127.0.0.2\n" in own

    # Again: nothing changes, the passwords stay.
    before = {
        path: path.read_text() for path in (first / "etc/lanner/lanner.env", first / "etc/redis/lanner.conf")
    }
    hba_before = hba.read_text()
    # As after a release that changed the packages: the upgrade installs them again.
    (first / "opt/lanner/venv/.lanner-packages").write_text("an older release's\n")
    again = install_cluster(
        first, environ, "--cluster", "--cluster-listen", "127.0.0.2", "--node-id", "first"
    )
    assert {path: path.read_text() for path in before} == before and hba.read_text() == hba_before
    assert hba_before.count("host lanner lanner samenet scram-sha-256") == 1
    assert not any(word in again.stdout for word in (" created", " set\n", " changed", " written"))
    assert "upgraded in place" in again.stdout and "unchanged: kept" not in again.stdout

    # Redis as its service would run it, from the installed configuration.
    redis = start_process(
        ["redis-server", str(first / "etc/redis/redis.conf"), "--daemonize", "no"],
        environ,
        tmp_path / "redis.log",
    )
    try:
        wait_for_redis(redis_url)
        # A further host (here through the same socket, with Redis on the --cluster-listen address).
        # It listens where the balancer's nginx reaches it, and believes that nginx's X-Real-IP.
        node_port = free_port()
        joined_redis = redis_url.replace("127.0.0.1", "127.0.0.2")
        joined = install_cluster(
            further,
            environ,
            "--join",
            database_url,
            "--redis",
            joined_redis,
            "--bind",
            f"127.0.0.1:{node_port}",
            "--balancer",
            "127.0.0.3",
        )
        assert "PostgreSQL and Redis answer" in joined.stdout and "First admin" not in joined.stdout
        settings = env_file(further)
        assert (
            settings["LANNER_DATABASE_URL"] == database_url and settings["LANNER_REDIS_URL"] == joined_redis
        )
        assert settings["LANNER_NODE_ID"] == socket.gethostname().split(".")[0]  # The host name by default.
        assert settings["LANNER_BIND"] == f"127.0.0.1:{node_port}"
        assert settings["LANNER_ADMIN_BIND"] == f"127.0.0.1:{node_port + 1}"
        assert settings["LANNER_TRUSTED_PROXIES"] == "127.0.0.1,::1,127.0.0.3"
        site = (further / "etc/nginx/sites-available/lanner.conf").read_text()
        assert f"server 127.0.0.1:{node_port};" in site and f"server 127.0.0.1:{node_port + 1};" in site
        assert (further / "etc/lanner/lanner.env").stat().st_mode & 0o777 == 0o600

        # What the check refuses, each in one sentence: a name another node has, a wrong password.
        with psycopg_connect(first_postgres, "lanner") as lanner_db:
            lanner_db.execute(
                "INSERT INTO spool_node (name, spool_id, segment, byte_offset, updated_at) "
                "VALUES ('first', 'its-spool', 1, 0, 0) ON CONFLICT (name) DO NOTHING"
            )
        taken = cluster_check(further, LANNER_NODE_ID="first")
        assert taken.returncode == 1 and "A node named 'first' is already in the database" in taken.stderr
        assert cluster_check(further).returncode == 0
        wrong = cluster_check(further, LANNER_REDIS_URL=redis_url.replace(redis_password, "wrong"))
        assert (
            wrong.returncode == 1
            and "Cannot reach Redis at" in wrong.stderr
            and wrong.stderr.count("\n") == 1
        )
    finally:
        redis.stop()


def psycopg_connect(server, database: str):
    import psycopg

    return psycopg.connect(server.url(database), autocommit=True)


def wait_for_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=1)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.RedisError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)
    client.close()
