"""Device type, OS and browser of a visitor, from the User-Agent header, for routing filters and reports.

`UserAgentParser.parse(ua)` answers a `DeviceInfo` and never raises. The OS and browser are ua-parser's
family names ("iOS", "Android", "Windows", "Mac OS X", "Chrome Mobile", "Mobile Safari", ...; "" when it
says "Other" or the header is empty). The device type is one of "desktop", "mobile", "tablet", "tv",
"console" or "unknown", decided by this module's own rules (`device_type_of`), not by ua-parser, whose
device matcher is never built (it was ~14 MB per process and typed only what these rules leave over).
A parse never says "bot": `device_type(device, is_bot)` stores every click the bot check flagged
(models/lookups/bots.py) as "bot", whatever its User-Agent claims to be.

The types are matomo/device-detector's (phablets and feature phones are "mobile"), and agree with its
test fixtures on 97-99 % of each of its desktop, smartphone, tablet, TV and console entries typed from
the User-Agent alone (tests/test_useragent.py runs a committed sample: tests/fixtures/device_detector/).
The first family that matches decides:

    console  PlayStation, Xbox, Nintendo (and "; Switch)"), OUYA, PS3/4/5, Sega and Sanyo's Aplix browsers,
             handhelds (Retroid, ANBERNIC...)
    tv       TV platforms and browsers: Android TV, Google TV, Fire TV (Amazon "AFT..." models), BRAVIA,
             SmartTV, HbbTV, CE-HTML, NetCast, Tizen...TV, Web0S/webOS TV, "(lite) TV", Opera TV/OMI, CrKey,
             Roku, AppleTV/tvOS, Mi TV/Mi Box, set-top boxes (Sky, TiVo, YouView, BrightSign, Sagemcom,
             MAG...), Opera Devices' "(BRAND, chip, wired)", Linux on mips/sh4, Android TV-box brands (X96,
             A95X, H96, Tanix...) and TV brands selling only TVs in Android UAs (Hartens, Starwind...)
    (model)  device-detector's type for the Android model name ("SM-T220", "Lenovo TB-X606F", "43LU8010T"):
             its brand and model regexes, indexed by prefix (models/lookups/device_models.py, LGPL data)
    tv       an Android model name that looks like a TV: "43LU8010T" (screen size first), "_TV", STB, BOX
    tablet   an Android model name that says tab, pad, MID or tablet
    desktop  laptops and desktops on Android or Chrome OS's Android layer: Chromebook, "Build/R80-1...",
             laptop lines (Inspiron, ThinkPad, MateBook...), "(PC;"
    mobile   Windows Phone / Windows Mobile / Lumia, iPhone, iPod, Puffin's phone builds
    tablet   iPad, "Tablet" (not Windows' "Tablet PC 2.0", which every Windows 7 desktop sends), Kindle,
             Fire models (KF...), Silk, Galaxy Tab models (SM-T/SM-X/SM-P, GT-P), Lenovo TB-/YT-, Huawei
             MatePad/MediaPad and its tablet model prefixes (AGS-, BAH-, KOB-...), Nexus 7/9/10
    mobile   Android with "Mobile"
    tablet   Android without "Mobile" in Chrome or the stock browser (their convention), or Android 3.x
    mobile   any other Android (apps' own HTTP clients, Dalvik: phones outnumber tablets there)
    mobile   Opera Mini/Mobi, BlackBerry, MIDP, Symbian, Nokia, WAP, KaiOS, UCWEB, Bada, Tizen phones...
    tablet   Windows 8 or later with "Touch", not on ARM (device-detector's rule for touch laptops)
    desktop  Windows, Mac OS X/macOS/Darwin, X11, Linux, Chrome OS, the BSDs, "Desktop;"
    unknown  an empty header or nothing recognisable (curl, most HTTP libraries, crawlers that name no OS)

Brand and platform tokens are matched case-sensitively, as they are sent; model names case-insensitively.

Known limit: an iPad on iPadOS 13+ asks for desktop sites with a Macintosh User-Agent, so it is "desktop";
so is a phone or tablet in Chrome's "desktop site" mode (a Linux desktop's User-Agent), as device-detector
says too.
Each worker process keeps its own bounded cache: real traffic repeats a few thousand User-Agents.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2

from models.lookups.device_models import DeviceModels

__all__ = ["DEVICE_TYPES", "UNKNOWN_DEVICE", "DeviceInfo", "UserAgentParser", "device_type", "device_type_of"]

DEVICE_TYPES = ("desktop", "mobile", "tablet", "tv", "console", "bot", "unknown")
# Longer headers are parsed but not cached, so the cache stays small (cache_size x this) whatever is sent.
MAX_CACHED_LENGTH = 1024

# The rule families of the module docstring, as re2 patterns (one automaton each: re2 scans a User-Agent
# once for all alternatives, where Python's re would try each alternative at each position).
CONSOLE_PATTERN = (
    r"PlayStation|Playstation|PLAYSTATION|\bXbox|\bXBOX|Nintendo|NINTENDO|OUYA|\bPS[345]\b|\bps5;"
    r"|Aplix_SANYO|Aplix_SEGA|Dreamcast"
    r"|; Switch(?: OLED| Lite)?\)|Retroid|ANBERNIC|RGCUBE|Razer Edge|GAMEPAD|\bJXD|SEGA|3DO"
)
TV_PATTERN = (
    r"Android[ _-]?TV|AndroidTV|Google ?TV|\(lite\) TV|\bTV Safari| TV$|TV Bro"
    r"|BRAVIA|Smart[ _-]?TV|SMART_TV|HbbTV|CE-HTML|NetCast|NETTV|NetTV|_TV_|\(TV;|Opera TV|OMI/|Andr0id"
    r"|Firebolt"
    r"|Tizen[^)]*TV|Web0S|webOS[. ]?TV|\bDTV\b|Espial|ANTGalio|Viera|AQUOS[-_ ]?TV|SmartHub|Kylo"
    r"|\bAFT[A-Z0-9]{1,9}\b|Fire TV|MiTV|MIBOX|MiBOX|Mi ?Box|AppleTV|Apple TV|tvOS|CrKey|Roku|Chromecast"
    r"|\bSTB\b|SFCSTB|[ _-]TV[ _-]?Box|TVBox|TV_Box|\bTV[ ;)]|\bShell [0-9A-Z]|Droidlogic|PhilipsTV"
    r"|Philips.?TV"
    r"|HiSmart|VIDAA|Coolita|Vewd|Opera Devices|SRAF|Seraphic|Freebox|LUJO|TiviMate|QJY|Odin|\bOMNI[ _]"
    r"|Linux (?:mips|sh4)"
    r"|Presto/[\d.]+ Version/[\d.]+ [^(]*\([^,()]+, ?[^,()]+, ?(?:wired|wireless|Wired|Wireless)\)"
    r"|, ?(?:wired|wireless|Wired|Wireless)\)|InettvBrowser|SonyDTV|QtEmbedded|stbapp|_STB|BrightSign"
    r"|GW-Device"
    r"|MR-Device|avui/tv|TiVo|Sagemcom|KreaTV|YouView|ViziOS|VIZIO|Hybridcast|smarttv_|WebTV|AQUOS|Panasonic\.bd"
    r"|olleh tv|Large Screen|\(Astro;|\bMAG\d{3}|Infomir|Cinnamon/|NEXBOX|LibVLC|REDLINE|QtWebKit/[\d.]+; \("
    r"|MagentaTV|waipu|Vodafone TV|SWTV|HGTV|\bTX3\b|Tanix|\bX96|\bA95X|Beelink|Ugoos|\bH96|\bT95[ _A-Z]"
    r"|\bMXQ|\bX88"
    r"|Mystery|Polar[ _]|Hartens|Starwind|SW-LED|Telefunken|TF-LED|Erisson|Loview|Lumus"
)
# The model an Android UA names: "Android 11; SM-T220)", "Android 9; en-us; 43LU8010T Build/".
ANDROID_MODEL_PATTERN = (
    r"Android[^;)]*;(?: [a-z][a-z][-_][A-Za-z]{2};)?(?: arm[^;]*;)? ?([^;)]*?)(?: Build|\)|;)"
)
TV_MODEL_PATTERN = r"^\d{2}[A-Z]{1,3}\d{3,4}|(?:^|_)TV|TV(?:_|$)|STB|BOX"  # case-insensitive
TABLET_MODEL_PATTERN = r"(?:^|[^a-z])tab(?:[^l]|$)|(?:^|[^a-z])pad(?:[^a-z]|$)|(?:^|[^a-z])MID|tablet"  # idem
LAPTOP_PATTERN = (
    r"Chromebook|Pixelbook|Build/R\d{2,3}-\d|Inspiron|Latitude|Vostro|EliteBook|ProBook|TravelMate|Aspire"
    r"|Satellite|SATELLITE|LIFEBOOK|ThinkPad|IdeaPad|IdeaCentre|MateBook|Remix Mini|Compaq|\bNUC\d|\b2in1\b"
    r"|Netbook|NETBOOK|\(PC;|WayDroid|\bwin(?:7|8|10|11) x"
)
PHONE_PATTERN = (
    r"Puffin/[\d.]+[AIFLW]P|eliboM|Lumia|Windows Phone|WPDesktop|IEMobile|Windows Mobile|Windows CE|ZuneWP"
    r"|XBLWP|iPhone|iPod|\biPh\d"
)
TABLET_PATTERN = (
    r"Puffin/[\d.]+[AILW]T|iPad|Tablet(?:[^ ]| [^P]| P[^C]|$)|Kindle|\bKF[A-Z]{2,6}\b|Silk/|/apad"
    r"|Opera Tablet"
    r"|\bSM-[TXP]\d|\bGT-P\d|\bGT-N(?:5|8)\d|\bSC-0[12]C|Lenovo ?TB|\bTB-[0-9X]|\bTB[0-9]{3}|MatePad|MediaPad"
    r"|Pad\b|Pad[ _-]|\bPad|Tab\b|Tab[ _\d-]|Nexus (?:7|9|10)\b|\bP[0-9]{2}(?:SE)?_|\bAGS\d?-|\bBAH\d?-"
    r"|\bBTV-"
    r"|\bKOB\d?-|\bMON-|\bSCM-|\bDBY-|\bBG2-|\bJDN\d?-|\bCMR-|\bAGR-|\bGOT-|\bHDN-|\bBZ[A-Z]-|\bKRJ-|\bWGR-"
    r"|\bDDB-|\biPlay|\bXiaoXin|\bYT-|\bYT3|\bTB3-|\bP[0-9]{2}T\b|\bT[0-9]{2}[A-Z]?\b|\bM[0-9]{2}(?:Plus|Pro|_)"
    r"|Galaxy Tab|\bFire\b"
)
ANDROID_PATTERN = r"Android|\bAdr\b"  # case-insensitive
MOBILE_PATTERN = (
    r"Mobile|Opera Mini|Opera Mobi|BlackBerry|\bBB10\b|MIDP|Symbian|SymbOS|Series ?[46]0|\bS60\b|Nokia|NOKIA"
    r"|J2ME|UP\.Browser|\bWAP|Obigo|KaiOS|UCWEB|Maemo|\bMAUI|Smartphone|\bPalm|webOS|PalmOS|Brew|BREW|Bada|Tizen"
)
TOUCH_WINDOWS_PATTERN = r"Windows NT (?:6\.[23]|10\.0)[^)]*Touch"
DESKTOP_PATTERN = (
    r"Windows|\bWin(?:9[58x]|NT|32|64|dows)|Win 9x|Macintosh|Mac OS X|Mac_PowerPC|macOS|\bOSX\b|Darwin|X11"
    r"|Linux|CrOS|FreeBSD|OpenBSD|NetBSD|SunOS|AmigaOS|BeOS|Haiku|OS/2|OpenVMS|CYGWIN"
    r"|(?:Desktop|PC)(?: x(?:32|64)| WOW64)?;"
)


# Where the Android model name is looked for: it follows "Android ...;" near the start of the header, and
# this bounds Python re's backtracking on a hostile header (~40 µs at worst, ~0.5 µs on a real one).
MODEL_SCAN_LENGTH = 512

# device-detector's types of a model (models/lookups/device_models.py) as the tracker's; the rest (wearable,
# peripheral, car browser, camera, media player, smart speaker or display) are left to the rules below.
MODEL_TYPES = {
    "smartphone": "mobile",
    "phablet": "mobile",
    "feature phone": "mobile",
    "tablet": "tablet",
    "tv": "tv",
    "console": "console",
    "desktop": "desktop",
}

# The order of the families in the re2.Set: one scan of the header answers which of them match.
CONSOLE, TV, LAPTOP, PHONE, TABLET, ANDROID, MOBILE, TOUCH_WINDOWS, DESKTOP = range(9)


class _DeviceRules:
    """The compiled rule families, built once per process on first use (~40 ms, ~1 MB).

    PERF: the header-wide families are one re2.Set (~1 µs per header for all nine; a separate re2 search
    each cost ~1.5-3.5 µs, ~20 µs in all, mostly the wrapper's per-call work). The Android model name is
    read with Python's re (~0.5 µs; re2 ~5 µs with a capture group) from a bounded prefix of the header;
    device-detector's type for it costs ~5 µs more (DeviceModels, whose regexes compile on first use).
    """

    def __init__(self) -> None:
        options = re2.Options()
        options.never_capture = True
        families = re2.Set.SearchSet(options)
        for pattern in (
            CONSOLE_PATTERN,
            TV_PATTERN,
            LAPTOP_PATTERN,
            PHONE_PATTERN,
            TABLET_PATTERN,
            f"(?i:{ANDROID_PATTERN})",
            MOBILE_PATTERN,
            TOUCH_WINDOWS_PATTERN,
            DESKTOP_PATTERN,
        ):
            families.Add(pattern)
        families.Compile()
        self.families = families
        self.android_model = re.compile(ANDROID_MODEL_PATTERN)
        self.models = DeviceModels()
        self.tv_model = re.compile(TV_MODEL_PATTERN, re.IGNORECASE)
        self.tablet_model = re.compile(TABLET_MODEL_PATTERN, re.IGNORECASE)

    def device_type(self, ua: str) -> str:
        hits = self.families.Match(ua)
        if not hits:
            return "unknown"
        if CONSOLE in hits:
            return "console"
        if TV in hits:
            return "tv"
        if "ndroid" in ua:
            model = self.android_model.search(ua, 0, MODEL_SCAN_LENGTH)
            if model and model.group(1):
                kind = self.models.device_type(ua, model.start(1), model.end(1))
                known = MODEL_TYPES.get(kind) if kind is not None else None
                if known is not None:
                    return known
                name = model.group(1)
                if self.tv_model.search(name):
                    return "tv"
                if self.tablet_model.search(name):
                    return "tablet"
        if LAPTOP in hits:
            return "desktop"
        if PHONE in hits:
            return "mobile"
        if TABLET in hits:
            return "tablet"
        if ANDROID in hits:
            if "Mobile" in ua or "mobile" in ua:
                return "mobile"
            if "Chrome/" in ua or "Safari" in ua or "Android 3." in ua:
                return "tablet"  # Chrome and the stock browser say "Mobile" on phones only.
            return "mobile"
        if MOBILE in hits:
            return "mobile"
        if TOUCH_WINDOWS in hits and "ARM" not in ua:
            return "tablet"
        if DESKTOP in hits:
            return "desktop"
        return "unknown"


@functools.cache
def _device_rules() -> _DeviceRules:
    return _DeviceRules()


def device_type_of(user_agent: str) -> str:
    """The device type by the rules in the module docstring ("unknown" for an empty header).

    Raises UnicodeEncodeError for a str that is not valid UTF-8 (lone surrogates); UserAgentParser.parse
    never raises.
    """
    if not user_agent:
        return "unknown"
    return _device_rules().device_type(user_agent)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What a User-Agent says about the visitor's device; os and browser are "" when unknown."""

    device_type: str
    os: str
    browser: str


UNKNOWN_DEVICE = DeviceInfo("unknown", "", "")


def _family(match: Any) -> str:
    if match is None:
        return ""
    family = match.family
    return "" if family == "Other" or not isinstance(family, str) else family


@functools.cache
def _rust_extractors() -> tuple[Callable[[str], Any], Callable[[str], Any]] | None:
    """ua-parser's compiled browser and OS matchers, once per process, on first use (~10 MB of Rust regexes).

    Its device matcher is not built: the device type is this module's. Web workers only need these for
    campaigns that filter on device/OS/browser; the spool flusher parses the rest
    (models/clicks/enrichment.py).
    """
    try:
        import ua_parser_rs
        from ua_parser import load_lazy_builtins
    except ImportError:  # ua-parser-rs missing: fall back to ua-parser's own choice below.
        return None
    browsers, systems, _devices = load_lazy_builtins()
    fields = ("regex", "family", "major", "minor", "patch", "patch_minor")
    # The same construction as ua_parser.regex.Resolver's, minus its DeviceExtractor.
    browser = ua_parser_rs.UserAgentExtractor(tuple(getattr(m, f) for f in fields) for m in browsers)
    system = ua_parser_rs.OSExtractor(tuple(getattr(m, f) for f in fields) for m in systems)
    return browser.extract, system.extract


def device_type(device: DeviceInfo, is_bot: bool) -> str:
    """The device type a click is stored with: "bot" exactly when the bot decision (models/lookups/bots.py)
    flagged it, whatever its User-Agent claims, so `device=bot` and `bot=yes` select the same clicks."""
    if is_bot:
        return "bot"
    return "unknown" if device.device_type == "bot" else device.device_type


class UserAgentParser:
    """Parses User-Agent headers into DeviceInfo, remembering the last `cache_size` distinct ones.

    PERF: measured per uncached parse on device-detector's fixtures (20k distinct UAs, once the model
    regexes they need are compiled): ~17 µs median, ~27 µs p90 (browser ~5, OS ~2, device type ~2 µs,
    ~10 µs for an Android UA; a Windows or iPhone browser ~5-7 µs in all); ua-parser's pure-Python
    resolver costs ~1200 µs and its re2 one ~85 µs. A cache hit is one dict lookup (~0.1 µs); the cache
    is an OrderedDict used as a FIFO, because evicting the oldest key of a plain dict (`next(iter(d))`)
    degrades to ~4 µs once deleted slots pile up at its front, while popitem(last=False) stays at
    ~0.8 µs. Building the Rust matchers takes ~0.2 s: make the parser once per process.
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
            self._extract_browser, self._extract_os = extractors
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
            return self._info(user_agent)
        except (UnicodeError, ValueError, TypeError):
            # Lone surrogates (a header decoded with surrogateescape) cannot cross into Rust or re2 as UTF-8.
            user_agent = user_agent.encode("utf-8", "replace").decode("utf-8")
            try:
                return self._info(user_agent)
            except Exception:  # noqa: BLE001 - a parser bug must not lose the click; the device is unknown.
                return UNKNOWN_DEVICE

    def _info(self, user_agent: str) -> DeviceInfo:
        if self._resolver is not None:
            from ua_parser import Domain

            result = self._resolver(user_agent, Domain.USER_AGENT | Domain.OS)
            browser, os = _family(result.user_agent), _family(result.os)
        else:
            browser, os = _family(self._extract_browser(user_agent)), _family(self._extract_os(user_agent))
        return DeviceInfo(device_type_of(user_agent), os, browser)
