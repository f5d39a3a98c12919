"""Which geo facts the configured files give: GeoIP2-Enterprise's network facts (under `traits`) read as
the location file or as a network file, a city file never asked for them, and `lanner stream add|update`
warning about a geo filter no configured file can answer (the stream is still saved).

The files are MaxMind's test databases (tests/fixtures/maxmind, see its README) and tiny ones written here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import click, run_lanner, subid_of
from mmdb_writer import MMDBWriter
from netaddr import IPSet
from test_fixture_geo import FIXTURES, expected_network, load_source

from models.lookups.geo import LOCATION_FACTS, NETWORK_FACTS, GeoDatabase, GeoSource, NetworkInfo, facts_of

ENTERPRISE = FIXTURES / "GeoIP2-Enterprise-Test.mmdb"
COUNTRY = FIXTURES / "GeoIP2-Country-Test.mmdb"
CITY = FIXTURES / "GeoLite2-City-Test.mmdb"
ASN = FIXTURES / "GeoLite2-ASN-Test.mmdb"
ISP = FIXTURES / "GeoIP2-ISP-Test.mmdb"
CONNECTION = FIXTURES / "GeoIP2-Connection-Type-Test.mmdb"
ALL_FACTS = LOCATION_FACTS | NETWORK_FACTS
# In GeoIP2-Enterprise-Test: Cable/DSL (FairPoint), Corporate (Andrews & Arnold), a mobile network (Verizon).
CABLE, CORPORATE, MOBILE = "74.209.24.1", "81.2.69.161", "149.101.100.1"


@pytest.mark.parametrize(
    ("database_type", "facts"),
    [
        ("GeoIP2-Enterprise", ALL_FACTS),
        ("DBIP-Location-ISP (compat=Enterprise)", ALL_FACTS),
        ("DBIP-ISP (compat=Enterprise)", ALL_FACTS),
        ("GeoIP2-City", LOCATION_FACTS),
        ("GeoLite2-City", LOCATION_FACTS),
        ("GeoIP2-City-Europe", LOCATION_FACTS),
        ("DBIP-City-Lite", LOCATION_FACTS),
        ("DBIP-Location (compat=City)", LOCATION_FACTS),
        ("GeoIP2-Country", {"country"}),
        ("DBIP-Country-Lite", {"country"}),
        ("Lanner-Country", {"country"}),
        ("GeoLite2-ASN", {"isp"}),
        ("DBIP-ASN-Lite (compat=GeoLite2-ASN)", {"isp"}),
        ("GeoIP2-ISP", {"isp", "carrier"}),
        ("GeoIP2-Connection-Type", {"connection"}),
        ("Some-Vendor-IP-Data", ALL_FACTS),  # Not known here: never assumed to lack anything.
    ],
)
def test_each_kind_of_file_tells_what_its_type_says(database_type, facts):
    assert facts_of(database_type) == facts


@pytest.mark.parametrize(
    ("location", "network_files"),
    [(ENTERPRISE, ()), (COUNTRY, (ENTERPRISE,)), (ENTERPRISE, (ENTERPRISE,)), (CITY, (ENTERPRISE,))],
    ids=["as-location-file", "as-network-file", "as-both", "behind-a-city-file"],
)
def test_an_enterprise_file_gives_its_network_facts_however_it_is_configured(location, network_files):
    source = GeoSource(location, network_files)
    try:
        assert source.facts >= NETWORK_FACTS
        data = load_source("GeoIP2-Enterprise")
        for _, network, _ in data.networks:
            for address in dict.fromkeys((network.network_address, network.broadcast_address)):
                assert source.lookup_network(str(address)) == expected_network(data.record_at(address)), (
                    address
                )
        assert source.lookup_network(MOBILE) == NetworkInfo("Verizon Wireless", "", "Verizon Wireless")
    finally:
        source.close()


def test_the_dedicated_files_still_come_first(tmp_path):
    """An ISP file named in LANNER_GEO_EDITIONS answers before an Enterprise location file."""
    isp = write_database(tmp_path / "isp.mmdb", "GeoIP2-ISP", {"isp": "From the ISP file"}, CORPORATE)
    source = GeoSource(ENTERPRISE, (isp,))
    try:
        assert source.lookup_network(CORPORATE) == NetworkInfo("From the ISP file", "Corporate", "")
        assert source.lookup_network(CABLE) == NetworkInfo("Fairpoint Communications", "Cable/DSL", "")
    finally:
        source.close()


def write_database(path: Path, database_type: str, record: dict, ip: str) -> Path:
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type=database_type)
    writer.insert_network(IPSet([f"{ip}/32"]), record)
    writer.to_db_file(str(path))
    return path


def test_a_city_or_country_file_is_never_asked_for_network_facts(tmp_path):
    """Its record is not even read for them (it has none: a City record costs ~6 µs to decode)."""
    record = {"country": {"iso_code": "GB"}, "traits": {"isp": "Odd ISP", "connection_type": "Cellular"}}
    for database_type, answered in [
        ("GeoLite2-City", False),
        ("GeoLite2-Country", False),
        ("GeoIP2-Enterprise", True),
    ]:
        path = write_database(tmp_path / f"{database_type}.mmdb", database_type, record, CABLE)
        with GeoDatabase(path) as database:
            assert database.network(CABLE) == NetworkInfo("Odd ISP", "Cellular", "")  # The reader reads it...
        source = GeoSource(path)
        try:
            # ...GeoSource asks only a file whose type has network facts.
            assert (source.lookup_network(CABLE) != NetworkInfo()) is answered, database_type
            assert bool(source.facts & NETWORK_FACTS) is answered
        finally:
            source.close()


def test_the_files_facts_follow_what_is_open(tmp_path):
    missing = tmp_path / "none.mmdb"
    assert GeoSource(missing).facts == frozenset()
    assert GeoSource(COUNTRY).facts == {"country"}
    assert GeoSource(CITY, (missing,)).facts == LOCATION_FACTS
    assert GeoSource(COUNTRY, (ASN, CONNECTION)).facts == {"country", "isp", "connection"}
    assert GeoSource(missing, (ISP,)).facts == {"isp", "carrier"}
    # A network file's location facts do not count: only the location file places a click.
    assert GeoSource(missing, (ENTERPRISE,)).facts == NETWORK_FACTS


# --- the click path, the CLI ------------------------------------------------------------------------------


@pytest.fixture(params=["location-file", "network-file"])
def enterprise_env(request, env, data_dir, db):
    """GeoIP2-Enterprise as LANNER_GEO_DATABASE, or named in LANNER_GEO_EDITIONS
    (DATA_DIR/geo/EDITION.mmdb)."""
    if request.param == "location-file":
        configured = {**env, "LANNER_GEO_DATABASE": str(ENTERPRISE)}
    else:
        (data_dir / "geo").mkdir(parents=True, exist_ok=True)
        shutil.copy(ENTERPRISE, data_dir / "geo" / "GeoIP2-Enterprise.mmdb")
        shutil.copy(COUNTRY, data_dir / "geo" / "country.mmdb")  # The default location file.
        configured = {**env, "LANNER_GEO_EDITIONS": "GeoIP2-Enterprise"}
    run_lanner(configured, "offer", "create", "Main", "--url", "https://main.example/?click={subid}")
    run_lanner(configured, "offer", "create", "Routed", "--url", "https://routed.example/?click={subid}")
    run_lanner(configured, "campaign", "create", "Net", "--alias", "net", "--offer-id", "1")
    return configured


@pytest.mark.parametrize(
    ("expression", "routed_ip", "other_ip"),
    [
        ("connection=Cable/DSL", CABLE, CORPORATE),
        ("isp~andrews", CORPORATE, CABLE),
        ("carrier~verizon", MOBILE, CABLE),
        ("connection=unknown", "175.16.199.1", CABLE),  # In the file, without network facts.
    ],
)
def test_clicks_route_on_an_enterprise_files_network_facts(
    enterprise_env, start_app, expression, routed_ip, other_ip
):
    added = run_lanner(
        enterprise_env,
        "stream",
        "add",
        "net",
        "--type",
        "intercepting",
        "--offer",
        "2",
        "--filter",
        expression,
    )
    assert added.stderr == ""  # The files answer it: no warning.
    app = start_app(**{k: v for k, v in enterprise_env.items() if k.startswith("LANNER_GEO_")})
    assert click(app, "net", ip=routed_ip)[1]["location"].startswith("https://routed.example/")
    assert click(app, "net", ip=other_ip)[1]["location"].startswith("https://main.example/")
    simulated = json.loads(run_lanner(enterprise_env, "simulate", "/net", "--ip", routed_ip, "--json").stdout)
    assert simulated["decision"]["offer_id"] == 2


def test_geo_lookup_and_click_show_read_an_enterprise_file(enterprise_env, start_app):
    looked_up = run_lanner(enterprise_env, "geo", "lookup", MOBILE).stdout
    assert "isp='Verizon Wireless'" in looked_up and "carrier='Verizon Wireless'" in looked_up
    run_lanner(
        enterprise_env,
        "stream",
        "add",
        "net",
        "--type",
        "intercepting",
        "--offer",
        "2",
        "--filter",
        "connection=Cable/DSL",
    )
    app = start_app(**{k: v for k, v in enterprise_env.items() if k.startswith("LANNER_GEO_")})
    _status, headers, _ = click(app, "net", ip=CABLE)
    run_lanner(enterprise_env, "spool", "flush")
    shown = json.loads(
        run_lanner(enterprise_env, "click", "show", subid_of(headers["location"]), "--json").stdout
    )
    assert shown["streams"][0]["filters"] == [
        {"filter": "connection=Cable/DSL", "passed": True, "saw": "Cable/DSL"}
    ]


# --- warnings for filters the files cannot answer ---------------------------------------------------------


@pytest.fixture
def campaign_env(env, db):
    run_lanner(env, "offer", "create", "Main", "--url", "https://main.example/?click={subid}")
    run_lanner(env, "campaign", "create", "Geo", "--alias", "geo", "--offer-id", "1")
    return env


def add_stream(environ: dict[str, str], *filters: str):
    args = [arg for expression in filters for arg in ("--filter", expression)]
    return run_lanner(environ, "stream", "add", "geo", "--offer", "1", *args)


def warnings_of(result) -> list[str]:
    lines = result.stderr.splitlines()
    assert all(line.startswith("Warning: ") for line in lines), result.stderr
    return lines


def saved_filters(environ: dict[str, str], stream_id: str) -> str:
    rows = json.loads(run_lanner(environ, "stream", "list", "geo", "--json").stdout)
    return next(row["filters"] for row in rows if str(row["id"]) == stream_id)


def test_without_geo_files_each_geo_filter_warns_and_the_stream_is_saved(campaign_env):
    added = add_stream(
        campaign_env,
        "country=GB",
        "city=London",
        "isp~vodafone",
        "connection=Cellular",
        "carrier~vodafone",
        "device=mobile",
    )
    stream_id = added.stdout.strip()
    assert stream_id.isdigit()
    warnings = warnings_of(added)
    assert [line.split("'s ")[1].split(" filter")[0] for line in warnings] == [
        "country",
        "city",
        "isp",
        "connection",
        "carrier",
    ]
    assert warnings[0] == (
        f"Warning: Stream {stream_id}'s country filter sees every click's country as unknown: there is no "
        f"geo database; run `lanner geo build` or set LANNER_GEO_DATABASE."
    )
    assert "there is no geo database" in warnings[1]
    assert "no geo file gives ISPs" in warnings[2] and "GeoLite2-ASN" in warnings[2]
    assert all("LANNER_GEO_EDITIONS" in line for line in warnings[2:])
    assert "GeoIP2-Connection-Type" in warnings[3] and "GeoIP2-ISP" in warnings[4]
    assert saved_filters(campaign_env, stream_id) == (
        "country=GB AND city=London AND isp~vodafone AND connection=Cellular "
        "AND carrier~vodafone AND device=mobile"
    )


def test_a_country_only_database_warns_for_region_and_city(campaign_env):
    country_only = {**campaign_env, "LANNER_GEO_DATABASE": str(COUNTRY)}
    warnings = warnings_of(add_stream(country_only, "country=GB", "region=ENG", "city=London"))
    assert len(warnings) == 2
    assert "region filter" in warnings[0] and "city filter" in warnings[1]
    assert all("the geo database has countries only; set LANNER_GEO_DATABASE" in line for line in warnings)


def test_files_that_answer_a_filter_give_no_warning(campaign_env, data_dir):
    geo_dir = data_dir / "geo"
    geo_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(ASN, geo_dir / "GeoLite2-ASN.mmdb")
    with_asn = {**campaign_env, "LANNER_GEO_DATABASE": str(CITY), "LANNER_GEO_EDITIONS": "GeoLite2-ASN"}
    added = add_stream(with_asn, "country=GB", "region=ENG", "city=London", "isp~telstra", "carrier~telstra")
    assert [line.split("'s ")[1].split(" filter")[0] for line in warnings_of(added)] == ["carrier"]
    enterprise = {**campaign_env, "LANNER_GEO_DATABASE": str(ENTERPRISE)}
    every = add_stream(
        enterprise, "country=GB", "region=ENG", "city=London", "isp~a", "connection=Cellular", "carrier~a"
    )
    assert every.stderr == ""


def test_a_network_file_named_but_not_there_yet_warns(campaign_env):
    named = {**campaign_env, "LANNER_GEO_EDITIONS": "GeoIP2-Connection-Type"}
    (warning,) = warnings_of(add_stream(named, "connection=Cellular"))
    assert "no geo file gives connection types; name GeoIP2-Connection-Type in LANNER_GEO_EDITIONS" in warning


def test_stream_update_warns_when_it_sets_such_a_filter(campaign_env):
    stream_id = add_stream(campaign_env).stdout.strip()
    updated = run_lanner(campaign_env, "stream", "update", stream_id, "--filter", "isp~vodafone")
    assert updated.stdout.strip() == f"Stream {stream_id} updated."
    (warning,) = warnings_of(updated)
    assert f"Stream {stream_id}'s isp filter" in warning
    assert saved_filters(campaign_env, stream_id) == "isp~vodafone"
    # A change that leaves the filters alone says nothing about them.
    assert run_lanner(campaign_env, "stream", "update", stream_id, "--weight", "5").stderr == ""
