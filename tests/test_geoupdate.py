"""`lanner geo update` against a local HTTP server serving small `.mmdb` files in MaxMind's tar.gz form
(with its .sha256) and DB-IP's .mmdb.gz form; the daily task; the status age; the isp / connection /
carrier filters read from ASN / ISP / connection-type files."""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import click, run_lanner
from mmdb_writer import MMDBWriter
from netaddr import IPSet

from models.lookups import geoupdate
from models.lookups.geo import GeoDatabase, GeoSource, NetworkInfo
from models.lookups.geoupdate import GeoUpdateError, update_edition

DAY = 86400
SANITY = ["8.8.8.0/24", "1.1.1.0/24", "9.9.9.0/24", "208.67.222.0/24", "2001:4860::/32", "2606:4700::/32"]
VISITOR = "81.2.69.160"


class _Writer(MMDBWriter):
    """MMDBWriter with a chosen build epoch (its own is the time of writing)."""

    def __init__(self, build_epoch: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.build_epoch = build_epoch

    def _build_meta(self):
        meta = super()._build_meta()
        meta["build_epoch"] = self.build_epoch
        return meta


def mmdb_bytes(
    database_type: str = "GeoLite2-City",
    visitor_country: str = "GB",
    *,
    built: float | None = None,
    sanity: bool = True,
    records: dict[str, dict] | None = None,
    description: str = "test data",
) -> bytes:
    """A small database: VISITOR in `visitor_country`, the well-known resolvers in US."""
    writer = _Writer(
        int(time.time() if built is None else built),
        ip_version=6,
        ipv4_compatible=True,
        database_type=database_type,
        languages=["en"],
        description={"en": description},
    )
    if records is None:
        records = {"81.2.69.0/24": {"country": {"iso_code": visitor_country}, "city": {"names": {"en": "X"}}}}
    for network, record in records.items():
        writer.insert_network(IPSet([network]), record)
    if sanity:
        writer.insert_network(
            IPSet(SANITY), {"country": {"iso_code": "US"}, "autonomous_system_organization": "G"}
        )
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"lanner-test-{os.getpid()}-{threading.get_ident()}.mmdb"
    writer.to_db_file(str(path))
    try:
        return path.read_bytes()
    finally:
        path.unlink()


def maxmind_tar_gz(edition: str, data: bytes) -> bytes:
    """MaxMind's packing: {edition}_{YYYYMMDD}/{edition}.mmdb plus the licence files, gzipped."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, content in (("COPYRIGHT.txt", b"test"), (f"{edition}.mmdb", data)):
            info = tarfile.TarInfo(f"{edition}_20261201/{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


class FileServer:
    """A local HTTP server: path (with query) -> (status, body, extra headers); records every request."""

    def __init__(self, auth: tuple[str, str] | None = None) -> None:
        self.routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.auth = auth
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append((self.path, headers))
                if server.auth is not None:
                    token = base64.b64encode(":".join(server.auth).encode()).decode()
                    if headers.get("authorization") != f"Basic {token}":
                        self.send_response(401)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                status, body, extra = server.routes.get(self.path, (404, b"not found", {}))
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, path: str, body: bytes, status: int = 200, **headers: str) -> None:
        self.routes[path] = (status, body, headers)

    def serve_maxmind(
        self, edition: str, data: bytes, checksum: str | None = None, archive: bytes | None = None
    ) -> None:
        archive = maxmind_tar_gz(edition, data) if archive is None else archive
        self.serve(f"/{edition}/download?suffix=tar.gz", archive)
        digest = checksum or hashlib.sha256(archive).hexdigest()
        self.serve(
            f"/{edition}/download?suffix=tar.gz.sha256", f"{digest}  {edition}_20261201.tar.gz\n".encode()
        )

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def maxmind():
    server = FileServer(auth=("12345", "s3cret-key"))
    yield server
    server.close()


@pytest.fixture
def dbip():
    server = FileServer()
    yield server
    server.close()


def maxmind_update(server: FileServer, dest: Path, edition: str = "GeoLite2-City", **options):
    return update_edition(
        "maxmind", edition, dest, account_id="12345", license_key="s3cret-key", base_url=server.url, **options
    )


def country_of(path: Path, ip: str = VISITOR) -> str:
    with GeoDatabase(path) as database:
        return database.lookup(ip).country


def leftovers(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


# --- fetching, checking, swapping ---------------------------------------------------------------------------


def test_maxmind_update_checks_the_sha256_and_replaces_the_file(maxmind, tmp_path):
    dest = tmp_path / "geo" / "country.mmdb"
    dest.parent.mkdir()
    dest.write_bytes(mmdb_bytes("Lanner-Country", "FR"))  # The bundled file, built "now": another type.
    maxmind.serve_maxmind("GeoLite2-City", mmdb_bytes("GeoLite2-City", "GB", built=time.time() - DAY))
    result = maxmind_update(maxmind, dest)
    assert result.is_replaced and result.database_type == "GeoLite2-City"
    assert country_of(dest) == "GB" and oct(dest.stat().st_mode & 0o777) == "0o644"
    assert leftovers(dest.parent) == []
    assert [path for path, _headers in maxmind.requests] == [
        "/GeoLite2-City/download?suffix=tar.gz",
        "/GeoLite2-City/download?suffix=tar.gz.sha256",
    ]
    again = maxmind_update(maxmind, dest)  # Same build: nothing to swap.
    assert not again.is_replaced and country_of(dest) == "GB"
    stale, recent = dest.parent / ".country.mmdb.abc.download", dest.parent / ".country.mmdb.def.new"
    stale.write_bytes(b"killed midway")
    recent.write_bytes(b"another update under way")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    maxmind_update(maxmind, dest)
    assert leftovers(dest.parent) == [recent.name]


@pytest.mark.parametrize(
    ("serve", "message"),
    [
        (
            lambda s: s.serve_maxmind("GeoLite2-City", mmdb_bytes(), checksum="0" * 64),
            "does not match its SHA-256",
        ),
        (lambda s: s.serve_maxmind("GeoLite2-City", b"\x00garbage" * 100), "not a valid MaxMind DB"),
        (lambda s: s.serve_maxmind("GeoLite2-City", b"", archive=b"not gzip"), "not a valid tar.gz"),
        (lambda s: s.serve("/GeoLite2-City/download?suffix=tar.gz", b"", status=500), "answered HTTP 500"),
        (lambda s: None, "answered HTTP 404"),
        (
            lambda s: s.serve_maxmind("GeoLite2-City", mmdb_bytes("GeoLite2-ASN")),
            "is a GeoLite2-ASN database",
        ),
        (lambda s: s.serve_maxmind("GeoLite2-City", mmdb_bytes(sanity=False)), "only 0 of 6 well-known"),
        (
            lambda s: s.serve_maxmind("GeoLite2-City", mmdb_bytes(built=time.time() - 30 * DAY)),
            "before the file in use",
        ),
    ],
    ids=[
        "bad-checksum",
        "corrupt-mmdb",
        "corrupt-archive",
        "http-500",
        "http-404",
        "wrong-type",
        "empty",
        "older",
    ],
)
def test_a_bad_download_keeps_the_file_in_use(maxmind, tmp_path, serve, message):
    dest = tmp_path / "country.mmdb"
    current = mmdb_bytes("GeoLite2-City", "SE", built=time.time() - 10 * DAY)
    dest.write_bytes(current)
    serve(maxmind)
    with pytest.raises(GeoUpdateError, match=message):
        maxmind_update(maxmind, dest)
    assert dest.read_bytes() == current and leftovers(tmp_path) == []


def test_wrong_credentials_are_named_and_never_shown(maxmind, tmp_path):
    maxmind.serve_maxmind("GeoLite2-City", mmdb_bytes())
    with pytest.raises(
        GeoUpdateError, match="refused the download .HTTP 401.: check the account id"
    ) as caught:
        update_edition(
            "maxmind",
            "GeoLite2-City",
            tmp_path / "c.mmdb",
            account_id="12345",
            license_key="wrong-key",
            base_url=maxmind.url,
        )
    assert "wrong-key" not in str(caught.value) and not (tmp_path / "c.mmdb").exists()
    with pytest.raises(GeoUpdateError, match="need LANNER_MAXMIND_ACCOUNT_ID and LANNER_MAXMIND_LICENSE_KEY"):
        update_edition(
            "maxmind", "GeoLite2-City", tmp_path / "c.mmdb", account_id="12345", base_url=maxmind.url
        )


def test_a_redirect_elsewhere_does_not_get_the_credentials(maxmind, dbip, tmp_path):
    # MaxMind redirects to a presigned storage URL on another host: no Authorization header goes there.
    archive = maxmind_tar_gz("GeoLite2-Country", mmdb_bytes("GeoLite2-Country"))
    dbip.serve("/presigned/GeoLite2-Country.tar.gz?X-Amz-Signature=abc", archive)
    maxmind.serve(
        "/GeoLite2-Country/download?suffix=tar.gz",
        b"",
        status=302,
        Location=f"{dbip.url}/presigned/GeoLite2-Country.tar.gz?X-Amz-Signature=abc",
    )
    sha = f"{hashlib.sha256(archive).hexdigest()}  x.tar.gz"
    maxmind.serve("/GeoLite2-Country/download?suffix=tar.gz.sha256", sha.encode())
    assert maxmind_update(maxmind, tmp_path / "country.mmdb", "GeoLite2-Country").is_replaced
    [(path, headers)] = dbip.requests
    assert path.startswith("/presigned/") and "authorization" not in headers


def test_dbip_takes_this_months_file_else_last_months(dbip, tmp_path):
    dest = tmp_path / "country.mmdb"
    dbip.serve("/dbip-country-lite-2026-11.mmdb.gz", gzip.compress(mmdb_bytes("DBIP-Country-Lite", "DE")))
    today = datetime.date(2026, 12, 1)
    result = update_edition("dbip", "dbip-country-lite", dest, base_url=dbip.url, today=today)
    assert result.is_replaced and country_of(dest) == "DE"
    assert [path for path, _headers in dbip.requests] == [
        "/dbip-country-lite-2026-12.mmdb.gz",
        "/dbip-country-lite-2026-11.mmdb.gz",
    ]
    newer = mmdb_bytes("DBIP-Country-Lite", "AT", built=time.time() + 60)
    dbip.serve("/dbip-country-lite-2026-12.mmdb.gz", gzip.compress(newer))
    update_edition("dbip", "dbip-country-lite", dest, base_url=dbip.url, today=today)
    assert country_of(dest) == "AT"
    # DB-IP's ASN file names itself after the edition it mimics: still the edition asked for.
    asn = mmdb_bytes("DBIP-ASN-Lite (compat=GeoLite2-ASN)", records={})
    dbip.serve("/dbip-asn-lite-2026-12.mmdb.gz", gzip.compress(asn))
    assert update_edition(
        "dbip", "dbip-asn-lite", tmp_path / "asn.mmdb", base_url=dbip.url, today=today
    ).is_replaced


def test_a_download_past_the_size_bound_is_refused(dbip, tmp_path, monkeypatch):
    monkeypatch.setattr(geoupdate, "MAX_DOWNLOAD_BYTES", 1000)
    dbip.serve("/dbip-city-lite-2026-12.mmdb.gz", os.urandom(5000))
    with pytest.raises(GeoUpdateError, match="is 5,000 bytes, more than a geo database can be"):
        update_edition(
            "dbip", "dbip-city-lite", tmp_path / "c.mmdb", base_url=dbip.url, today=datetime.date(2026, 12, 9)
        )
    assert leftovers(tmp_path) == []


def test_real_urls_have_the_documented_shapes():
    [maxmind] = geoupdate.downloads("maxmind", "GeoLite2-City", "", datetime.date(2026, 12, 1))
    assert maxmind.url == "https://download.maxmind.com/geoip/databases/GeoLite2-City/download?suffix=tar.gz"
    assert maxmind.checksum_url == maxmind.url + ".sha256"
    dbip = geoupdate.downloads("dbip", "dbip-city-lite", "", datetime.date(2026, 1, 15))
    assert [d.url for d in dbip] == [
        "https://download.db-ip.com/free/dbip-city-lite-2026-01.mmdb.gz",
        "https://download.db-ip.com/free/dbip-city-lite-2025-12.mmdb.gz",
    ]


# --- the CLI, the settings, status -------------------------------------------------------------------------


@pytest.fixture
def maxmind_env(env, tmp_path, maxmind):
    key_file = tmp_path / "maxmind.key"
    key_file.write_text("s3cret-key\n")
    return {
        **env,
        "LANNER_GEO_SOURCE": "maxmind",
        "LANNER_GEO_EDITIONS": "GeoLite2-Country,GeoLite2-ASN",
        "LANNER_MAXMIND_ACCOUNT_ID": "12345",
        "LANNER_MAXMIND_LICENSE_KEY_FILE": str(key_file),
        "LANNER_GEO_UPDATE_URL": maxmind.url,
    }


def test_cli_update_fetches_every_edition_and_never_prints_the_key(maxmind_env, maxmind, db, settings):
    maxmind.serve_maxmind("GeoLite2-Country", mmdb_bytes("GeoLite2-Country", "GB"))
    asn = {
        "81.2.69.0/24": {
            "autonomous_system_number": 20712,
            "autonomous_system_organization": "Andrews & Arnold",
        }
    }
    maxmind.serve_maxmind("GeoLite2-ASN", mmdb_bytes("GeoLite2-ASN", records=asn))
    done = run_lanner(maxmind_env, "geo", "update")
    assert "GeoLite2-Country: GeoLite2-Country built " in done.stdout and "replaced" in done.stdout
    assert country_of(settings.data_dir / "geo" / "country.mmdb") == "GB"
    with GeoDatabase(settings.data_dir / "geo" / "GeoLite2-ASN.mmdb") as asn_file:
        assert asn_file.network(VISITOR) == NetworkInfo("Andrews & Arnold")
    shown = run_lanner(maxmind_env, "settings").stdout + run_lanner(maxmind_env, "status").stdout
    status = json.loads(run_lanner(maxmind_env, "status", "--json").stdout)
    assert "s3cret-key" not in shown + done.stdout + done.stderr + json.dumps(status)
    assert "(set)" in run_lanner(maxmind_env, "settings").stdout
    assert status["geo"]["licence_key"] == "set" and status["geo"]["source"] == "maxmind"
    assert status["geo"]["network"]["GeoLite2-ASN"]["age_days"] == 0


def test_cli_update_failure_is_one_sentence_and_keeps_the_file(maxmind_env, maxmind, db, settings):
    maxmind.serve_maxmind("GeoLite2-Country", mmdb_bytes("GeoLite2-Country"), checksum="ab" * 32)
    failed = run_lanner(maxmind_env, "geo", "update", check=False)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert failed.stderr.strip().endswith(
        "Error: The GeoLite2-Country download does not match its SHA-256 checksum."
    )
    assert not (settings.data_dir / "geo" / "country.mmdb").exists()
    off = run_lanner({k: v for k, v in maxmind_env.items() if "GEO" not in k}, "geo", "update", check=False)
    assert off.returncode == 1 and "LANNER_GEO_SOURCE is not set" in off.stderr


def test_status_warns_past_sixty_days(env, db, tmp_path):
    path = tmp_path / "city.mmdb"
    path.write_bytes(mmdb_bytes(built=time.time() - 59 * DAY))
    fresh = json.loads(run_lanner({**env, "LANNER_GEO_DATABASE": str(path)}, "status", "--json").stdout)
    assert fresh["geo"]["age_days"] == 59 and "warning" not in fresh["geo"]
    path.write_bytes(mmdb_bytes(built=time.time() - 61 * DAY))
    stale_env = {**env, "LANNER_GEO_DATABASE": str(path), "LANNER_GEO_SOURCE": "dbip"}
    stale = json.loads(run_lanner(stale_env, "status", "--json").stdout)
    assert stale["geo"]["warning"] == "geo data is 61 days old (over 60): run `lanner geo update`"
    assert "  WARNING: geo data is 61 days old (over 60)" in run_lanner(stale_env, "status").stdout


def test_the_bundled_files_age_is_its_datas_not_its_builds(tmp_path):
    from workers.ops.status import _geo_file_status

    path = tmp_path / "country.mmdb"
    path.write_bytes(
        mmdb_bytes(
            "Lanner-Country", description="MAXMIND:GeoLite2-Country-IPv4IPv6-en-20240618 via geoip2fast"
        )
    )
    now = datetime.datetime(2024, 9, 1, tzinfo=datetime.UTC).timestamp()
    status = _geo_file_status(path, now, 60, "run `lanner geo build`", "set LANNER_GEO_SOURCE for updates")
    assert status["data_date"] == "2024-06-18" and status["age_days"] == 75
    assert status["warning"] == "geo data is 75 days old (over 60): set LANNER_GEO_SOURCE for updates"


# --- the daily task ----------------------------------------------------------------------------------------


def test_daily_task_fetches_only_data_thirty_days_old(env, db, dbip):
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    settings = load_settings({**env, "LANNER_GEO_SOURCE": "dbip", "LANNER_GEO_UPDATE_URL": dbip.url})
    month = datetime.date.today()
    dbip.serve(f"/dbip-city-lite-{month:%Y-%m}.mmdb.gz", gzip.compress(mmdb_bytes("DBIP-City-Lite", "DE")))
    huey = create_huey(settings, immediate=True)
    try:
        huey.update_geo_data()  # No file yet: fetched.
        assert country_of(settings.geo_path) == "DE" and len(dbip.requests) == 1
        huey.update_geo_data()  # Fresh: left alone.
        assert len(dbip.requests) == 1
        settings.geo_path.write_bytes(mmdb_bytes("DBIP-City-Lite", "PL", built=time.time() - 31 * DAY))
        huey.update_geo_data()  # A month old: fetched again.
        assert country_of(settings.geo_path) == "DE" and len(dbip.requests) == 2
        dbip.routes.clear()
        settings.geo_path.write_bytes(old := mmdb_bytes("DBIP-City-Lite", "PL", built=time.time() - 31 * DAY))
        huey.update_geo_data()  # The source fails: a warning, the file stays.
        assert settings.geo_path.read_bytes() == old
    finally:
        huey.storage.close()


def test_a_started_worker_fetches_due_geo_data(env, settings, start_consumer, dbip):
    month = datetime.date.today()
    dbip.serve(f"/dbip-city-lite-{month:%Y-%m}.mmdb.gz", gzip.compress(mmdb_bytes("DBIP-City-Lite", "DE")))
    worker = start_consumer(LANNER_GEO_SOURCE="dbip", LANNER_GEO_UPDATE_URL=dbip.url)
    deadline = time.monotonic() + 30
    while not settings.geo_path.exists():
        if time.monotonic() > deadline or worker.process.poll() is not None:
            pytest.fail(f"the worker fetched no geo data:\n{worker.log()}")
        time.sleep(0.1)
    assert country_of(settings.geo_path) == "DE"


# --- isp / connection / carrier ----------------------------------------------------------------------------

ISP_RECORD = {
    "isp": "Vodafone Libertel",
    "organization": "Vodafone NL",
    "autonomous_system_number": 33915,
    "mobile_country_code": "204",
    "mobile_network_code": "04",
}


def network_files(directory: Path) -> tuple[Path, Path]:
    isp = directory / "GeoIP2-ISP.mmdb"
    isp.write_bytes(
        mmdb_bytes("GeoIP2-ISP", records={"81.2.69.0/24": ISP_RECORD, "89.160.20.0/24": {"isp": "Bredband2"}})
    )
    connection = directory / "GeoIP2-Connection-Type.mmdb"
    connection.write_bytes(
        mmdb_bytes("GeoIP2-Connection-Type", records={"81.2.69.0/24": {"connection_type": "Cellular"}})
    )
    return isp, connection


def test_network_lookup_merges_the_files(tmp_path):
    source = GeoSource(tmp_path / "none.mmdb", network_files(tmp_path))
    try:
        assert source.lookup_network(VISITOR) == NetworkInfo(
            "Vodafone Libertel", "Cellular", "Vodafone Libertel"
        )
        assert source.lookup_network("::ffff:" + VISITOR).connection == "Cellular"
        assert source.lookup_network("89.160.20.1") == NetworkInfo("Bredband2", "", "")  # Not mobile.
        assert source.lookup_network("192.0.2.1") == source.lookup_network("junk") == NetworkInfo()
        assert GeoSource(tmp_path / "none.mmdb").lookup_network(VISITOR) == NetworkInfo()
    finally:
        source.close()


@pytest.fixture
def isp_env(env, data_dir, db):
    geo_dir = data_dir / "geo"
    geo_dir.mkdir(parents=True, exist_ok=True)
    network_files(geo_dir)
    (geo_dir / "country.mmdb").write_bytes(mmdb_bytes("GeoLite2-Country", "NL"))
    routed = {**env, "LANNER_GEO_EDITIONS": "GeoIP2-ISP,GeoIP2-Connection-Type"}
    run_lanner(routed, "offer", "create", "Main", "--url", "https://main.example/?c={subid}")
    run_lanner(routed, "offer", "create", "Mobile", "--url", "https://mobile.example/?c={subid}")
    run_lanner(routed, "campaign", "create", "Net", "--alias", "net", "--offer-id", "1")
    return routed


@pytest.mark.parametrize(
    ("expression", "visitor_matches", "other_matches"),
    [
        ("carrier~vodafone", True, False),
        ("isp=Bredband2", False, True),
        ("connection=cellular", True, False),
        ("connection=unknown", False, True),
        ("isp=", False, False),  # Both known here; an address in no file has isp "".
    ],
)
def test_network_filters_route_on_the_files(isp_env, expression, visitor_matches, other_matches):
    run_lanner(
        isp_env, "stream", "add", "net", "--type", "intercepting", "--offer", "2", "--filter", expression
    )

    def matched(ip: str) -> bool:
        out = json.loads(run_lanner(isp_env, "simulate", "/net", "--ip", ip, "--json").stdout)
        return out["decision"]["offer_id"] == 2

    assert (matched(VISITOR), matched("89.160.20.5")) == (visitor_matches, other_matches)


def test_network_filters_never_match_without_the_files(isp_env, data_dir):
    """The documented choice: a filter on data the databases lack is unknown, so IS never matches."""
    for name in ("GeoIP2-ISP.mmdb", "GeoIP2-Connection-Type.mmdb"):
        (data_dir / "geo" / name).unlink()
    run_lanner(
        isp_env,
        "stream",
        "add",
        "net",
        "--type",
        "intercepting",
        "--offer",
        "2",
        "--filter",
        "carrier~vodafone",
    )
    out = json.loads(run_lanner(isp_env, "simulate", "/net", "--ip", VISITOR, "--json").stdout)
    assert out["decision"]["offer_id"] == 1


def test_network_files_are_read_only_for_campaigns_that_filter_on_them(tmp_path):
    from models.clicks.enrichment import look_up
    from models.clicks.visit import Visit
    from models.lookups.bots import BotDetector
    from models.lookups.useragent import UserAgentParser

    class CountingSource(GeoSource):
        calls = 0

        def lookup_network(self, ip):
            CountingSource.calls += 1
            return super().lookup_network(ip)

    class Campaign:
        needs_device = needs_bot = False
        needs_network = False

    source = CountingSource(tmp_path / "none.mmdb", network_files(tmp_path))
    visit = Visit(ip=VISITOR, user_agent="")
    lookups = look_up(visit, source, UserAgentParser(), BotDetector(), 0.0)
    lookups.prepare(Campaign)
    assert CountingSource.calls == 0 and lookups.subject.isp == ""
    Campaign.needs_network = True
    lookups.prepare(Campaign)
    assert CountingSource.calls == 1 and lookups.subject.carrier == "Vodafone Libertel"
    source.close()


# --- the swap while a real server runs ---------------------------------------------------------------------


def test_a_running_server_routes_on_the_new_file_without_a_restart(env, db, start_server, dbip, tmp_path):
    geo_path = tmp_path / "city.mmdb"
    geo_path.write_bytes(mmdb_bytes("DBIP-City-Lite", "GB", built=time.time() - 40 * DAY))
    served = {
        **env,
        "LANNER_GEO_DATABASE": str(geo_path),
        "LANNER_GEO_SOURCE": "dbip",
        "LANNER_GEO_UPDATE_URL": dbip.url,
    }
    run_lanner(served, "offer", "create", "Main", "--url", "https://main.example/?c={subid}")
    run_lanner(served, "offer", "create", "German", "--url", "https://de.example/?c={subid}")
    run_lanner(served, "campaign", "create", "Geo", "--alias", "geo", "--offer-id", "1")
    run_lanner(
        served, "stream", "add", "geo", "--type", "intercepting", "--offer", "2", "--filter", "country=DE"
    )
    server = start_server(workers=2, **{k: v for k, v in served.items() if k not in env})
    status, headers, _body = click(server.port, "geo", ip=VISITOR)
    assert status == 302 and headers["location"].startswith("https://main.example/")

    month = datetime.date.today()
    dbip.serve(f"/dbip-city-lite-{month:%Y-%m}.mmdb.gz", gzip.compress(mmdb_bytes("DBIP-City-Lite", "DE")))
    assert "replaced" in run_lanner(served, "geo", "update").stdout
    deadline = time.monotonic() + 15
    seen = set()
    while time.monotonic() < deadline:
        # Every worker switches: a run of clicks (spread over both) all lands on the German offer.
        locations = [
            click(server.port, "geo", ip=VISITOR, ua=f"UA {len(seen)} {n}")[1]["location"] for n in range(6)
        ]
        seen.add(len(seen))
        if all(location.startswith("https://de.example/") for location in locations):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"clicks still routed on the old file: {locations}\n{server.log()}")


# --- settings ----------------------------------------------------------------------------------------------


def test_geo_settings_are_checked_and_the_key_may_come_from_a_file(tmp_path):
    from settings import load_settings

    key = tmp_path / "key"
    key.write_text("from-file\n")
    settings = load_settings({"LANNER_GEO_SOURCE": "MaxMind", "LANNER_MAXMIND_LICENSE_KEY_FILE": str(key)})
    assert settings.geo_source == "maxmind" and settings.maxmind_license_key == "from-file"
    assert settings.geo_update_editions == ("GeoLite2-City",) and "from-file" not in repr(settings)
    direct = load_settings(
        {"LANNER_MAXMIND_LICENSE_KEY": "direct", "LANNER_MAXMIND_LICENSE_KEY_FILE": str(key)}
    )
    assert direct.maxmind_license_key == "direct"
    for environ, message in [
        ({"LANNER_GEO_SOURCE": "ipinfo"}, "LANNER_GEO_SOURCE='ipinfo' is invalid: it must be empty"),
        (
            {"LANNER_GEO_SOURCE": "dbip", "LANNER_GEO_EDITIONS": "dbip-city-lite,dbip-country-lite"},
            "at most one",
        ),
        ({"LANNER_GEO_EDITIONS": "../../etc"}, "only letters, digits and dashes"),
        ({"LANNER_GEO_UPDATE_URL": "ftp://mirror"}, "http:// or https://"),
        (
            {"LANNER_MAXMIND_LICENSE_KEY_FILE": str(tmp_path / "none")},
            "LANNER_MAXMIND_LICENSE_KEY_FILE cannot be read",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            load_settings(environ)
    own = load_settings({"LANNER_DATA_DIR": str(tmp_path), "LANNER_GEO_EDITIONS": "GeoIP2-ISP"})
    assert own.geo_update_editions == () and own.geo_network_paths == (tmp_path / "geo" / "GeoIP2-ISP.mmdb",)


def test_click_show_looks_the_network_facts_up_again(isp_env, start_app):
    from conftest import subid_of

    run_lanner(
        isp_env,
        "stream",
        "add",
        "net",
        "--type",
        "intercepting",
        "--offer",
        "2",
        "--filter",
        "carrier~vodafone",
    )
    app = start_app(LANNER_GEO_EDITIONS=isp_env["LANNER_GEO_EDITIONS"])
    status, headers, _ = click(app, "net", ip=VISITOR)
    assert status == 302 and headers["location"].startswith("https://mobile.example/")
    run_lanner(isp_env, "spool", "flush")
    shown = json.loads(
        run_lanner(
            isp_env, "click", "show", subid_of(headers["location"].replace("c=", "click=", 1)), "--json"
        ).stdout
    )
    assert shown["streams"][0]["filters"] == [
        {"filter": "carrier~vodafone", "passed": True, "saw": "Vodafone Libertel"}
    ]
