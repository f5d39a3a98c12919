"""Geo lookup against real `.mmdb` files: tiny ones written here in MaxMind's layout, and the country file
built from geoip2fast's bundled data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mmdb_writer import MMDBWriter
from netaddr import IPSet

from models.lookups.geo import (
    DEFAULT_GEO_FILENAME,
    UNKNOWN_GEO,
    GeoDatabase,
    GeoDatabaseError,
    GeoInfo,
    GeoSource,
    build_country_database,
    open_geo_database,
)

LONDON = {
    "continent": {"code": "EU", "geoname_id": 6255148, "names": {"en": "Europe"}},
    "country": {"iso_code": "GB", "geoname_id": 2635167, "names": {"en": "United Kingdom", "de": "UK"}},
    "subdivisions": [{"iso_code": "ENG", "names": {"en": "England"}}],
    "city": {"geoname_id": 2643743, "names": {"en": "London", "ru": "Лондон"}},
    "location": {"latitude": 51.5142, "longitude": -0.0931, "accuracy_radius": 10},
}
BERLIN = {
    "country": {"iso_code": "DE", "names": {"en": "Germany"}},
    "subdivisions": [{"iso_code": "BE", "names": {"en": "Land Berlin"}}, {"iso_code": "X"}],
    "city": {"names": {"en": "Berlin"}},
}
SWEDEN_ONLY = {"country": {"iso_code": "SE", "names": {"en": "Sweden"}}}
VICTORIA_NO_CODE = {"country": {"iso_code": "au"}, "subdivisions": [{"names": {"en": "Victoria"}}]}
ODD_SHAPES = {"country": "US", "subdivisions": "CA", "city": {"names": ["Springfield"]}}


def write_city_database(path: Path, ip_version: int = 6) -> Path:
    writer = MMDBWriter(
        ip_version=ip_version,
        ipv4_compatible=ip_version == 6,
        database_type="GeoLite2-City",
        languages=["en"],
        description={"en": "GeoLite2 City test database"},
    )
    writer.insert_network(IPSet(["81.2.69.0/24"]), LONDON)
    writer.insert_network(IPSet(["89.160.20.0/24"]), SWEDEN_ONLY)
    writer.insert_network(IPSet(["1.128.0.0/11"]), VICTORIA_NO_CODE)
    writer.insert_network(IPSet(["198.51.100.0/24"]), ODD_SHAPES)
    writer.insert_network(IPSet(["192.0.2.0/24"]), "not a map")
    if ip_version == 6:
        writer.insert_network(IPSet(["2a02:ff0::/32"]), BERLIN)
    writer.to_db_file(str(path))
    return path


@pytest.fixture
def city_db(tmp_path: Path):
    db = GeoDatabase(write_city_database(tmp_path / "city.mmdb"))
    yield db
    db.close()


def test_ipv4_with_country_region_and_city(city_db):
    assert city_db.lookup("81.2.69.160") == GeoInfo("GB", "ENG", "London")


def test_ipv6_with_country_region_and_city(city_db):
    assert city_db.lookup("2a02:ff0:1:2::3") == GeoInfo("DE", "BE", "Berlin")


def test_ipv4_mapped_ipv6_address_is_looked_up_as_ipv4(city_db):
    assert city_db.lookup("::ffff:81.2.69.160") == GeoInfo("GB", "ENG", "London")
    assert city_db.lookup("::FFFF:81.2.69.160") == GeoInfo("GB", "ENG", "London")


def test_country_only_record_gives_country_only(city_db):
    assert city_db.lookup("89.160.20.112") == GeoInfo("SE", "", "")


def test_region_falls_back_to_english_name_and_country_is_upper_cased(city_db):
    assert city_db.lookup("1.128.0.1") == GeoInfo("AU", "Victoria", "")


def test_unexpected_record_shapes_answer_unknown(city_db):
    assert city_db.lookup("198.51.100.7") is UNKNOWN_GEO
    assert city_db.lookup("192.0.2.1") is UNKNOWN_GEO


@pytest.mark.parametrize(
    "ip",
    [
        "10.1.1.1",  # private
        "127.0.0.1",  # loopback
        "fe80::1",  # link-local
        "8.8.8.8",  # public, not in this file
        "2001:4860:4860::8888",  # IPv6 not in this file
    ],
)
def test_addresses_not_in_the_file_are_unknown(city_db, ip):
    assert city_db.lookup(ip) is UNKNOWN_GEO


INVALID_TEXT = ["", "not-an-ip", "81.2.69", "81.2.69.300", "081.2.69.160", "0x51.2.69.160", " 81.2.69.160"]
INVALID_TEXT += [
    "81.2.69.0/24",
    "::ffff:81.2.69",
    "\x00",
    "８１.２.６９.１６０",
    "2a02:ff0::1::2",
    "x" * 10_000,
]


@pytest.mark.parametrize("text", INVALID_TEXT)
def test_invalid_text_is_unknown(city_db, text):
    assert city_db.lookup(text) is UNKNOWN_GEO


def test_ipv6_in_an_ipv4_only_file_is_unknown(tmp_path):
    with GeoDatabase(write_city_database(tmp_path / "v4.mmdb", ip_version=4)) as db:
        assert db.lookup("81.2.69.160").country == "GB"
        assert db.lookup("2a02:ff0::1") is UNKNOWN_GEO


def test_lookup_after_close_is_unknown(tmp_path):
    db = GeoDatabase(write_city_database(tmp_path / "city.mmdb"))
    db.close()
    assert db.lookup("81.2.69.160") is UNKNOWN_GEO


def test_path_and_description_report_the_file(city_db, tmp_path):
    assert city_db.path == tmp_path / "city.mmdb"
    assert city_db.description.startswith("GeoLite2-City (GeoLite2 City test database), built 2")
    assert str(city_db.built_at.date()) in city_db.description


def test_missing_file_opens_as_none(tmp_path):
    assert open_geo_database(tmp_path / "geo" / DEFAULT_GEO_FILENAME) is None


@pytest.mark.parametrize("content", [b"", b"not a maxmind database\n" * 100, os.urandom(4096)])
def test_corrupt_file_raises_one_sentence_naming_the_file(tmp_path, content):
    path = tmp_path / "broken.mmdb"
    path.write_bytes(content)
    with pytest.raises(GeoDatabaseError) as raised:
        open_geo_database(path)
    message = str(raised.value)
    assert str(path) in message
    assert message.endswith(".") and "\n" not in message
    assert isinstance(raised.value, ValueError)


def test_truncated_file_raises(tmp_path):
    good = write_city_database(tmp_path / "city.mmdb").read_bytes()
    path = tmp_path / "truncated.mmdb"
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(GeoDatabaseError, match="truncated.mmdb"):
        open_geo_database(path)


@pytest.mark.long
def test_build_country_database_from_bundled_data(tmp_path):
    geo_dir = tmp_path / "geo"
    geo_dir.mkdir()
    dest = geo_dir / DEFAULT_GEO_FILENAME
    write_city_database(dest)  # An older file that a worker still has open.
    old = open_geo_database(dest)
    calls: list[tuple[int, int]] = []

    written = build_country_database(dest, lambda done, total: calls.append((done, total)))

    assert written > 700_000
    assert sorted(os.listdir(geo_dir)) == [DEFAULT_GEO_FILENAME]  # No temporary file left behind.
    assert 10 <= len(calls) <= 500
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (written, written)
    # Replaced, not rewritten in place: the open reader still sees the old file.
    assert old.lookup("81.2.69.160") == GeoInfo("GB", "ENG", "London")
    old.close()

    with open_geo_database(dest) as db:
        assert db.description.startswith("Lanner-Country (MAXMIND:GeoLite2-Country")
        assert db.lookup("8.8.8.8") == GeoInfo("US")
        assert db.lookup("81.2.69.160") == GeoInfo("GB")
        assert db.lookup("2a03:2880:f003:c07:face:b00c::2") == GeoInfo("US")
        assert db.lookup("::ffff:8.8.8.8") == GeoInfo("US")
        for private in ("10.1.1.1", "192.168.0.1", "172.16.5.4", "127.0.0.1", "100.64.0.1", "fd00::1", "::1"):
            assert db.lookup(private) is UNKNOWN_GEO, private
    assert (dest.stat().st_mode & 0o777) == 0o644


def test_geo_source_switches_to_a_replaced_file_and_keeps_the_old_one_on_a_bad_one(tmp_path):
    path = tmp_path / "geo" / DEFAULT_GEO_FILENAME
    source = GeoSource(path)
    assert source.database is None and source.lookup("81.2.69.160") == UNKNOWN_GEO
    path.parent.mkdir()
    write_city_database(path)
    assert source.refresh() is True and source.lookup("81.2.69.160").city == "London"
    assert source.refresh() is False  # Unchanged: nothing reopened.
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoLite2-Country")
    writer.insert_network(IPSet(["81.2.69.0/24"]), {"country": {"iso_code": "IE"}})
    writer.to_db_file(str(tmp_path / "new.mmdb"))
    os.replace(tmp_path / "new.mmdb", path)  # How an update lands: atomically.
    assert source.refresh() is True and source.lookup("81.2.69.160") == GeoInfo("IE")
    (tmp_path / "broken.mmdb").write_bytes(b"not a database")
    os.replace(tmp_path / "broken.mmdb", path)
    assert source.refresh() is False and source.lookup("81.2.69.160") == GeoInfo("IE")
    source.close()
