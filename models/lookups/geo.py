"""Geo lookup: the country, region and city of an IP from a MaxMind DB (`.mmdb`) file.

`open_geo_database(path)` opens one file per worker process and `GeoDatabase.lookup(ip)` answers a
`GeoInfo` for every click without ever raising; `GeoDatabase.network(ip)` reads the ISP / AS organisation,
connection type and mobile carrier of the ISP, ASN, connection-type and Enterprise files (`NetworkInfo`).
One reader understands MaxMind's GeoLite2/GeoIP2 files, DB-IP's files (same layout) and the country file
`build_country_database` makes from the data bundled in the `geoip2fast` package, so Lanner has country
routing with no download or account.

The file is memory-mapped (`MODE_MMAP_EXT`), so the workers share the page cache instead of each holding a
copy, and replacing the file (`os.replace`) never disturbs a reader that still has the old one open.
"""

from __future__ import annotations

import datetime
import gzip
import importlib.util
import itertools
import logging
import os
import pickle
import re
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import maxminddb
from maxminddb import InvalidDatabaseError

from models.errors import LannerError

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_GEO_FILENAME",
    "UNKNOWN_GEO",
    "GeoDatabase",
    "GeoDatabaseError",
    "GeoInfo",
    "GeoSource",
    "LOCATION_FACTS",
    "NETWORK_FACTS",
    "NetworkInfo",
    "UNKNOWN_NETWORK",
    "build_country_database",
    "facts_of",
    "open_geo_database",
]

DEFAULT_GEO_FILENAME = "country.mmdb"
COUNTRY_DATABASE_TYPE = "Lanner-Country"

_IPV4_MAPPED_PREFIX = "::ffff:"
_BITS = 128  # The built file is an IPv6 tree; IPv4 lives at ::/96 (ipv4_compatible), where readers look.
_IPV4_SPACE = 1 << 32
_PROGRESS_STEPS = 200


class GeoDatabaseError(LannerError, ValueError):
    """A geo database file that cannot be used; the message is one sentence naming the file."""


@dataclass(frozen=True, slots=True)
class GeoInfo:
    """Where an IP is; "" means unknown. `country` is ISO 3166-1 alpha-2, upper-case ("US")."""

    country: str = ""
    region: str = ""
    city: str = ""


UNKNOWN_GEO = GeoInfo()


@dataclass(frozen=True, slots=True)
class NetworkInfo:
    """Who carries an IP's traffic; "" means unknown (or the databases do not say).

    `isp`: the ISP (GeoIP2-ISP) or, failing that, the AS organisation (GeoLite2-ASN, DB-IP asn-lite);
    `connection`: GeoIP2-Connection-Type's (or DB-IP's) connection type ("Cellular", "Cable/DSL"...);
    `carrier`: the ISP's name when the record carries a mobile network code (GeoIP2-ISP), else "".
    GeoIP2-Enterprise has all three, under the record's `traits`.
    """

    isp: str = ""
    connection: str = ""
    carrier: str = ""


UNKNOWN_NETWORK = NetworkInfo()
_BUNDLED_DATA_DATE = re.compile(r"-(20[0-9]{6}) via geoip2fast")

LOCATION_FACTS = frozenset({"country", "region", "city"})
NETWORK_FACTS = frozenset({"isp", "connection", "carrier"})
_ALL_FACTS = LOCATION_FACTS | NETWORK_FACTS
_COMPAT = re.compile(r"\(compat=([^)]*)\)")


def facts_of(database_type: str) -> frozenset[str]:
    """What a file of this database type can tell (of LOCATION_FACTS and NETWORK_FACTS); all of it for a
    type not known here.

    By name, because a file's metadata does not list its fields (MaxMind's readers choose by name too).
    Country files: the country; City files: country, region and city (MaxMind's City databases carry no
    ISP traits); GeoLite2-ASN / DB-IP asn-lite: the AS organisation as the isp; GeoIP2-ISP: the isp and
    the mobile codes that make a carrier; GeoIP2-Connection-Type: the connection; GeoIP2-Enterprise (and
    DB-IP's "... (compat=Enterprise)" files): all of them. A DB-IP type names the layout it copies in
    `(compat=...)`, and that decides.
    """
    name = database_type.lower()
    compat = _COMPAT.search(name)
    if compat:
        name = compat.group(1)
    if "enterprise" in name:
        return _ALL_FACTS
    if "country" in name:
        return frozenset({"country"})
    if "city" in name:
        return LOCATION_FACTS
    if "connection" in name:
        return frozenset({"connection"})
    if "isp" in name:
        return frozenset({"isp", "carrier"})
    if "asn" in name:
        return frozenset({"isp"})
    return _ALL_FACTS


def _has_mmap_extension() -> bool:
    try:
        from maxminddb import extension
    except ImportError:
        return False
    return hasattr(extension, "Reader")


class GeoDatabase:
    """One open `.mmdb` file. Share it within a process; open it after fork."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # The C reader maps the file and decodes records in C; the pure-Python MODE_MMAP still shares pages.
        mode = maxminddb.MODE_MMAP_EXT if _has_mmap_extension() else maxminddb.MODE_MMAP
        try:
            self._reader = maxminddb.open_database(os.fspath(self.path), mode)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise GeoDatabaseError(
                f"The geo database {self.path} cannot be read ({_reason(error)})."
            ) from None
        except (InvalidDatabaseError, ValueError):
            # InvalidDatabaseError for garbage and truncated files, ValueError for an empty one (pure Python).
            raise GeoDatabaseError(
                f"The geo database {self.path} is not a valid MaxMind DB (.mmdb) file (damaged, truncated "
                "or another format)."
            ) from None
        metadata = self._reader.metadata()
        self.database_type: str = str(metadata.database_type)
        self.facts: frozenset[str] = facts_of(self.database_type)
        self.has_network_facts: bool = bool(self.facts & NETWORK_FACTS)
        self.ip_version: int = int(metadata.ip_version)
        self.built_at = datetime.datetime.fromtimestamp(int(metadata.build_epoch), datetime.UTC)
        about = (metadata.description or {}).get("en", "") if isinstance(metadata.description, dict) else ""
        # The file `lanner geo build` makes is built today from data of another day: the data's date is
        # the one its description carries (GeoLite2-Country-...-20240618 via geoip2fast).
        bundled = _BUNDLED_DATA_DATE.search(about)
        self.data_date: datetime.datetime = self.built_at
        if bundled:
            self.data_date = datetime.datetime.strptime(bundled.group(1), "%Y%m%d").replace(
                tzinfo=datetime.UTC
            )
        self.description = (
            f"{self.database_type}" + (f" ({about})" if about else "") + f", built {self.built_at.date()}"
        )

    def lookup(self, ip: str) -> GeoInfo:
        """The location of `ip` (IPv4 or IPv6 text); UNKNOWN_GEO or partial info when the file says less.

        Never raises: invalid text, private and reserved addresses, addresses not in the file, an IPv6
        address in an IPv4-only file and records of an unexpected shape all answer what is known.
        """
        try:
            if ":" in ip:
                if ip[:7].lower() == _IPV4_MAPPED_PREFIX and "." in ip:
                    # A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d; MaxMind's files alias that
                    # range to the IPv4 tree, a built file does not, so look the IPv4 address up directly.
                    ip = ip[7:]
                    socket.inet_pton(socket.AF_INET, ip)
            else:
                # PERF: inet_pton (~0.3 µs) rejects the legacy forms ("1.2.3", "010.1.1.1", "0x7f.1") that
                # the reader's getaddrinfo would quietly turn into some other address.
                socket.inet_pton(socket.AF_INET, ip)
            record = self._reader.get(ip)
        except (OSError, ValueError, TypeError, RuntimeError):
            # OSError: inet_pton; ValueError: not an address, IPv6 in an IPv4 file, closed reader;
            # TypeError: not a str or an embedded NUL; RuntimeError: InvalidDatabaseError from a damaged file.
            return UNKNOWN_GEO
        if record is None:
            return UNKNOWN_GEO
        return geo_from_record(record)

    def network(self, ip: str) -> NetworkInfo:
        """The ISP / AS organisation, connection type and mobile carrier of `ip`; never raises."""
        try:
            if ip[:7].lower() == _IPV4_MAPPED_PREFIX and "." in ip:
                ip = ip[7:]
            elif ":" not in ip:
                socket.inet_pton(socket.AF_INET, ip)
            record = self._reader.get(ip)
        except (OSError, ValueError, TypeError, RuntimeError):
            return UNKNOWN_NETWORK
        if not isinstance(record, dict):
            return UNKNOWN_NETWORK
        isp = _text(record.get("isp")) or _text(record.get("autonomous_system_organization"))
        connection = _text(record.get("connection_type"))
        mobile_network = _text(record.get("mobile_network_code"))
        traits = record.get("traits")
        if isinstance(traits, dict):
            # GeoIP2-Enterprise (and DB-IP's Enterprise-compatible files) keep the same fields under `traits`.
            isp = isp or _text(traits.get("isp")) or _text(traits.get("autonomous_system_organization"))
            connection = connection or _text(traits.get("connection_type"))
            mobile_network = mobile_network or _text(traits.get("mobile_network_code"))
        if not (isp or connection):
            return UNKNOWN_NETWORK
        return NetworkInfo(isp, connection, isp if mobile_network else "")

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> GeoDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GeoDatabase({str(self.path)!r}, {self.description!r})"


_COUNTRY_ONLY: dict[str, GeoInfo] = {}


def geo_from_record(record: Any) -> GeoInfo:
    """Read the MaxMind layout (`country.iso_code`, `subdivisions[0]`, `city.names.en`) defensively."""
    if not isinstance(record, dict):
        return UNKNOWN_GEO
    if len(record) == 1:
        # PERF: a country-only record (the built database, GeoLite2-Country): one shared GeoInfo per
        # country instead of a new one per click (~1 µs instead of ~6).
        code = _iso_code(record.get("country"))
        info = _COUNTRY_ONLY.get(code)
        if info is None:
            info = GeoInfo(code.upper()) if code else UNKNOWN_GEO
            if len(_COUNTRY_ONLY) < 1024:
                _COUNTRY_ONLY[code] = info
        return info
    country = _iso_code(record.get("country")).upper()
    region = ""
    subdivisions = record.get("subdivisions")
    if isinstance(subdivisions, list) and subdivisions:
        region = _iso_code(subdivisions[0]).upper() or _english_name(subdivisions[0])
    city = _english_name(record.get("city"))
    if not (country or region or city):
        return UNKNOWN_GEO
    return GeoInfo(country, region, city)


def _iso_code(entry: Any) -> str:
    if isinstance(entry, dict):
        code = entry.get("iso_code")
        if isinstance(code, str):
            return code
    return ""


def _english_name(entry: Any) -> str:
    if isinstance(entry, dict):
        names = entry.get("names")
        if isinstance(names, dict):
            name = names.get("en")
            if isinstance(name, str):
                return name
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


def open_geo_database(path: str | os.PathLike[str]) -> GeoDatabase | None:
    """Open the geo file at `path`; None when there is no such file (geo routing is then off).

    Raises GeoDatabaseError when the file exists but is not a usable `.mmdb` file.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        return GeoDatabase(path)
    except FileNotFoundError:
        return None  # Removed between the check and the open.


def _names_same_file(path: str | os.PathLike[str], others: tuple[str | os.PathLike[str], ...]) -> bool:
    real = os.path.realpath(path)
    return any(os.path.realpath(other) == real for other in others)


class WatchedDatabase:
    """One `.mmdb` file a long-running process reads, reopened when it is replaced on disk.

    A `lanner geo update` or `lanner geo build` replaces the file (atomically): `refresh()` notices the new
    inode or mtime (one stat()) and switches to it, so no restart is needed. A missing or broken new file
    leaves the open one in use, with a warning.
    """

    __slots__ = ("path", "database", "_stamp")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.database: GeoDatabase | None = None
        self._stamp: tuple[int, int] | None = None
        self.refresh()

    def refresh(self) -> bool:
        """Reopen the file if it changed; True when a (new) file was opened."""
        try:
            stat = self.path.stat()
        except OSError:
            return False
        stamp = (stat.st_ino, stat.st_mtime_ns)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            database = GeoDatabase(self.path)
        except (GeoDatabaseError, OSError) as exc:
            logger.warning("Keeping the geo database in use: %s", exc)
            return False
        previous, self.database = self.database, database
        if previous is not None:
            previous.close()
        return True

    def close(self) -> None:
        if self.database is not None:
            self.database.close()


class GeoSource:
    """The geo files a long-running process reads: the location file every click looks up, and the
    ISP / ASN / connection-type files (`network_paths`) looked up only for a campaign that filters on them.

    A location file that has network facts too (GeoIP2-Enterprise) answers them after the network files;
    a country or city file is never asked (facts_of), so it costs a network lookup nothing.
    A web worker calls `refresh()` about four times a second (ClickTracker.refresh): a replaced file is in
    use within a second, without a restart.
    """

    def __init__(
        self, path: str | os.PathLike[str], network_paths: tuple[str | os.PathLike[str], ...] = ()
    ) -> None:
        self.path = Path(path)
        self._location = WatchedDatabase(path)
        self._networks = tuple(WatchedDatabase(network_path) for network_path in network_paths)
        # The location file last, and once: it may also be named as a network file (LANNER_GEO_EDITIONS).
        self._network_sources = self._networks + (
            () if _names_same_file(path, network_paths) else (self._location,)
        )

    @property
    def database(self) -> GeoDatabase | None:
        return self._location.database

    @property
    def facts(self) -> frozenset[str]:
        """What the files now open can tell: the location file's LOCATION_FACTS, every file's
        NETWORK_FACTS."""
        location = self._location.database
        facts = location.facts & LOCATION_FACTS if location is not None else frozenset()
        for watched in self._network_sources:
            if watched.database is not None:
                facts |= watched.database.facts & NETWORK_FACTS
        return facts

    def lookup(self, ip: str) -> GeoInfo:
        database = self._location.database
        return database.lookup(ip) if database is not None else UNKNOWN_GEO

    def lookup_network(self, ip: str) -> NetworkInfo:
        """The network facts of `ip`, each from the first file that has it; UNKNOWN_NETWORK without files."""
        isp = connection = carrier = ""
        for watched in self._network_sources:
            database = watched.database
            if database is None or not database.has_network_facts:
                continue
            info = database.network(ip)
            isp, connection, carrier = isp or info.isp, connection or info.connection, carrier or info.carrier
            if isp and connection and carrier:
                break
        if not (isp or connection):
            return UNKNOWN_NETWORK
        return NetworkInfo(isp, connection, carrier)

    def refresh(self) -> bool:
        """Reopen whichever file changed; True when one was (re)opened."""
        changed = self._location.refresh()
        for watched in self._networks:
            changed = watched.refresh() or changed
        return changed

    def close(self) -> None:
        self._location.close()
        for watched in self._networks:
            watched.close()


# --- Building a country file from geoip2fast's bundled data ------------------------------------------------


def bundled_country_data_path() -> Path:
    """The geoip2fast data file (countries for IPv4 and IPv6) shipped inside the installed package."""
    spec = importlib.util.find_spec("geoip2fast")  # Found, not imported: its import costs ~50 ms.
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "The geoip2fast package is not installed, so there is no bundled country data."
        )
    return Path(spec.origin).resolve().parent / "geoip2fast-ipv6.dat.gz"


def build_country_database(dest: Path, progress: Callable[[int, int], None] | None = None) -> int:
    """Write a country `.mmdb` at `dest` from geoip2fast's bundled data; return the networks written.

    Records have MaxMind's shape (`{"country": {"iso_code": "US"}}`), so `GeoDatabase` reads this file and
    a real GeoLite2/GeoIP2/DB-IP file alike. Private and reserved ranges (geoip2fast's numeric "01".."99"
    codes) and continent-only entries are left out, so those addresses are unknown. `progress(done, total)`
    is called a few hundred times while the tree is built (counting source networks), then once more with
    (total, total) when the file is in place; the whole build takes ~5 s. The file appears atomically
    (a temporary file in the same directory, then `os.replace`), so running workers keep reading the old
    one until they reopen it.
    """
    from mmdb_writer import MMDBWriter

    source_info, (starts, ends, leaves, counts) = _load_country_ranges(bundled_country_data_path())
    total = counts[-1] if counts else 0

    writer = MMDBWriter(
        ip_version=6,
        ipv4_compatible=True,
        database_type=COUNTRY_DATABASE_TYPE,
        languages=["en"],
        description={"en": f"{source_info.get('info', 'geoip2fast')} via geoip2fast"},
    )
    writer.tree = _build_tree(starts, ends, leaves, counts, progress)

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        writer.to_db_file(temp_name)
        os.chmod(temp_name, 0o644)  # mkstemp makes it 0600; the workers may run as another user.
        GeoDatabase(temp_name).close()  # Never put a file in place that the reader would refuse.
        os.replace(temp_name, dest)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    if progress is not None:
        progress(total, total)
    return total


def _load_country_ranges(
    source: Path,
) -> tuple[dict[str, Any], tuple[list[int], list[int], list[Any], list[int]]]:
    """geoip2fast's source info and its networks as ranges; the raw lists are freed on return."""
    # The pickle comes from the installed geoip2fast package, trusted as much as that package's own code.
    with gzip.open(source, "rb") as stream:
        _version, source_info, _count, (_index, names, first_ips, country_ids, netlengths) = pickle.load(
            stream
        )
    if not isinstance(source_info, dict):
        source_info = {}
    return source_info, _country_ranges(names, first_ips, country_ids, netlengths)


def _country_ranges(
    names: list[str], first_ips: list[list[int]], country_ids: list[list[int]], netlengths: list[list[int]]
) -> tuple[list[int], list[int], list[Any], list[int]]:
    """geoip2fast's parallel chunks as sorted, disjoint [start, end) ranges in the 128-bit space.

    Adjacent networks of the same country are merged into one range (a third of them, which is why the
    tree below is smaller than one made network by network). IPv4 network a.b.c.d/n is ::a.b.c.d/(96+n).
    Returns starts, ends, the shared leaf of each range, and the running count of source networks.
    """
    from mmdb_writer import SearchTreeLeaf

    leaf_of_id: list[Any] = []
    for name in names:
        code = name.partition(":")[0]
        is_country = len(code) == 2 and code.isascii() and code.isalpha()
        # One leaf object per country: the writer encodes a leaf once per object, and equal neighbours merge.
        leaf_of_id.append(SearchTreeLeaf({"country": {"iso_code": code.upper()}}) if is_country else None)

    starts: list[int] = []
    ends: list[int] = []
    leaves: list[Any] = []
    counts: list[int] = []
    written = 0
    last_end = 0
    last_leaf = None
    for first_ip, country_id, netlength in zip(
        itertools.chain.from_iterable(first_ips),
        itertools.chain.from_iterable(country_ids),
        itertools.chain.from_iterable(netlengths),
        strict=True,
    ):
        leaf = leaf_of_id[country_id]
        if leaf is None:
            continue
        # The data keeps IPv4 and IPv6 in one list: an int below 2**32 with a prefix of at most 32 is IPv4.
        size = 1 << ((32 if first_ip < _IPV4_SPACE and netlength <= 32 else _BITS) - netlength)
        if first_ip < last_end:
            continue  # Overlaps the previous network (never seen in the data): the first one wins.
        written += 1
        if first_ip == last_end and leaf is last_leaf:
            ends[-1] = last_end = first_ip + size
            counts[-1] = written
            continue
        starts.append(first_ip)
        ends.append(first_ip + size)
        leaves.append(leaf)
        counts.append(written)
        last_end = first_ip + size
        last_leaf = leaf
    return starts, ends, leaves, counts


def _build_tree(
    starts: list[int],
    ends: list[int],
    leaves: list[Any],
    counts: list[int],
    progress: Callable[[int, int], None] | None,
) -> Any:
    """The writer's search tree for the ranges, each cut into CIDRs, inserted in address order.

    PERF: `MMDBWriter.insert_network` walks from the root for each CIDR (96 levels before an IPv4 network
    even starts) after building an IPSet per country: ~45 s for this data. Sorted input lets each CIDR
    start from the node where its path leaves the previous one's, so every node is made exactly once and
    nothing is looked up: ~1 s here, for the same tree (same node count and networks as the slow way).
    """
    from mmdb_writer import SearchTreeNode

    root = SearchTreeNode()
    path: list[Any] = [root] * (_BITS + 1)  # path[d]: the node at depth d on the last CIDR's path.
    top = _BITS - 1
    total = counts[-1] if counts else 0
    step = max(1, len(starts) // _PROGRESS_STEPS)
    previous = -1
    for index, (start, end, leaf) in enumerate(zip(starts, ends, leaves, strict=True)):
        while start < end:
            # The largest aligned block at `start` that fits: a CIDR of 2**size_bits addresses.
            size_bits = min(
                (start & -start).bit_length() - 1 if start else _BITS, (end - start).bit_length() - 1
            )
            prefix_length = _BITS - size_bits
            # Depth where this CIDR's path leaves the previous one's. Inputs are sorted and disjoint, so
            # it goes right there while every earlier CIDR went left: everything below it is new.
            depth = _BITS - (start ^ previous).bit_length() if previous >= 0 else 0
            node = path[depth]
            while depth < prefix_length - 1:
                child = SearchTreeNode()
                if (start >> (top - depth)) & 1:
                    node.right = child
                else:
                    node.left = child
                depth += 1
                path[depth] = node = child
            if (start >> (top - depth)) & 1:
                node.right = leaf
            else:
                node.left = leaf
            previous = start
            start += 1 << size_bits
        if progress is not None and (index + 1) % step == 0:
            progress(counts[index], total)
    return root
