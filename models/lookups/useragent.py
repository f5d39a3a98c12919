"""Device type, OS and browser of a visitor, from the User-Agent header, for routing filters and reports.

`UserAgentParser.parse(ua)` answers a `DeviceInfo` and never raises. The OS and browser are ua-parser's
family names ("iOS", "Android", "Windows", "Mac OS X", "Chrome Mobile", "Mobile Safari", ...; "" when it
says "Other" or the header is empty). The device type is one of DEVICE_TYPES, decided by the first rule
that matches, in this order:

    tv       SmartTV, Smart-TV, SMART-TV, AppleTV, Apple TV, GoogleTV, HbbTV, CrKey (Chromecast), Roku,
             BRAVIA, or Tizen / webOS / Web0S together with "TV"
    console  PlayStation, Xbox, Nintendo
    tablet   iPad, Tablet, Kindle, Silk (Amazon Fire)
    mobile   iPhone, iPod, Mobile (so Android phones), Windows Phone, Opera Mini, Opera Mobi, BlackBerry,
             MIDP, Symbian
    tablet   Android without any of the mobile tokens above
    desktop  Windows NT, Macintosh, X11, Linux (Android was taken above), CrOS
    bot      ua-parser's device family is "Spider" (asked only now: its extractor is half a parse)
    mobile   ua-parser's device family "Generic Smartphone" or "Generic Feature Phone"
    tablet   ua-parser's device family "Generic Tablet"
    unknown  an empty header or nothing recognisable (curl, most HTTP libraries)

A crawler that sends a browser's tokens (Googlebot's smartphone agent) is placed by them here; the
bot check (models/lookups/bots.py) flags it, and a flagged click is stored with the device type "bot".

Tokens are matched case-sensitively, as browsers send them.

Known limit: an iPad on iPadOS 13+ asks for desktop sites with a Macintosh User-Agent, so it is "desktop".
Each worker process keeps its own bounded cache: real traffic repeats a few thousand User-Agents.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["DEVICE_TYPES", "UNKNOWN_DEVICE", "DeviceInfo", "UserAgentParser", "device_type"]

DEVICE_TYPES = ("desktop", "mobile", "tablet", "tv", "console", "bot", "unknown")
# Longer headers are parsed but not cached, so the cache stays small (cache_size x this) whatever is sent.
MAX_CACHED_LENGTH = 1024

_TV_TOKENS = (
    "SmartTV",
    "Smart-TV",
    "SMART-TV",
    "AppleTV",
    "Apple TV",
    "GoogleTV",
    "HbbTV",
    "CrKey",
    "Roku",
    "BRAVIA",
)
_TV_PLATFORMS = ("Tizen", "webOS", "Web0S")
_CONSOLE_TOKENS = ("PlayStation", "Xbox", "Nintendo")
_TABLET_TOKENS = ("iPad", "Tablet", "Kindle", "Silk")
_MOBILE_TOKENS = (
    "iPhone",
    "iPod",
    "Mobile",
    "Windows Phone",
    "Opera Mini",
    "Opera Mobi",
    "BlackBerry",
    "MIDP",
    "Symbian",
)
_DESKTOP_TOKENS = ("Windows NT", "Macintosh", "X11", "Linux", "CrOS")
_TABLET_FAMILIES = frozenset({"Generic Tablet"})
_MOBILE_FAMILIES = frozenset({"Generic Smartphone", "Generic Feature Phone"})


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What a User-Agent says about the visitor's device; os and browser are "" when unknown."""

    device_type: str
    os: str
    browser: str


UNKNOWN_DEVICE = DeviceInfo("unknown", "", "")


def device_type_of(user_agent: str, device_family: str | Callable[[], str]) -> str:
    """The device type by the rules in the module docstring.

    `device_family` is ua-parser's device family ("" if none), or a function giving it: PERF: its
    extractor is half the cost of a parse (~8 of ~17 µs), and only UAs that no token places need it.
    """
    if any(token in user_agent for token in _TV_TOKENS) or (
        "TV" in user_agent and any(platform in user_agent for platform in _TV_PLATFORMS)
    ):
        return "tv"
    if any(token in user_agent for token in _CONSOLE_TOKENS):
        return "console"
    if any(token in user_agent for token in _TABLET_TOKENS):
        return "tablet"  # Before the mobile tokens: iPad Safari says "Mobile/15E148" too.
    if any(token in user_agent for token in _MOBILE_TOKENS):
        return "mobile"
    if "Android" in user_agent:
        return "tablet"  # Android phones' browsers say "Mobile"; tablets' do not.
    if any(token in user_agent for token in _DESKTOP_TOKENS):
        return "desktop"
    family = device_family() if callable(device_family) else device_family
    if family == "Spider":
        return "bot"
    if family in _MOBILE_FAMILIES:
        return "mobile"
    if family in _TABLET_FAMILIES:
        return "tablet"
    return "unknown"


def _family(match: Any) -> str:
    if match is None:
        return ""
    family = match.family
    return "" if family == "Other" or not isinstance(family, str) else family


@functools.cache
def _rust_extractors() -> tuple[Callable[[str], Any], Callable[[str], Any], Callable[[str], Any]] | None:
    """ua-parser's compiled matchers, once per process, on first use (~24 MB of Rust regexes).

    Web workers only need them for campaigns that filter on device/OS/browser; the spool flusher
    parses the rest (models/clicks/enrichment.py Lookups).
    """
    try:
        from ua_parser import load_lazy_builtins
        from ua_parser.regex import Resolver
    except ImportError:  # ua-parser-rs missing: fall back to ua-parser's own choice below.
        return None
    resolver = Resolver(load_lazy_builtins())
    return resolver.ua.extract, resolver.os.extract, resolver.de.extract


def device_type(device: DeviceInfo, is_bot: bool) -> str:
    """The device type a click is stored with: every flagged bot is a "bot", whatever it claims to be."""
    return "bot" if is_bot else device.device_type


class UserAgentParser:
    """Parses User-Agent headers into DeviceInfo, remembering the last `cache_size` distinct ones.

    PERF: measured per uncached parse on this project's ~70 test User-Agents: ua-parser's pure-Python
    resolver ~1200 µs, its re2 resolver ~85 µs, its Rust-backed `ua_parser.regex.Resolver` ~28 µs through
    `Resolver.__call__` and ~20 µs calling its three extractors directly, as here (browser ~5, OS ~2,
    device ~7-10); the device extractor runs only for UAs no token places (device_type_of), so a browser's
    UA costs ~9 µs. A cache hit is one dict lookup
    (~0.1 µs); the cache is an OrderedDict used as a FIFO, because evicting the oldest key of a plain dict
    (`next(iter(d))`) degrades to ~4 µs once deleted slots pile up at its front, while popitem(last=False)
    stays at ~0.8 µs. Building the Rust matchers takes ~0.3 s: make the parser once per process.
    """

    def __init__(self, cache_size: int = 4096) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, not {cache_size}.")
        self.cache_size = cache_size
        self._cache: OrderedDict[str, DeviceInfo] = OrderedDict()
        self._resolver: Any = None
        self._is_loaded = False  # The matchers are built on the first parse: most workers never need them.

    def _load(self) -> None:
        extractors = _rust_extractors()
        if extractors is None:
            import ua_parser

            self._resolver = ua_parser.BestAvailableResolver(ua_parser.load_builtins())
        else:
            self._extract_browser, self._extract_os, self._extract_device = extractors
        self._is_loaded = True

    def parse(self, user_agent: str) -> DeviceInfo:
        """The device type, OS and browser of `user_agent`; never raises for any str."""
        cache = self._cache
        info = cache.get(user_agent)
        if info is not None:
            return info
        info = self._parse(user_agent)
        if isinstance(user_agent, str) and len(user_agent) <= MAX_CACHED_LENGTH:
            if len(cache) >= self.cache_size:
                cache.popitem(last=False)
            cache[user_agent] = info
        return info

    __call__ = parse

    @property
    def cache_length(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache.clear()

    def _parse(self, user_agent: str) -> DeviceInfo:
        if not isinstance(user_agent, str) or not user_agent.strip():
            return UNKNOWN_DEVICE
        if not self._is_loaded:
            self._load()
        try:
            browser, os, device = self._families(user_agent)
            return DeviceInfo(device_type_of(user_agent, device), os, browser)
        except (UnicodeError, ValueError, TypeError):
            # Lone surrogates (a header decoded with surrogateescape) cannot cross into Rust as UTF-8.
            user_agent = user_agent.encode("utf-8", "replace").decode("utf-8")
            try:
                browser, os, device = self._families(user_agent)
                return DeviceInfo(device_type_of(user_agent, device), os, browser)
            except Exception:  # noqa: BLE001 - a parser bug must not lose the click; the device is unknown.
                return UNKNOWN_DEVICE

    def _families(self, user_agent: str) -> tuple[str, str, str | Callable[[], str]]:
        """Browser and OS families, and the device family (or a function giving it, computed if needed)."""
        if self._resolver is not None:
            from ua_parser import Domain

            result = self._resolver(user_agent, Domain.ALL)
            return _family(result.user_agent), _family(result.os), _family(result.device)
        extract_device = self._extract_device
        return (
            _family(self._extract_browser(user_agent)),
            _family(self._extract_os(user_agent)),
            lambda: _family(extract_device(user_agent)),
        )
