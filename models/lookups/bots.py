"""The bot decision for every click: is this hit a person, or a crawler, link preview, script or listed IP?

`BotDetector.reason(user_agent, ip, signals)` is the one decision of the click path, the spool flusher and
`lanner simulate`. It answers None for a human-looking hit, else a short reason, shown by `lanner simulate`.
The first check that hits gives the reason, cheapest and most certain first:

    signals (what the edge read besides the User-Agent, `request_signals`; decided on the click path):
    "head request"        a HEAD request: link checkers and unfurlers probing the redirect
    "from header"         a From header: RFC 9110 §10.1.2 asks robots to send one; browsers never do
    "scanner header"      an X-Scanner header (Netsparker)
    "<header>: <reason>"  an alternative User-Agent header crawlerdetect reads (X-Original-User-Agent,
                          X-Device-User-Agent...), judged as a User-Agent; or Sec-CH-UA, the browser's
                          brand list, judged by crawlerdetect's patterns only ("HeadlessChrome")
    the User-Agent (cached per User-Agent):
    "empty user agent"    no User-Agent, or only whitespace
    "link preview"        a chat or social app fetching the link for a preview card (LINK_PREVIEW_PATTERNS)
    "crawler: <text>"     the crawlerdetect package's maintained pattern list, with the text that matched
    "<family>: <text>"    Lanner's own list, models/lookups/botsignatures.py ("ad review: ...", "ai: ...")
    the address:
    "ip list"             the configured IPv4/IPv6 addresses and CIDR networks (LANNER_BOT_IPS)
    "ip range: <source>"  the crawler networks the large platforms publish (models/lookups/crawlerranges.py)

The crawler verdict is the one `crawlerdetect.CrawlerDetect().is_crawler(ua)` gives, computed faster (see
`BotDetector.crawler_match`), except that "Cronet" (Chromium's network stack) is no "cron" job.
Sec-CH-UA-Platform is no signal: request-desktop-site makes it disagree with a person's own User-Agent.
A click flagged here is stored with the device type "bot", and only such a click
(models/clicks/enrichment.py).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

import re2
from crawlerdetect.providers.crawlers import data as CRAWLER_PATTERNS
from crawlerdetect.providers.exclusions import data as EXCLUSION_PATTERNS

from models.lookups import botsignatures
from models.lookups.iplist import IpList

if TYPE_CHECKING:
    from models.lookups.crawlerranges import CrawlerRanges

__all__ = ["LINK_PREVIEW_PATTERNS", "SIGNAL_HEADERS", "BotDetector", "request_signals"]

# Fetchers that draw a preview of a shared link. Most are in crawlerdetect's list too; they are named here
# because a preview is not a crawl (the link was shared by a person) and reports count them apart. Anchored
# entries are apps' own HTTP clients (a person tapping the link gets the phone's browser or web view).
LINK_PREVIEW_PATTERNS: tuple[str, ...] = (
    r"facebookexternalhit",
    r"Facebot",
    r"Twitterbot",
    r"Slackbot",
    r"Slack-ImgProxy",
    r"TelegramBot",
    r"WhatsApp",
    r"Discordbot",
    r"LinkedInBot",
    r"SkypeUriPreview",
    r"MicrosoftPreview",
    r"vkShare",
    r"^Viber/",  # Not in crawlerdetect's list.
    r"Pinterestbot",
    r"^Pinterest/",
    r"redditbot",
    r"Iframely",
    r"Embedly",
    r"^Mastodon/",
    r"Cardyb",  # Bluesky
    r"Snap URL Preview",
    r"kakaotalk-scrap",
)

MAX_CACHED_LENGTH = 1024  # Longer User-Agents are checked but not cached, so the cache stays small.
MAX_REASON_TEXT = 60
MAX_SIGNAL_VALUE = 512  # Each header value kept in the signals, like the edge bounds the User-Agent.
MAX_CACHED_SIGNALS = 4096  # Distinct signal texts remembered (Sec-CH-UA: a few per browser release).
_MISSING = object()

# crawlerdetect's other User-Agent headers (crawlerdetect/providers/headers.py, in its order): a proxy's or
# transcoder's copy of the device's User-Agent, judged as one. Then the brand list of client hints.
SIGNAL_HEADERS: tuple[tuple[str, str], ...] = (
    ("HTTP_X_OPERAMINI_PHONE_UA", "x-operamini-phone-ua"),
    ("HTTP_X_DEVICE_USER_AGENT", "x-device-user-agent"),
    ("HTTP_X_ORIGINAL_USER_AGENT", "x-original-user-agent"),
    ("HTTP_X_SKYFIRE_PHONE", "x-skyfire-phone"),
    ("HTTP_X_BOLT_PHONE_UA", "x-bolt-phone-ua"),
    ("HTTP_DEVICE_STOCK_UA", "device-stock-ua"),
    ("HTTP_X_UCBROWSER_DEVICE_UA", "x-ucbrowser-device-ua"),
)
BRANDS_HEADER = ("HTTP_SEC_CH_UA", "sec-ch-ua")
_RARE_SIGNAL_KEYS = frozenset(("HTTP_FROM", "HTTP_X_SCANNER", *(key for key, _ in SIGNAL_HEADERS)))


def request_signals(environ: dict) -> str:
    """A request's bot signals besides its User-Agent and address, as one short text; "" for most.

    Tab-separated parts: "head", "from", "scanner", or "<header> <value>" for SIGNAL_HEADERS and
    Sec-CH-UA (values bounded, tabs replaced). The edge keeps it on the Visit (routes/click.py);
    `BotDetector.signals_reason` reads it. PERF: ~0.25 µs for a browser's request (at most Sec-CH-UA).
    """
    brands = environ.get(BRANDS_HEADER[0])
    if environ.get("REQUEST_METHOD") != "HEAD" and _RARE_SIGNAL_KEYS.isdisjoint(environ):
        if not brands:
            return ""
        text = f"{BRANDS_HEADER[1]} {brands[:MAX_SIGNAL_VALUE]}"
        return text.replace("\t", " ") if "\t" in text else text
    parts = []
    if environ.get("REQUEST_METHOD") == "HEAD":
        parts.append("head")
    if environ.get("HTTP_FROM"):
        parts.append("from")
    if environ.get("HTTP_X_SCANNER"):
        parts.append("scanner")
    for key, name in SIGNAL_HEADERS:
        value = environ.get(key)
        if value:
            parts.append(f"{name} {value[:MAX_SIGNAL_VALUE]}")
    if brands:
        parts.append(f"{BRANDS_HEADER[1]} {brands[:MAX_SIGNAL_VALUE]}")
    return "\t".join(part.replace("\t", " ") for part in parts)


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False  # crawlerdetect compiles its patterns with re.IGNORECASE.
    options.never_capture = True  # PERF: without groups a search costs ~2 µs instead of ~5-15 µs.
    options.log_errors = False  # Rejected patterns are expected (see _CrawlerPatterns); keep stderr clean.
    return options


def _union(patterns: Iterable[str]) -> str:
    return "|".join(f"(?:{pattern})" for pattern in patterns)


# What re2 may refuse (lookarounds, backreferences, possessive and atomic groups): such patterns are tried
# one by one; the rest are tried as one union, which compiles exactly when each of them does.
_MAYBE_REFUSED = re.compile(r"\(\?(?:[=!>]|<[=!])|\\[1-9]|[*+?}][+]")


def _re2_accepts(patterns: Iterable[str], options: re2.Options) -> tuple[list[str], list[str]]:
    """(the patterns re2 compiles; the ones it refuses), each in the order given.

    PERF: compiling ~1,500 patterns one by one to learn which re2 refuses cost ~100 ms of every worker's
    start; one compile of the union of those that look fine, and the few suspects alone, ~5 ms."""
    patterns = list(patterns)
    suspects = {pattern for pattern in patterns if _MAYBE_REFUSED.search(pattern)}
    try:
        re2.compile(_union(p for p in patterns if p not in suspects), options)
    except re2.error:  # One of them is refused after all (or the union is too big): find out one by one.
        suspects = set(patterns)
    refused = set()
    for pattern in suspects:
        try:
            re2.compile(pattern, options)
        except re2.error:
            refused.add(pattern)
    return [p for p in patterns if p not in refused], [p for p in patterns if p in refused]


def relaxed_pattern(pattern: str) -> str | None:
    """`pattern` without anchors (^, $) and lookaround groups: it matches wherever `pattern` does, and more.

    None when the pattern cannot be read with confidence (unbalanced brackets).
    """
    out: list[str] = []
    index, length = 0, len(pattern)
    in_class = False
    while index < length:
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith("]", index + 1) or pattern.startswith("^]", index + 1):
                out.append(pattern[index : index + 2])  # A leading "]" is literal: keep it out of the scan.
                index += 2
                continue
        elif char in "^$":
            index += 1
            continue
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), index):
            index = _group_end(pattern, index)
            if index < 0:
                return None
            continue
        out.append(char)
        index += 1
    return None if in_class else "".join(out)


def _group_end(pattern: str, start: int) -> int:
    """The index just past the group opening at `start`, or -1 if it is never closed."""
    depth = 0
    index = start
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return -1


class _CrawlerPatterns:
    """crawlerdetect's patterns, compiled once per process for BotDetector.crawler_match.

    `exact` is every pattern re2 accepts, as one automaton; the few it refuses (lookarounds, such as
    `Yandex(?!Search)`) go to `exact_python`, a small Python `re` union. `prefilter` holds every pattern,
    and the link previews', relaxed by `relaxed_pattern`, so it matches a User-Agent whenever a pattern
    could match what is left of it after the exclusions are deleted, except through text glued across a
    deletion (see crawler_match).
    """

    def __init__(self) -> None:
        options = _re2_options()
        accepted, refused = _re2_accepts(CRAWLER_PATTERNS, options)
        # PERF: the link previews ride in the same prefilter, so a browser costs one re2 search, not two.
        relaxed = {p: relaxed_pattern(p) for p in (*CRAWLER_PATTERNS, *LINK_PREVIEW_PATTERNS)}
        readable, refused_relaxed = _re2_accepts([r for r in relaxed.values() if r is not None], options)
        loose = dict.fromkeys(readable)  # Ordered and deduplicated.
        unreadable = set(refused_relaxed)
        loose_python = [p if r is None else r for p, r in relaxed.items() if r is None or r in unreadable]
        self.exact = re2.compile(_union(accepted), options)
        self.exact_python = re.compile(_union(refused), re.IGNORECASE) if refused else None
        # Where both match at the same place, crawlerdetect's single regex takes the pattern listed first:
        # `exact_head` holds the accepted patterns listed before the first refused one to settle that.
        first_refused = CRAWLER_PATTERNS.index(refused[0]) if refused else len(CRAWLER_PATTERNS)
        head = CRAWLER_PATTERNS[:first_refused]
        self.exact_head = re2.compile(_union(head), options) if head else None
        self.prefilter = re2.compile(_union(loose), options)
        self.prefilter_python = re.compile(_union(loose_python), re.IGNORECASE) if loose_python else None
        # The same regex crawlerdetect builds, so the browser tokens deleted are exactly its own, and ours.
        exclusions = (*EXCLUSION_PATTERNS, *botsignatures.EXCLUSIONS)
        self.exclusions = re.compile(f"({'|'.join(exclusions)})", re.IGNORECASE)
        self.link_preview = re2.compile(_union(LINK_PREVIEW_PATTERNS), options)


class _Signatures:
    """Lanner's own list (botsignatures.FAMILIES), compiled once per process: one union for the verdict
    (~1.5-3 µs a search); on a hit, one pass of an RE2 set says which rules match (~1 µs), so only the
    first family with a hit is searched again, for the text of the reason. A matching rule that exempts
    real browsers (botsignatures.EXEMPT_BROWSERS) is dropped when the User-Agent is one of them, and that
    family's other rules are then searched one by one. A browser that matches nothing of the list pays
    for none of it."""

    def __init__(self) -> None:
        options = _re2_options()
        families = botsignatures.FAMILIES
        exempt = botsignatures.EXEMPT_BROWSERS
        rules = [
            (position, pattern) for position, patterns in enumerate(families.values()) for pattern in patterns
        ]
        self.any = re2.compile(_union(pattern for _, pattern in rules), options)
        self.rules = re2.Set.SearchSet(options)
        for _, pattern in rules:
            self.rules.Add(pattern)
        self.rules.Compile()
        self.rule_family = tuple(position for position, _ in rules)  # Rule index -> family position.
        self.exempt = {
            index: re2.compile(_union(exempt[pattern]), options)
            for index, (_, pattern) in enumerate(rules)
            if pattern in exempt
        }
        # (family, its union, its rules one by one with the browsers each exempts: only if it has such a rule)
        self.families = tuple(
            (family, re2.compile(_union(patterns), options), _exempting_rules(patterns, exempt, options))
            for family, patterns in families.items()
        )

    def reason(self, user_agent: str) -> str | None:
        """`user_agent` without lone surrogates (_searchable)."""
        # PERF: a browser's miss stays this small method; with the hit's code inline its frame cost ~3 %.
        return self._hit_reason(user_agent) if _is_found(self.any, user_agent) else None

    def _hit_reason(self, user_agent: str) -> str | None:
        matched = self.rules.Match(user_agent)
        if matched is None:  # pragma: no cover - RE2's set gives up only when its DFA runs out of memory.
            return self.reason_by_family(user_agent)
        exempt = self.exempt
        dropped = {i for i in matched if i in exempt and exempt[i].search(user_agent) is not None}
        kept = [i for i in matched if i not in dropped] if dropped else matched
        if not kept:
            return None  # Only rules that exempt this browser matched.
        position = min(self.rule_family[i] for i in kept)
        family, pattern, rules = self.families[position]
        if dropped and any(self.rule_family[i] == position for i in dropped):
            found = _first_match(user_agent, rules)
        else:
            found = pattern.search(user_agent)
        return f"{family}: {found.group(0)[:MAX_REASON_TEXT]}"  # type: ignore[union-attr]

    def reason_by_family(self, user_agent: str) -> str | None:
        """`reason` without the set: each family's union in order, the first that matches gives the reason
        (its rules one by one when this browser is exempt from one of them)."""
        is_exempt = None
        for family, pattern, rules in self.families:
            found = pattern.search(user_agent)
            if found is not None and rules is not None:
                if is_exempt is None:
                    is_exempt = any(
                        browsers.search(user_agent) is not None for browsers in self.exempt.values()
                    )
                if is_exempt:
                    found = _first_match(user_agent, rules)
            if found is not None:
                return f"{family}: {found.group(0)[:MAX_REASON_TEXT]}"
        return None


def _exempting_rules(
    patterns: tuple[str, ...], exempt: dict[str, tuple[str, ...]], options: re2.Options
) -> tuple[tuple[re2._Regexp, re2._Regexp | None], ...] | None:
    if not any(pattern in exempt for pattern in patterns):
        return None
    return tuple(
        (
            re2.compile(pattern, options),
            re2.compile(_union(exempt[pattern]), options) if pattern in exempt else None,
        )
        for pattern in patterns
    )


def _first_match(
    user_agent: str, rules: tuple[tuple[re2._Regexp, re2._Regexp | None], ...]
) -> re2._Match | None:
    """What the family's union finds in `user_agent` without the rules exempting it: the leftmost match,
    at the same place the rule listed first (re2's leftmost-first choice among alternatives)."""
    best = None
    for rule, browsers in rules:
        found = rule.search(user_agent)
        if found is None or (best is not None and found.start() >= best.start()):
            continue
        if browsers is not None and browsers.search(user_agent) is not None:
            continue
        best = found
    return best


# google-re2's own Match, below its Python wrapper: private, so looked up once and, if a release moves
# it, the wrapper's search() answers instead (the same verdicts, ~3 µs slower).
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
_NOT_FOUND = (-1, -1)


def _is_found(regex: re2._Regexp, text: str) -> bool:
    """`regex.search(text) is not None`, for a `text` without lone surrogates (_searchable).

    PERF: the wrapper's search() costs ~3 µs more than the match itself (a generator, the text's str
    offsets computed, a match object), and a browser's User-Agent is searched twice for nothing per
    new User-Agent (the crawler prefilter and Lanner's list): RE2's own Match answers the same,
    falling back from its DFA to the NFA as search() does. A Set would be as quick, but its Match
    says "no match" when its DFA runs out of memory."""
    compiled = getattr(regex, "_regexp", None)
    if _UNANCHORED is None or compiled is None:
        return regex.search(text) is not None
    encoded = text.encode("utf-8")
    return compiled.Match(_UNANCHORED, encoded, 0, len(encoded))[0] != _NOT_FOUND


@lru_cache(maxsize=1)
def _crawler_patterns() -> _CrawlerPatterns:
    return _CrawlerPatterns()


@lru_cache(maxsize=1)
def _signatures() -> _Signatures:
    return _Signatures()


def _searchable(text: str) -> str:
    """`text` without lone surrogates (from a header decoded with surrogateescape), which re2 cannot take."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


class BotDetector:
    """The bot decision (see the module docstring); build one per process (compiling takes ~80 ms).

    PERF (per uncached User-Agent, measured on ~70 real ones): crawlerdetect's own check ~950 µs for a
    browser and ~150 µs for a crawler; here ~4-5 µs for a browser (two re2 searches: crawlerdetect's
    prefilter and Lanner's list) and ~30-40 µs for a crawler. A cache hit is one dict lookup (~0.2 µs);
    the IP list and the published ranges add one bisect each (~0.3 µs), signals a dict lookup.
    See `crawler_match` for how the crawler verdict stays crawlerdetect's.
    """

    def __init__(
        self,
        ip_ranges: Iterable[str] = (),
        cache_size: int = 8192,
        crawler_ranges: CrawlerRanges | None = None,
    ) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, not {cache_size}.")
        self.ip_list = IpList(ip_ranges)
        self.crawler_ranges = crawler_ranges
        self.cache_size = cache_size
        self._patterns = _crawler_patterns()
        self._signatures = _signatures()
        self._cache: OrderedDict[str, str | None] = OrderedDict()
        self._signal_cache: dict[str, str | None] = {}

    def reason(self, user_agent: str, ip: str, signals: str = "") -> str | None:
        """None for a human-looking hit, else why it is a bot (see the module docstring)."""
        if signals:
            reason = self.signals_reason(signals)
            if reason is not None:
                return reason
        cache = self._cache
        verdict = cache.get(user_agent, _MISSING)
        if verdict is _MISSING:
            verdict = self._user_agent_reason(user_agent)
            if isinstance(user_agent, str) and len(user_agent) <= MAX_CACHED_LENGTH:
                if len(cache) >= self.cache_size:
                    cache.popitem(last=False)  # FIFO; see UserAgentParser for why not a plain dict.
                cache[user_agent] = verdict
        if verdict is None:
            if self.ip_list and ip in self.ip_list:
                return "ip list"
            if self.crawler_ranges is not None:
                return self.crawler_ranges.reason(ip)
        return verdict  # type: ignore[return-value]

    def is_bot(self, user_agent: str, ip: str, signals: str = "") -> bool:
        return self.reason(user_agent, ip, signals) is not None

    def signals_reason(self, signals: str) -> str | None:
        """The reason `signals` (request_signals' text) alone make a bot, or None. Cached: a browser's
        signals are its Sec-CH-UA, and a browser release sends one."""
        cache = self._signal_cache
        verdict = cache.get(signals, _MISSING)
        if verdict is _MISSING:
            verdict = self._signals_reason(signals)
            if len(cache) >= MAX_CACHED_SIGNALS:
                cache.clear()  # Only a flood of made-up headers gets here; refilling costs ~µs each.
            cache[signals] = verdict
        return verdict  # type: ignore[return-value]

    def refresh(self) -> None:
        """Pick up a replaced ranges file (`lanner bots update`); at most one stat() a second."""
        if self.crawler_ranges is not None:
            self.crawler_ranges.refresh()

    @property
    def cache_length(self) -> int:
        return len(self._cache)

    def _signals_reason(self, signals: str) -> str | None:
        for part in signals.split("\t"):
            name, _, value = part.partition(" ")
            if name == "head":
                return "head request"
            if name == "from":
                return "from header"
            if name == "scanner":
                return "scanner header"
            if name == BRANDS_HEADER[1]:
                # A brand list, not a User-Agent: crawlerdetect's patterns only, as crawlerdetect reads it
                # (its exclusion `"Yandex"` keeps Yandex Browser's brand a person's), not Lanner's list.
                found = self._crawlerdetect_reason(_searchable(value).strip())
            else:
                found = self._user_agent_reason(value) if value.strip() else None
            if found is not None:
                return f"{name}: {found}"
        return None

    def _user_agent_reason(self, user_agent: str) -> str | None:
        if not isinstance(user_agent, str):
            return "empty user agent"
        user_agent = _searchable(user_agent).strip()
        if not user_agent:
            return "empty user agent"
        found = self._crawlerdetect_reason(user_agent)
        if found is None:
            found = self._signatures.reason(user_agent)
        return found

    def _crawlerdetect_reason(self, user_agent: str) -> str | None:
        if not user_agent or not self._may_match(user_agent):
            return None
        if self._patterns.link_preview.search(user_agent) is not None:
            return "link preview"
        matched = self._crawler_match(user_agent)
        if matched is not None:
            return f"crawler: {matched[:MAX_REASON_TEXT]}"
        return None

    def crawler_match(self, user_agent: str) -> str | None:
        """The text crawlerdetect's patterns match in `user_agent`, or None when it is not a crawler.

        crawlerdetect deletes browser tokens ("Mozilla/5.0", "Safari/537.36", "Android 14", ...) with its
        exclusion patterns, then searches its crawler patterns in what is left. PERF: that deletion costs
        ~25-40 µs per User-Agent in Python `re` (~150-220 µs with re2's Python wrapper, whose sub() loops in
        Python), and a browser's User-Agent almost never contains a crawler pattern. So first the patterns,
        relaxed (anchors and lookarounds dropped, which only widens them), are searched in the whole
        User-Agent with re2 (~2 µs); only a hit pays for the deletion and the exact search (~30 µs).
        Deleting text cannot create a match inside the text that is kept, and a relaxed pattern also finds
        a match that a deletion would move to the start or end; so the verdict is crawlerdetect's except
        when a crawler name is glued together across deleted text ("Ahr" + "Safari/1" + "efs"), which no
        real client sends. tests/test_bots.py checks the verdicts against crawlerdetect's on real
        User-Agents and on thousands of generated mixes of browser tokens and crawler names. Lanner's
        exclusions (botsignatures.EXCLUSIONS, "Cronet") are deleted with crawlerdetect's.
        Like crawlerdetect, the User-Agent is stripped first, and nothing left after deletion is no crawler.
        """
        user_agent = _searchable(user_agent).strip()
        return self._crawler_match(user_agent) if self._may_match(user_agent) else None

    def _may_match(self, user_agent: str) -> bool:
        patterns = self._patterns
        return _is_found(patterns.prefilter, user_agent) or (
            patterns.prefilter_python is not None and patterns.prefilter_python.search(user_agent) is not None
        )

    def _crawler_match(self, user_agent: str) -> str | None:
        patterns = self._patterns
        agent = patterns.exclusions.sub("", user_agent)
        if not agent:
            return None
        found = patterns.exact.search(agent)
        if patterns.exact_python is not None:
            other = patterns.exact_python.search(agent)
            if other is not None and (found is None or other.start() < found.start()):
                return other.group(0)
            if other is not None and found is not None and other.start() == found.start():
                head = patterns.exact_head.search(agent) if patterns.exact_head is not None else None
                if head is None or head.start() != other.start():
                    return other.group(0)
                return head.group(0)
        return found.group(0) if found is not None else None
