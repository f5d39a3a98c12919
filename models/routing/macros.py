"""Offer URL macros: compile a Keitaro-style template once, render it per click.

`compile_url(template)` is called when an offer is saved (to reject a bad URL with one clear sentence) and
when offer config is loaded into a worker's cache; the click hot path only calls `UrlTemplate.render`, which
fills pre-split slots and joins a list.

The security rule: macros may appear only in the path, query and fragment. The scheme and the authority
(user-info, host, port) are literal text checked at compile time, the authority must be closed by `/`, `?`
or `#` before the first macro, and every substituted value is percent-encoded with nothing left safe, so
nothing a visitor sends can change where the redirect goes.

The delivery rule: a rendered URL is printable ASCII, so it always fits in a Location header (a header
the server cannot encode answered a 500 after the click was recorded). Compiling rewrites the template
into that form: an international host becomes its IDNA (punycode) name and a space or non-ASCII
character in a literal part is percent-encoded as UTF-8; `UrlTemplate.source` is the rewritten text,
which is what an offer stores (`saved_url`, which also refuses an encoded NUL, `%00`).
"""

from __future__ import annotations

import calendar
import datetime
import random
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from models.errors import LannerError

__all__ = [
    "LANDER_MACROS",
    "MACRO_NAMES",
    "MacroError",
    "UrlTemplate",
    "compile_url",
    "rename_macros",
    "saved_url",
]


class MacroError(LannerError, ValueError):
    """An offer URL template that cannot be used; the message is one sentence fit to show the user."""


MACRO_NAMES: frozenset[str] = frozenset(
    (
        "subid",
        "campaign_id",
        "campaign_name",
        "stream_id",
        "offer_id",
        *(f"sub_id_{n}" for n in range(1, 31)),
        "ip",
        "user_agent",
        "referrer",
        "source",
        "external_id",
        "cost",
        "keyword",
        "country",
        "region",
        "city",
        "device_type",
        "os",
        "browser",
        "language",
        "random",
    )
)

# A lander's URL may also name {offer}: the absolute URL of its LP click (/lp/click?subid=...), the
# link the page sends the visitor on to the offer with (models/clicks/decision.py).
LANDER_MACROS: frozenset[str] = frozenset({"offer"})

DATE_MACRO = "date"
RANDOM_MACRO = "random"
RANDOM_LOW = 10**9  # {random} is always ten digits: RANDOM_LOW <= n < RANDOM_HIGH
RANDOM_HIGH = 10**10

_SCHEME_RE = re.compile(r"https?://", re.IGNORECASE)
# C0 and C1 controls, DEL and the Unicode line/paragraph separators: never valid anywhere in a Location.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_PORT_RE = re.compile(r"[0-9]{1,5}")
_HOST_FORBIDDEN = frozenset('<>"^`|{}\\')

# Percent-encoding identical to urllib.parse.quote(value, safe=""): only RFC 3986 unreserved characters
# survive. PERF: a 256-entry str.translate table over the UTF-8 bytes (decoded as latin-1) is about twice
# as fast as quote() on values that need encoding, and the rstrip() check returns ids untouched.
_UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~"
_QUOTE_TABLE = [chr(b) if chr(b) in _UNRESERVED else f"%{b:02X}" for b in range(256)]


def _quote(value: str) -> str:
    """Percent-encode `value` exactly as `quote(value, safe="")` does, but never raise on lone surrogates."""
    if not value.rstrip(_UNRESERVED):
        return value
    if not value.isascii():
        value = value.encode("utf-8", "surrogatepass").decode("latin-1")
    return value.translate(_QUOTE_TABLE)


# PHP date() letters. A naive datetime is taken to be UTC.
_DAY_SHORT = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY_LONG = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_SHORT = ("", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH_LONG = (
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _offset_seconds(now: datetime.datetime) -> int:
    offset = now.utcoffset()
    return 0 if offset is None else int(offset.total_seconds())


def _offset(now: datetime.datetime, colon: str) -> str:
    seconds = _offset_seconds(now)
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    return f"{sign}{hours:02d}{colon}{rest // 60:02d}"


def _epoch(now: datetime.datetime) -> int:
    return calendar.timegm(now.utctimetuple())


def _ordinal_suffix(day: int) -> str:
    if 10 <= day <= 19:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


_DATE_LETTERS: dict[str, Callable[[datetime.datetime], str]] = {
    # day
    "d": lambda now: f"{now.day:02d}",
    "D": lambda now: _DAY_SHORT[now.weekday()],
    "j": lambda now: str(now.day),
    "l": lambda now: _DAY_LONG[now.weekday()],
    "N": lambda now: str(now.isoweekday()),
    "S": lambda now: _ordinal_suffix(now.day),
    "w": lambda now: str(now.isoweekday() % 7),
    "z": lambda now: str(now.timetuple().tm_yday - 1),
    # week, month, year
    "W": lambda now: f"{now.isocalendar()[1]:02d}",
    "F": lambda now: _MONTH_LONG[now.month],
    "m": lambda now: f"{now.month:02d}",
    "M": lambda now: _MONTH_SHORT[now.month],
    "n": lambda now: str(now.month),
    "t": lambda now: str(calendar.monthrange(now.year, now.month)[1]),
    "L": lambda now: "1" if calendar.isleap(now.year) else "0",
    "o": lambda now: str(now.isocalendar()[0]),
    "Y": lambda now: f"{now.year:04d}",
    "y": lambda now: f"{now.year % 100:02d}",
    # time
    "a": lambda now: "am" if now.hour < 12 else "pm",
    "A": lambda now: "AM" if now.hour < 12 else "PM",
    "B": lambda now: f"{(_epoch(now) % 86400 + 3600) * 10 // 864 % 1000:03d}",
    "g": lambda now: str(now.hour % 12 or 12),
    "G": lambda now: str(now.hour),
    "h": lambda now: f"{now.hour % 12 or 12:02d}",
    "H": lambda now: f"{now.hour:02d}",
    "i": lambda now: f"{now.minute:02d}",
    "s": lambda now: f"{now.second:02d}",
    "u": lambda now: f"{now.microsecond:06d}",
    "v": lambda now: f"{now.microsecond // 1000:03d}",
    # timezone
    "e": lambda now: getattr(now.tzinfo, "key", None) or now.tzname() or "UTC",
    "I": lambda now: "1" if now.dst() else "0",
    "O": lambda now: _offset(now, ""),
    "P": lambda now: _offset(now, ":"),
    "p": lambda now: "Z" if _offset_seconds(now) == 0 else _offset(now, ":"),
    "T": lambda now: now.tzname() or "UTC",
    "Z": lambda now: str(_offset_seconds(now)),
    # full date/time
    "c": lambda now: (
        f"{now.year:04d}-{now.month:02d}-{now.day:02d}"
        f"T{now.hour:02d}:{now.minute:02d}:{now.second:02d}{_offset(now, ':')}"
    ),
    "r": lambda now: (
        f"{_DAY_SHORT[now.weekday()]}, {now.day:02d} {_MONTH_SHORT[now.month]} {now.year:04d}"
        f" {now.hour:02d}:{now.minute:02d}:{now.second:02d} {_offset(now, '')}"
    ),
    "U": lambda now: str(_epoch(now)),
}


def _compile_date_format(date_format: str) -> Callable[[datetime.datetime], str]:
    """Turn a PHP date() format into a function of `now`; other characters and `\\x` escapes are literal."""
    parts: list[str] = []
    slots: list[tuple[int, Callable[[datetime.datetime], str]]] = []
    literal: list[str] = []
    index = 0
    while index < len(date_format):
        char = date_format[index]
        if char == "\\" and index + 1 < len(date_format):
            index += 1
            literal.append(date_format[index])
        elif char in _DATE_LETTERS:
            parts.append("".join(literal))
            literal = []
            slots.append((len(parts), _DATE_LETTERS[char]))
            parts.append("")
        else:
            literal.append(char)
        index += 1
    parts.append("".join(literal))

    if not slots:
        constant = "".join(parts)
        return lambda now: constant
    frozen_parts, frozen_slots = tuple(parts), tuple(slots)

    def format_date(now: datetime.datetime) -> str:
        out = list(frozen_parts)
        for slot, letter in frozen_slots:
            out[slot] = letter(now)
        return "".join(out)

    return format_date


class MacroSource(Protocol):
    """What render() reads a macro's value from: a mapping, or a click's values made on demand."""

    def get(self, name: str, /) -> object: ...


@dataclass(frozen=True, slots=True)
class UrlTemplate:
    """A validated offer URL template, split into literal parts and macro slots.

    Construct it with `compile_url` (or `UrlTemplate(source)`, which validates the same way). Equality and
    hashing use `source` only.
    """

    source: str
    extra_macros: frozenset[str] = field(default=frozenset(), compare=False)
    _parts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _plain: tuple[tuple[int, str], ...] = field(init=False, repr=False, compare=False)
    _random: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _dates: tuple[tuple[int, Callable[[datetime.datetime], str]], ...] = field(
        init=False, repr=False, compare=False
    )
    _macros: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        source, spans = _parse(self.source, self.extra_macros)
        object.__setattr__(self, "source", source)
        parts: list[str] = []
        plain: list[tuple[int, str]] = []
        randoms: list[int] = []
        dates: list[tuple[int, Callable[[datetime.datetime], str]]] = []
        names: set[str] = set()
        position = 0
        for start, end, name, date_format in spans:
            parts.append(self.source[position:start])
            slot = len(parts)
            parts.append("")
            if name == DATE_MACRO:
                dates.append((slot, _compile_date_format(date_format)))
            elif name == RANDOM_MACRO:
                randoms.append(slot)
            else:
                plain.append((slot, name))
            names.add(name)
            position = end
        parts.append(self.source[position:])
        object.__setattr__(self, "_parts", tuple(parts))
        object.__setattr__(self, "_plain", tuple(plain))
        object.__setattr__(self, "_random", tuple(randoms))
        object.__setattr__(self, "_dates", tuple(dates))
        object.__setattr__(self, "_macros", frozenset(names))

    @property
    def macros(self) -> frozenset[str]:
        """The macro names used, lowercase; every `{date:...}` is reported as "date"."""
        return self._macros

    @property
    def uses_date(self) -> bool:
        """Whether render() needs `now` (callers may pass None otherwise and skip making one)."""
        return bool(self._dates)

    def render(self, values: MacroSource, now: datetime.datetime | None) -> str:
        """The redirect URL for one click: each macro replaced by its percent-encoded value.

        A name missing from `values` (or None) renders empty; `{random}` is one fresh ten-digit number per
        render (the same number if it appears twice); `{date:...}` formats `now` as given (naive = UTC).
        """
        parts = list(self._parts)
        get = values.get
        for slot, name in self._plain:
            value = get(name)
            if value is not None:
                parts[slot] = _quote(value if value.__class__ is str else str(value))
        if self._random:
            # PERF: random() is half the cost of randrange(); the number is a cache-buster, not a secret.
            number = str(RANDOM_LOW + int(random.random() * (RANDOM_HIGH - RANDOM_LOW)))
            for slot in self._random:
                parts[slot] = number
        for slot, format_date in self._dates:
            assert now is not None, "a template that uses the date is rendered with `now`"
            parts[slot] = _quote(format_date(now))
        return "".join(parts)


def saved_url(template: str, extra_macros: frozenset[str] = frozenset()) -> str:
    """An offer or redirect URL as it is saved: validated, rewritten as printable ASCII, and without
    `%00` (an encoded NUL, which servers read as the end of a string). MacroError if unusable.
    `extra_macros`: the traffic sources' parameter names (`{zoneid}`), allowed besides the click's.

    A URL saved before this rule still loads (compile_url): refusing it then would stop an offer
    that was working."""
    source = compile_url(template, extra_macros).source
    if "%00" in source:
        raise MacroError("Offer URL contains %00, an encoded NUL character that no offer URL needs.")
    return source


def compile_url(template: str, extra_macros: frozenset[str] = frozenset()) -> UrlTemplate:
    """Validate an offer URL template and split it for fast rendering; raise MacroError if it is unsafe.

    `extra_macros` are names allowed besides the click's (an outbound postback's `{payout}`, ...).
    """
    return UrlTemplate(template, extra_macros)


def rename_macros(template: str, renames: Mapping[str, str]) -> str:
    """`template` with each macro `renames` names written as its new name: a traffic source's
    `{zoneid}` as the `{sub_id_1}` its value is stored in. MacroError for unbalanced braces."""
    if not renames or "{" not in template:
        return template
    out, position = [], 0
    for start, end, inner in _find_macros(template):
        name = inner.lower() if inner.isascii() else inner
        if name in renames:
            out += [template[position:start], "{", renames[name], "}"]
            position = end
    out.append(template[position:])
    return "".join(out)


def _parse(
    template: str, extra_macros: frozenset[str] = frozenset()
) -> tuple[str, list[tuple[int, int, str, str]]]:
    """Validate `template`; return its printable-ASCII form and the macros in that form as
    (start, end, lowercase name, date format), in order."""
    control = _CONTROL_RE.search(template)
    if control:
        raise MacroError(
            f"Offer URL contains a control character (U+{ord(control.group()):04X}),"
            " such as a line break or tab."
        )

    scheme = _SCHEME_RE.match(template)
    if not scheme:
        colon = template.find(":")
        if "{" in (template[:colon] if colon != -1 else template[:1]):
            raise MacroError("Offer URL scheme must be a literal http or https, not a macro.")
        raise MacroError("Offer URL must be an absolute URL starting with http:// or https://.")

    authority_start = scheme.end()
    authority_end = len(template)
    for terminator in "/?#":
        found = template.find(terminator, authority_start)
        if found != -1 and found < authority_end:
            authority_end = found

    spans = _find_macros(template)
    for start, _end, inner in spans:
        if start < authority_end:
            raise MacroError(
                f"Macro {{{inner}}} is not allowed in the scheme or host of an offer URL;"
                " end the host with '/', '?' or '#' before any macro."
            )
    _check_authority(template[authority_start:authority_end])

    try:
        split = urlsplit(template)
    except ValueError as exc:
        raise MacroError(f"Offer URL is not a valid URL ({exc}).") from None
    if split.netloc != template[authority_start:authority_end]:
        raise MacroError("Offer URL host could not be read unambiguously.")

    names = [_macro_name(inner, extra_macros) for _start, _end, inner in spans]
    out = [template[:authority_start], _ascii_authority(template[authority_start:authority_end])]
    length = len(out[0]) + len(out[1])
    position = authority_end
    ascii_spans = []
    for (start, end, _inner), name in zip(spans, names, strict=True):
        literal = _ascii_literal(template[position:start])
        out += [literal, template[start:end]]  # The macro's own text stays: only its value is sent.
        ascii_spans.append((length + len(literal), length + len(literal) + end - start, *name))
        length += len(literal) + end - start
        position = end
    out.append(_ascii_literal(template[position:]))
    return "".join(out), ascii_spans


def _ascii_literal(text: str) -> str:
    """A literal part of the path, query or fragment as printable ASCII: a space or a non-ASCII
    character percent-encoded as UTF-8 (as a browser sends it)."""
    if text.isascii() and " " not in text:
        return text
    return "".join(char if char.isascii() and char != " " else _quote(char) for char in text)


def _ascii_authority(authority: str) -> str:
    """The authority (checked by _check_authority) with its host as IDNA (punycode) ASCII and any
    non-ASCII user-info percent-encoded."""
    if authority.isascii():
        return authority
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        raise MacroError("Offer URL has non-ASCII characters in its IPv6 host.")
    host, colon, port = hostport.partition(":")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise MacroError(f"Offer URL host {host!r} is not a valid international domain name.") from None
    return _ascii_literal(userinfo) + at + host + colon + port


def _find_macros(template: str) -> list[tuple[int, int, str]]:
    """The `{...}` spans in `template` as (start, end, inner text); unbalanced braces raise MacroError."""
    spans: list[tuple[int, int, str]] = []
    position = 0
    while True:
        opening = template.find("{", position)
        closing = template.find("}", position)
        if closing != -1 and (opening == -1 or closing < opening):
            raise MacroError(f"Offer URL has a '}}' without a matching '{{' at character {closing + 1}.")
        if opening == -1:
            return spans
        inner = template[opening + 1 : closing] if closing != -1 else ""
        if closing == -1 or "{" in inner:
            raise MacroError(f"Offer URL has a '{{' without a matching '}}' at character {opening + 1}.")
        spans.append((opening, closing + 1, inner))
        position = closing + 1


def _macro_name(inner: str, extra_macros: frozenset[str]) -> tuple[str, str]:
    """(lowercase name, date format or "") for the text between the braces of one macro."""
    if not inner:
        raise MacroError("Offer URL has an empty macro {}.")
    head, colon, date_format = inner.partition(":")
    name = head.lower() if head.isascii() else head
    if name == DATE_MACRO:
        if not date_format:
            raise MacroError(f"Macro {{{inner}}} needs a format, for example {{date:Y-m-d}}.")
        return name, date_format
    if colon or (name not in MACRO_NAMES and name not in extra_macros):
        raise MacroError(f"Unknown macro {{{inner}}} in offer URL.")
    return name, ""


def _check_authority(authority: str) -> None:
    """Reject an authority (user-info, host, port) that is empty, odd or could be read two ways."""
    if "\\" in authority:
        raise MacroError("Offer URL host must not contain a backslash.")
    for char in authority:
        if unicodedata.category(char)[0] in "CZ":
            raise MacroError("Offer URL host must not contain spaces or invisible characters.")
    _userinfo, _at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        closing = hostport.find("]")
        if closing == -1:
            raise MacroError("Offer URL has an IPv6 host without a closing ']'.")
        host, after = hostport[: closing + 1], hostport[closing + 1 :]
        if after and not after.startswith(":"):
            raise MacroError("Offer URL has text after its IPv6 host that is not a port.")
        has_port, port = bool(after), after[1:]
    else:
        host, colon, port = hostport.partition(":")
        has_port = bool(colon)
    if not host:
        raise MacroError("Offer URL must have a host, for example https://example.com/.")
    if any(char in _HOST_FORBIDDEN for char in host):
        raise MacroError(f"Offer URL host {host!r} contains a character not allowed in a host.")
    if has_port and not (_PORT_RE.fullmatch(port) and 0 < int(port) <= 65535):
        raise MacroError("Offer URL port must be a number from 1 to 65535.")
