"""The crawler networks the large platforms publish (Google, Bing, OpenAI, Apple, Meta...), for the bot
decision.

A click from one of them is a bot whatever its User-Agent says ("ip range: google-googlebot"): a crawler
that sends a browser's User-Agent is still fetching from its operator's published addresses.

The data is one JSON file: `{"format": 1, "updated_at", "sources": [{"name", "url", "created",
"fetched_at", "networks": [...], ...}]}`. A copy ships in models/lookups/data/bot_ranges.json (its sources,
dates and licences in BOT_RANGES.md there); `lanner bots update` (`update_ranges`) fetches the sources again
into the data directory's copy, which then takes precedence. `CrawlerRanges` is what a long-running
process holds: it notices a replaced file, like the geo file (models/lookups/geo.py GeoSource), so web
workers and the flusher use a new one within a second, without a restart.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.errors import LannerError
from models.lookups.iplist import IpList, parse_entry

__all__ = [
    "SHIPPED_RANGES",
    "CrawlerRanges",
    "RangeData",
    "RangeDataError",
    "RangeSource",
    "UpdateReport",
    "is_update_due",
    "parse_published",
    "ranges_file",
    "update_ranges",
]

logger = logging.getLogger(__name__)

SHIPPED_RANGES = Path(__file__).resolve().parent / "data" / "bot_ranges.json"
FORMAT = 1
REFRESH_EVERY = 1.0  # Seconds between stat() calls on the file, whoever asks more often.
MAX_DOWNLOAD_BYTES = 8 << 20  # Google's largest list is ~100 KB.
DOWNLOAD_TIMEOUT = 30.0
MAX_SHRINK = 0.5  # A source that comes back with fewer than this share of its networks is refused.


class RangeDataError(LannerError, ValueError):
    """A ranges file or a downloaded list that cannot be used; the message is one sentence."""


@dataclass(frozen=True)
class RangeSource:
    """One published list: its name (the reason says "ip range: <name>"), where it came from and when."""

    name: str
    networks: tuple[str, ...]
    url: str = ""
    created: str = ""  # The publisher's own date (Google's creationTime), when it gives one.
    fetched_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # operator, label, via: kept as they are.

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.extra,
            "url": self.url,
            "created": self.created,
            "fetched_at": self.fetched_at,
            "networks": list(self.networks),
        }


@dataclass(frozen=True)
class RangeData:
    """A ranges file's contents."""

    sources: tuple[RangeSource, ...]
    updated_at: str = ""
    about: str = ""

    @property
    def network_count(self) -> int:
        return sum(len(source.networks) for source in self.sources)

    @property
    def oldest_fetch(self) -> str:
        """The oldest `fetched_at` of its sources: how stale the least fresh list may be."""
        return min((source.fetched_at for source in self.sources if source.fetched_at), default="")

    @classmethod
    def read(cls, path: Path) -> RangeData:
        """Raises RangeDataError (naming the file) for a file that is missing, not JSON or not ours."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise RangeDataError(f"The crawler ranges file {path} cannot be read ({exc}).") from None
        if (
            not isinstance(data, dict)
            or data.get("format") != FORMAT
            or not isinstance(data.get("sources"), list)
        ):
            raise RangeDataError(
                f"The crawler ranges file {path} is not a Lanner ranges file (format {FORMAT})."
            )
        sources = []
        for item in data["sources"]:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise RangeDataError(f"The crawler ranges file {path} has a source without a name.")
            known = ("name", "networks", "url", "created", "fetched_at")
            sources.append(
                RangeSource(
                    item["name"],
                    tuple(item.get("networks") or ()),
                    str(item.get("url", "")),
                    str(item.get("created", "")),
                    str(item.get("fetched_at", "")),
                    {key: value for key, value in item.items() if key not in known},
                )
            )
        return cls(tuple(sources), str(data.get("updated_at", "")), str(data.get("about", "")))

    def write(self, path: Path) -> None:
        """Replace `path` atomically (a temporary file in the same directory, fsynced, then renamed), so a
        process reading it sees the old file or the new one, never half of one."""
        payload = {"format": FORMAT, "updated_at": self.updated_at, "about": self.about}
        payload["sources"] = [source.as_json() for source in self.sources]
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


class _Matcher:
    """One IpList over every network for the verdict, then one per source for the reason of a hit."""

    def __init__(self, data: RangeData) -> None:
        self.updated_at = data.updated_at  # Not the data itself: its networks are in the lists below.
        self.by_source = tuple((source.name, IpList(source.networks)) for source in data.sources)
        self.all = IpList.union(networks for _, networks in self.by_source)

    def source_of(self, ip: str) -> str:
        for name, networks in self.by_source:
            if ip in networks:
                return f"ip range: {name}"
        return "ip range"  # pragma: no cover - the union holds exactly the sources' networks.


class CrawlerRanges:
    """The ranges a process matches clicks against: `path` (the data directory's copy, which `lanner bots
    update` writes) once it exists, the shipped copy until then, loaded on the first `reason()` (~3,000
    networks take ~50 ms and ~1 MB: a web worker whose campaigns never ask the bot check pays nothing).
    `refresh()` then reloads a replaced file; a broken one leaves the ranges in use, with a warning."""

    def __init__(self, path: Path | None, shipped: Path = SHIPPED_RANGES, clock=time.monotonic) -> None:
        self.path = path
        self.shipped = shipped
        self.clock = clock
        self.in_use: Path | None = None
        self._matcher: _Matcher | None = None
        self._stamp: tuple[int, int] | None = None
        self._asked = False
        self._next_look = clock() + REFRESH_EVERY

    @property
    def updated_at(self) -> str:
        return self._matcher.updated_at if self._matcher is not None else ""

    def reason(self, ip: str) -> str | None:
        matcher = self._matcher
        if matcher is None:
            if self._asked:
                return None  # No usable file: asked once, not again per click.
            self._asked = True
            self._load()
            matcher = self._matcher
            if matcher is None:
                return None
        if ip not in matcher.all:
            return None
        return matcher.source_of(ip)

    def refresh(self) -> bool:
        """Reload the file if it was replaced (at most one stat() a second, once in use); True when it was."""
        now = self.clock()
        if now < self._next_look or not self._asked:
            return False
        self._next_look = now + REFRESH_EVERY
        return self._load()

    def _load(self) -> bool:
        path = ranges_file(self.path, self.shipped)
        try:
            stat = path.stat()
        except OSError:
            return False
        stamp = (stat.st_ino, stat.st_mtime_ns)
        if path == self.in_use and stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            matcher = _Matcher(RangeData.read(path))
        except ValueError as exc:  # RangeDataError, or a network parse_entry refuses.
            logger.warning("Keeping the crawler ranges in use: %s", exc)
            return False
        self._matcher, self.in_use = matcher, path
        return True


# --- `lanner bots update` -----------------------------------------------------------------------------------


def parse_published(body: bytes) -> tuple[list[str], str]:
    """(networks, the publisher's creation time or "") of one downloaded list.

    JSON (Google's `{"creationTime", "prefixes": [{"ipv4Prefix" | "ipv6Prefix": ...}]}`, which Bing, OpenAI,
    Apple, DuckDuckGo, Perplexity and Common Crawl share, or any other shape): every string value that is an
    address or network. Otherwise one address or network a line, "#" comments allowed, every line checked.
    Bing's file has carried zero-width spaces inside its prefixes since 2022: removed first.
    Raises RangeDataError for a list with no networks or a line that is not one.
    """
    try:
        text = body.decode("utf-8-sig").replace("\u200b", "")
    except UnicodeDecodeError:
        raise RangeDataError("the list is not UTF-8 text") from None
    created = ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    found: list[str] = []
    if isinstance(data, (dict, list)):
        if isinstance(data, dict):
            created = str(data.get("creationTime", "") or "")
        for value in _strings(data):
            try:
                network = parse_entry(value)
            except ValueError:
                continue  # A date, a label: not every string in a JSON list is a network.
            if network is not None:
                found.append(str(network))
    elif text.lstrip().startswith(("{", "[")):
        raise RangeDataError("the list looks like JSON but does not parse")
    else:
        for line in text.splitlines():
            entry = line.split("#", 1)[0].strip()
            if entry:
                try:
                    network = parse_entry(entry)
                except ValueError as exc:
                    raise RangeDataError(str(exc)) from None
                if network is not None:
                    found.append(str(network))
    if not found:
        raise RangeDataError("the list holds no networks")
    return sorted(set(found)), created


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def fetch_url(url: str) -> bytes:
    """One published list; raises OSError (urllib's errors are OSErrors) or RangeDataError."""
    request = urllib.request.Request(url, headers={"User-Agent": "Lanner (lanner bots update)"})
    with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response:
        body = response.read(MAX_DOWNLOAD_BYTES + 1)
    if len(body) > MAX_DOWNLOAD_BYTES:
        raise RangeDataError(f"the list is larger than {MAX_DOWNLOAD_BYTES} bytes")
    return body


@dataclass
class UpdateReport:
    """What `update_ranges` did: one line per source, and whether every configured source was updated."""

    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    data: RangeData | None = None

    @property
    def is_complete(self) -> bool:
        return not self.failed


def update_ranges(
    sources: Iterable[tuple[str, str]],
    path: Path,
    *,
    fetch: Callable[[str], bytes] = fetch_url,
    shipped: Path = SHIPPED_RANGES,
    now: datetime | None = None,
) -> UpdateReport:
    """Fetch each (name, url) source and write `path` atomically.

    A name may be given several times (Meta's IPv4 and IPv6 lists): its networks are the union. A source
    that fails (a download error, an HTTP error, a list that does not parse) or that shrank by more than
    half (a truncated download) keeps its previous networks and dates, and is reported; so one platform's
    outage never empties the list. The previous data is `path`'s, or the shipped copy's before the first
    update; its sources that are not configured are kept as they are.
    """
    now = now or datetime.now(UTC)
    stamp = now.isoformat(timespec="seconds")
    try:
        previous = RangeData.read(path) if path.exists() else RangeData.read(shipped)
    except RangeDataError as exc:
        logger.warning("%s; starting the ranges afresh", exc)
        previous = RangeData(())
    old = {source.name: source for source in previous.sources}
    urls: dict[str, list[str]] = {}
    for name, url in sources:
        urls.setdefault(name, []).append(url)
    report = UpdateReport()
    fresh: dict[str, RangeSource] = {}
    for name, named_urls in urls.items():
        before = old.get(name)
        try:
            networks: set[str] = set()
            created = ""
            for url in named_urls:
                found, when = parse_published(fetch(url))
                networks.update(found)
                created = max(created, when)
            if before is not None and len(networks) < len(before.networks) * MAX_SHRINK:
                raise RangeDataError(f"it shrank from {len(before.networks)} to {len(networks)} networks")
        except (OSError, RangeDataError) as exc:
            kept = len(before.networks) if before is not None else 0
            report.failed.append(name)
            report.lines.append(f"{name}: not updated ({_one_line(exc)}); kept its {kept} networks")
            continue
        extra = before.extra if before is not None else {}
        fresh[name] = RangeSource(name, tuple(sorted(networks)), " ".join(named_urls), created, stamp, extra)
        report.lines.append(
            f"{name}: {len(networks)} networks" + (f", published {created}" if created else "")
        )
    merged = [fresh.pop(source.name, source) for source in previous.sources]
    merged.extend(fresh.values())
    report.data = RangeData(tuple(merged), stamp, previous.about)
    report.data.write(path)
    return report


def ranges_file(path: Path | None, shipped: Path = SHIPPED_RANGES) -> Path:
    """The file a process reads for `path` (the configured one): it, once it exists, else the shipped copy."""
    return path if path is not None and path.exists() else shipped


def is_update_due(path: Path, days: int, now: datetime | None = None) -> bool:
    """Whether `path` is missing, unreadable, or last updated `days` or more days ago."""
    now = now or datetime.now(UTC)
    try:
        updated = datetime.fromisoformat(RangeData.read(path).updated_at)
    except ValueError:  # RangeDataError too: a file to replace.
        return True
    if updated.tzinfo is None:
        updated = updated.replace(tzinfo=UTC)
    return (now - updated).total_seconds() >= days * 86400


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", "") or exc) or type(exc).__name__
    return " ".join(text.split())
