"""Lanner's geo lookups against MaxMind's own test databases (tests/fixtures/maxmind, from
maxmind/MaxMind-DB).

For every network of a file's source JSON, its first and last address go through `GeoDatabase` (an IPv4
address also as `::ffff:a.b.c.d`, the way a dual-stack socket reports it). The expected answer is worked
out here from the JSON alone: the record of the last listed network holding the address (MaxMind's writer
inserts the networks in order, a later one replacing an earlier one where they overlap), read the way
GeoInfo and NetworkInfo document their fields. Run with `-s` to see the counts.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from models.lookups.geo import GeoDatabase, GeoInfo, NetworkInfo

FIXTURES = Path(__file__).parent / "fixtures" / "maxmind"

# name -> entries in its source JSON (a guard against a fixture emptied or swapped by mistake).
LOCATION_FILES = {
    "GeoIP2-Country": 345,
    "GeoIP2-City": 251,  # 250 networks: ::216.160.83.56/125 is listed twice, with the same record.
    "GeoLite2-Country": 244,
    "GeoLite2-City": 242,
    "GeoIP2-Enterprise": 34,
}
NETWORK_FILES = {
    "GeoIP2-ISP": 2109,
    "GeoIP2-Connection-Type": 25,
    "GeoLite2-ASN": 720,
    "GeoIP2-Enterprise": 34,
}

# (file, lookup, network as its JSON lists it) where Lanner answers otherwise than the data; compared
# exactly, so a new miss fails and so does a fixed one (then drop it here). None at MaxMind-DB 2f18851d:
# the 18 GeoIP2-Enterprise networks once listed here (their isp / AS organisation / connection type /
# mobile network code are under `traits`, which GeoDatabase.network now reads too) agree.
KNOWN_MISSES: set[tuple[str, str, str]] = set()

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class SourceData:
    """One source JSON: (JSON key, network, record) in insertion order, a network listed twice once with
    its later record and place; `record_at` finds the record an address ends up with."""

    entries: int
    networks: list[tuple[str, Network, dict[str, Any]]]
    position: dict[tuple[int, int, int], int]
    prefix_lengths: dict[int, list[int]]

    def record_at(self, address: Address) -> dict[str, Any]:
        bits, value = address.max_prefixlen, int(address)
        holders = [
            self.position.get((address.version, value >> (bits - length) << (bits - length), length), -1)
            for length in self.prefix_lengths[address.version]
        ]
        return self.networks[max(holders)][2]


def _network(key: str) -> Network:
    """A JSON key as the network a click's address falls in: `::a.b.c.d/(96+n)` is IPv4 a.b.c.d/n."""
    network = ipaddress.ip_network(key, strict=False)
    if network.version == 6 and network.prefixlen >= 96 and int(network.network_address) >> 32 == 0:
        network = ipaddress.ip_network((int(network.network_address), network.prefixlen - 96))
    return network


def load_source(name: str) -> SourceData:
    rows = json.loads(gzip.decompress((FIXTURES / f"{name}-Test.json.gz").read_bytes()))
    listed = [(key, _network(key), record) for row in rows for key, record in row.items()]
    last = {network: index for index, (_, network, _) in enumerate(listed)}
    networks = [entry for index, entry in enumerate(listed) if last[entry[1]] == index]
    position = {
        (network.version, int(network.network_address), network.prefixlen): index
        for index, (_, network, _) in enumerate(networks)
    }
    lengths: dict[int, set[int]] = {4: set(), 6: set()}
    for _, network, _ in networks:
        lengths[network.version].add(network.prefixlen)
    return SourceData(len(listed), networks, position, {v: sorted(found) for v, found in lengths.items()})


def _english(entry: Any) -> str:
    return entry.get("names", {}).get("en", "") if isinstance(entry, dict) else ""


def expected_location(record: dict[str, Any]) -> GeoInfo:
    """country: `country.iso_code` (not registered_country); region: the first subdivision's code, else its
    English name; city: the English name."""
    subdivision = (record.get("subdivisions") or [{}])[0]
    return GeoInfo(
        record.get("country", {}).get("iso_code", "").upper(),
        subdivision.get("iso_code", "").upper() or _english(subdivision),
        _english(record.get("city")),
    )


def expected_network(record: dict[str, Any]) -> NetworkInfo:
    """isp: `isp`, else the AS organisation; carrier: the isp when a mobile network code is given; at the
    record's top level (GeoIP2-ISP, GeoLite2-ASN, GeoIP2-Connection-Type) or under `traits` (Enterprise)."""
    facts = {**record.get("traits", {}), **record}
    isp = facts.get("isp") or facts.get("autonomous_system_organization") or ""
    return NetworkInfo(isp, facts.get("connection_type", ""), isp if facts.get("mobile_network_code") else "")


@dataclass
class Comparison:
    networks: int = 0
    lookups: int = 0
    agreeing: int = 0
    # (file, lookup, JSON key) -> [(address looked up, expected, got)]
    misses: dict[tuple[str, str, str], list[tuple[str, Any, Any]]] | None = None


def compare(name: str, kind: str, mmdb_name: str | None = None) -> Comparison:
    """Look every source network of `name` up in the `.mmdb` file `mmdb_name` (by default its own)."""
    source = load_source(name)
    expect = expected_location if kind == "location" else expected_network
    result = Comparison(networks=len(source.networks), misses={})
    with GeoDatabase(FIXTURES / f"{mmdb_name or name}-Test.mmdb") as database:
        assert database.database_type == (mmdb_name or name)
        answer = database.lookup if kind == "location" else database.network
        for key, network, _ in source.networks:
            for address in dict.fromkeys((network.network_address, network.broadcast_address)):
                wanted = expect(source.record_at(address))
                for text in [str(address)] + ([f"::ffff:{address}"] if address.version == 4 else []):
                    got = answer(text)
                    result.lookups += 1
                    if got == wanted:
                        result.agreeing += 1
                    else:
                        result.misses.setdefault((name, kind, key), []).append((text, wanted, got))
    return result


def _check(name: str, kind: str, entries: int) -> None:
    result = compare(name, kind)
    print(
        f"\n{name} ({kind}): {result.agreeing}/{result.lookups} lookups agree, "
        f"over {result.networks} networks"
    )
    for (_, _, key), lookups in result.misses.items():
        for text, wanted, got in lookups:
            print(f"  miss {key}: {text} expected {wanted}, got {got}")
    assert load_source(name).entries == entries
    assert set(result.misses) == {known for known in KNOWN_MISSES if known[:2] == (name, kind)}
    assert result.agreeing + sum(len(lookups) for lookups in result.misses.values()) == result.lookups


@pytest.mark.parametrize("name", list(LOCATION_FILES))
def test_location_lookups_match_maxminds_test_databases(name):
    _check(name, "location", LOCATION_FILES[name])


@pytest.mark.parametrize("name", list(NETWORK_FILES))
def test_network_lookups_match_maxminds_test_databases(name):
    _check(name, "network", NETWORK_FILES[name])


def test_the_source_data_exercises_every_field():
    """The comparisons above are not vacuous: the files give regions, cities, ISPs, carriers, connection
    types, and networks with no country (registered_country or traits only)."""
    seen: set[str] = set()
    for name in LOCATION_FILES:
        for _, _, record in load_source(name).networks:
            info = expected_location(record)
            seen |= {field for field in ("country", "region", "city") if getattr(info, field)}
            if not info.country:
                seen.add("no country")
    for name in NETWORK_FILES:
        for _, _, record in load_source(name).networks:
            info = expected_network(record)
            seen |= {field for field in ("isp", "connection", "carrier") if getattr(info, field)}
    assert seen == {"country", "region", "city", "no country", "isp", "connection", "carrier"}


def test_the_comparison_sees_a_wrong_answer():
    """City expectations looked up in the Country file: the regions and cities it lacks are misses."""
    result = compare("GeoIP2-City", "location", mmdb_name="GeoIP2-Country")
    assert result.misses and result.agreeing < result.lookups
    assert all(got.city == "" for lookups in result.misses.values() for _, _, got in lookups)
