"""Stream filters: parsed from a small text syntax, stored as JSON, compiled once, evaluated per click.

A stream holds a list of filter specs (JSON-able dicts, stored as `json.dumps(list)` in `stream.filters`)
combined with AND or OR (`stream.filter_mode`). `parse_filter` turns one CLI expression into a spec and
`describe_filter` turns a spec back into that expression; `validate_filters` checks a list loaded from
JSON; `compile_filters` builds a `StreamFilters` once per config load, and the click hot path only calls
`StreamFilters.matches(subject, stream_id)`: regexes, IP ranges and lower-cased value sets are prepared up
front, and evaluation does no I/O of its own (seen_in_stream is the caller's) and allocates little: a
lower-cased copy of a text value, the packed bytes of an IP.

Text syntax: `name OP value`. Space around the operator is ignored.

    operator  meaning
    =         IS: the value is one of the listed values (text filters: equal, ignoring case)
    !=        IS NOT
    ~         contains one of the listed values, ignoring case (text filters only)
    !~        contains none of them
    ~/re/     matches the regex `re` anywhere, ignoring case (Python `re`; anchor with ^ and $)
    !~/re/    does not match the regex

    country=US,GB            device!=desktop            os=iOS,Android         browser=Chrome,Mobile Safari
    city=London,"New York"   region=unknown             language=en,de         ip=10.0.0.0/8,2001:db8::/32
    isp~comcast              isp="Comcast Cable Communications, LLC"          carrier~vodafone
    connection=Cellular      connection!=Corporate      connection=unknown
    referrer~google          referrer!~google           referrer=              referrer!=
    referrer~/fb|ig/         keyword=shoes,boots        param.utm_source=fb    sub_id_3~promo
    user_agent~/bot|spider/  schedule=mon-fri 09:00-18:00                     schedule!=sat,sun
    date=2026-12-01..2026-12-31  date=2026-12-01..     date=2026-12-25        unique=campaign
    unique!=stream           bot=yes                    bot=no

Values are separated by commas and stripped. A value holding a comma, a double quote or edge spaces is
written in double quotes with inner quotes doubled (`city="Washington, D.C."`); so is a `~` value that
starts or ends with `/`, since `~/.../` (the whole value between slashes) is a regex. With `=` an empty
value means "empty" (`referrer=` is "no referrer", `referrer!=` is "has one"). `bot=no` is stored as
`bot!=yes`. Text filters are referrer, keyword, user_agent, isp, carrier, param.NAME and sub_id_1..sub_id_30.

JSON specs (what `parse_filter` returns and `stream.filters` stores; `validate_filters` fills defaults):

    {"name": "country", "negate": false, "values": ["US", "GB"]}      also region, city, device, os,
                                                                      browser, language, connection, ip
    {"name": "referrer", "negate": false, "match": "contains", "values": ["google"]}
        match: exact | contains (take values) | regex (takes "pattern") | empty (takes neither);
        also keyword, user_agent, isp, carrier, param (+ "param": "utm_source"), sub_id (+ "slot": 3)
    {"name": "schedule", "negate": false, "days": ["mon", "fri"], "start": "09:00", "end": "18:00"}
    {"name": "date", "negate": false, "start": "2026-12-01", "end": null}
    {"name": "unique", "negate": false, "scope": "campaign"}            {"name": "bot", "negate": false}

Schedule: weekdays (`mon`..`sun`, lists and ranges such as `mon-fri` or `fri-mon`) and/or one hours
interval `HH:MM-HH:MM`, start inclusive, end exclusive (`24:00` allowed as an end), in the campaign's
timezone. An interval that wraps midnight (`22:00-06:00`) belongs to the day it starts on: `fri 22:00-06:00`
is Friday 22:00 to Saturday 06:00. Date: `FROM..TO`, both days inclusive in the campaign's timezone,
either end open; a single date is that one day.

Unknown values. A value the tracker could not determine never equals a listed value, so an IS filter
fails and an IS NOT filter passes, unless the list holds the literal `unknown`, which matches it:

    filter            unknown when                                          `unknown` literal
    country           no geo database, private IP, not found ("")          yes
    region, city      as country, or the database has no such detail ("")  yes
    device            device_type "unknown" or ""                          yes
    os, browser       ua-parser could not tell ("")                        yes
    language          no Accept-Language header, or nothing usable in it   yes
                      (the filter looks at the FIRST, preferred, language: a visitor preferring French
                      with English as a fallback is French)
    ip                not a parseable address                               no
    connection        no connection-type file (LANNER_GEO_EDITIONS), not in it  yes
    isp, carrier      text filters: no ISP/ASN file or not in it is the empty string, so `isp=` targets
                      it; carrier is also empty for an address that is not a mobile network's
    referrer, keyword, param, sub_id, user_agent: absent is the empty string; target it with `=` (empty)
                      and `!=` (not empty); it never equals, contains or matches a listed value
    schedule, date, unique, bot: always known (clock, uniqueness probe, bot flag)
"""

from __future__ import annotations

import datetime
import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import ip_network
from operator import attrgetter
from socket import AF_INET, AF_INET6, inet_pton
from typing import Any

from models.choices import FILTER_MODES, SUB_ID_SLOTS
from models.errors import LannerError

__all__ = [
    "DEVICE_TYPES",
    "FILTER_NAMES",
    "FilterError",
    "FilterSubject",
    "StreamFilters",
    "compile_filters",
    "describe_filter",
    "parse_accept_language",
    "parse_filter",
    "validate_filters",
]


class FilterError(LannerError, ValueError):
    """A filter expression or spec that cannot be used; the message is one sentence fit to show the user."""


@dataclass(slots=True)
class FilterSubject:
    """What the filters of one click look at; built once per click by the caller."""

    ip: str  # canonical text of an IPv4/IPv6 address
    user_agent: str
    referrer: str
    keyword: str  # the `keyword` query parameter ("" when absent)
    params: Mapping[str, str]  # every query parameter, first value
    sub_ids: Sequence[str]  # sub_id_1..sub_id_30, index 0 = sub_id_1 ("" when absent)
    languages: tuple[str, ...]  # parse_accept_language(header); () = no header
    country: str  # ISO code upper-case, "" = unknown
    region: str  # "" = unknown
    city: str  # "" = unknown
    device_type: str  # desktop/mobile/tablet/tv/console/bot/unknown
    os: str  # ua-parser family ("iOS", "Windows", …), "" unknown (map ua-parser's "Other" to "")
    browser: str  # ua-parser family ("Chrome", "Mobile Safari", …), "" unknown
    is_bot: bool
    now: float  # unix seconds (UTC) of the click
    is_unique_campaign: bool  # visitor (IP+UA) not seen in this campaign within its uniqueness window
    seen_in_stream: Callable[[int], bool]  # visitor seen in that stream within the window
    # From the ISP / ASN / connection-type files, filled only for a campaign that filters on them.
    isp: str = ""  # ISP, else AS organisation; "" unknown
    connection: str = ""  # connection type ("Cellular", "Cable/DSL"...); "" unknown
    carrier: str = ""  # mobile carrier (the ISP of a mobile network); "" unknown or not mobile


VALUE_FILTERS = ("country", "region", "city", "device", "os", "browser", "language", "connection")
TEXT_FILTERS = ("referrer", "keyword", "user_agent", "param", "sub_id", "isp", "carrier")
NETWORK_FILTERS = frozenset({"isp", "connection", "carrier"})  # read from the ISP / ASN files, on demand
FILTER_NAMES: tuple[str, ...] = (*VALUE_FILTERS, "ip", *TEXT_FILTERS, "schedule", "date", "unique", "bot")
DEVICE_TYPES = ("desktop", "mobile", "tablet", "tv", "console", "bot", "unknown")
MATCH_KINDS = ("exact", "contains", "regex", "empty")
UNIQUE_SCOPES = ("campaign", "stream")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
UNKNOWN = "unknown"
MAX_REGEX_LENGTH = 500
MAX_LANGUAGES = 8

_WEEKDAY_TITLES = tuple(day.title() for day in WEEKDAYS)
_FULL_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EXAMPLES = {
    "country": "country=US,GB",
    "region": "region=California",
    "city": 'city=London,"New York"',
    "device": "device=mobile,tablet",
    "os": "os=iOS,Android",
    "browser": "browser=Chrome,Mobile Safari",
    "language": "language=en,de",
    "connection": "connection=Cellular",
    "ip": "ip=10.0.0.0/8,2001:db8::/32",
}
_KNOWN_NAMES_TEXT = ", ".join(
    sorted(
        [*(name for name in FILTER_NAMES if name not in ("param", "sub_id")), "param.NAME", "sub_id_N"],
        key=str.lower,
    )
)

_EXPRESSION_RE = re.compile(
    r"\s*([A-Za-z][A-Za-z0-9_]*)(?:\.([^\s=!~]*))?\s*(!=|!~|=|~)\s*(.*?)\s*", re.DOTALL
)
_SUB_ID_RE = re.compile(r"sub_id_([0-9]+)")
_PARAM_NAME_RE = re.compile(r"[^\s=!~,\"]{1,100}")
_COUNTRY_RE = re.compile(r"[A-Z]{2}")
_LANGUAGE_RE = re.compile(r"[a-z]{2,8}")
_TIME_RE = re.compile(r"([0-9]{1,2}):([0-9]{2})")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_Q_RE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")
_MAX_LANGUAGE_RANGES = 32


# --- Accept-Language ---------------------------------------------------------------------------------------


def parse_accept_language(header: str) -> tuple[str, ...]:
    """Primary language subtags from an Accept-Language header, most preferred first: "en-US,de;q=0.8" ->
    ("en", "de").

    Ordered by q value, then position; q=0, `*` and malformed entries are dropped; duplicates keep their
    best place; at most MAX_LANGUAGES entries from the first 32 ranges. Never raises on garbage.
    """
    if not header or not isinstance(header, str):
        return ()
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(header.split(",", _MAX_LANGUAGE_RANGES)[:_MAX_LANGUAGE_RANGES]):
        tag, _semicolon, params = item.partition(";")
        primary = tag.strip().lower().replace("_", "-").partition("-")[0]
        if not _LANGUAGE_RE.fullmatch(primary):
            continue
        quality: float | None = 1.0
        for param in params.split(";") if params else ():
            key, _equals, value = param.partition("=")
            if key.strip().lower() == "q":
                value = value.strip()
                quality = float(value) if _Q_RE.fullmatch(value) else None
        if quality:
            ranked.append((-quality, position, primary))
    ranked.sort()
    languages: list[str] = []
    for _quality, _position, primary in ranked:
        if primary not in languages:
            languages.append(primary)
            if len(languages) == MAX_LANGUAGES:
                break
    return tuple(languages)


# --- text syntax -------------------------------------------------------------------------------------------


def parse_filter(text: str) -> dict[str, Any]:
    """One filter expression such as "country=US,GB" as a normalised, JSON-able spec; raise FilterError."""
    match = _EXPRESSION_RE.fullmatch(text)
    if not match:
        raise FilterError(
            f"Filter {text.strip()!r} is not of the form name=value, name!=value, name~value or name!~value."
        )
    raw_name, param, operator, value = match.groups()
    name = raw_name.lower()
    spec: dict[str, Any] = {"name": _filter_name(name, text), "negate": operator.startswith("!")}
    if param is not None and spec["name"] != "param":
        raise FilterError(f"Only param filters take a dotted name (param.NAME), not {raw_name}.{param}.")
    if spec["name"] == "param":
        if not param:
            raise FilterError("A param filter needs the parameter name, as in param.utm_source=fb.")
        spec["param"] = param
    elif spec["name"] == "sub_id":
        spec["slot"] = int(_SUB_ID_RE.fullmatch(name).group(1))  # type: ignore[union-attr]
    contains = operator.endswith("~")
    if contains and spec["name"] not in TEXT_FILTERS:
        raise FilterError(
            f"The {spec['name']} filter takes = or !=, not ~; ~ is for referrer, keyword, user_agent,"
            " isp, carrier, param.NAME and sub_id_N."
        )

    if spec["name"] in VALUE_FILTERS or spec["name"] == "ip":
        spec["values"] = _split_values(value, spec["name"])
    elif spec["name"] in TEXT_FILTERS:
        if contains and len(value) >= 2 and value[0] == "/" and value[-1] == "/":
            spec["match"], spec["pattern"] = "regex", value[1:-1]
        elif contains:
            spec["match"], spec["values"] = "contains", _split_values(value, spec["name"])
            if not spec["values"]:
                display = _display_name(spec)
                raise FilterError(f"The {display} filter needs a value after ~, as in {display}~promo.")
        elif value:
            spec["match"], spec["values"] = "exact", _split_values(value, spec["name"])
        else:
            spec["match"] = "empty"
    elif spec["name"] == "schedule":
        spec.update(_parse_schedule(value))
    elif spec["name"] == "date":
        spec.update(_parse_date_range(value))
    elif spec["name"] == "unique":
        spec["scope"] = value.lower()
    else:  # bot
        answer = value.lower()
        if answer not in ("yes", "no"):
            raise FilterError(f"The bot filter takes yes or no, not {value!r}.")
        spec["negate"] = spec["negate"] != (answer == "no")
    return _normalise(spec)


def describe_filter(spec: Mapping[str, Any]) -> str:
    """The text expression for a spec; parse_filter(describe_filter(spec)) gives the normalised spec back."""
    spec = _normalise(spec)
    name, negate = spec["name"], spec["negate"]
    if name == "bot":
        return "bot=no" if negate else "bot=yes"
    bang = "!" if negate else ""
    if name in VALUE_FILTERS or name == "ip":
        return f"{name}{bang}={_join_values(spec['values'])}"
    if name in TEXT_FILTERS:
        head = _display_name(spec)
        kind = spec["match"]
        if kind == "empty":
            return f"{head}{bang}="
        if kind == "regex":
            return f"{head}{bang}~/{spec['pattern']}/"
        operator = "~" if kind == "contains" else "="
        return f"{head}{bang}{operator}{_join_values(spec['values'])}"
    if name == "schedule":
        parts = []
        if spec["days"]:
            parts.append(_describe_days(spec["days"]))
        if spec["start"] is not None:
            parts.append(f"{spec['start']}-{spec['end']}")
        return f"schedule{bang}={' '.join(parts)}"
    if name == "date":
        start, end = spec["start"], spec["end"]
        value = start if start is not None and start == end else f"{start or ''}..{end or ''}"
        return f"date{bang}={value}"
    return f"unique{bang}={spec['scope']}"


def _filter_name(name: str, text: str) -> str:
    """The spec name for the name typed in an expression: sub_id_3 is "sub_id", the rest are themselves."""
    slot = _SUB_ID_RE.fullmatch(name)
    if slot:
        if not 1 <= int(slot.group(1)) <= SUB_ID_SLOTS:
            raise FilterError(f"Filter {text.strip()!r} names a sub_id slot outside 1 to {SUB_ID_SLOTS}.")
        return "sub_id"
    if name in FILTER_NAMES and name != "sub_id":
        return name
    raise FilterError(f"Unknown filter {name!r}; known filters are {_KNOWN_NAMES_TEXT}.")


def _display_name(spec: Mapping[str, Any]) -> str:
    if spec["name"] == "param":
        return f"param.{spec['param']}"
    if spec["name"] == "sub_id":
        return f"sub_id_{spec['slot']}"
    return spec["name"]


def _split_values(text: str, name: str) -> list[str]:
    """Comma-separated values; a double-quoted value keeps commas, edge spaces and doubled quotes."""
    values: list[str] = []
    if not text:
        return values
    position, length = 0, len(text)
    while True:
        start = position
        while start < length and text[start].isspace():
            start += 1
        if start < length and text[start] == '"':
            pieces = []
            position = start + 1
            while True:
                closing = text.find('"', position)
                if closing == -1:
                    raise FilterError(f"The {name} filter has a double quote that is never closed.")
                pieces.append(text[position:closing])
                if text.startswith('"', closing + 1):
                    pieces.append('"')
                    position = closing + 2
                    continue
                position = closing + 1
                break
            while position < length and text[position].isspace():
                position += 1
            if position < length and text[position] != ",":
                raise FilterError(
                    f"The {name} filter has text after a closing quote; separate values with commas."
                )
            values.append("".join(pieces))
        else:
            comma = text.find(",", start)
            position = length if comma == -1 else comma
            value = text[start:position].strip()
            if '"' in value:
                raise FilterError(
                    f"The {name} filter has a double quote inside a value; quote the whole value and double"
                    ' the inner quote, as in "say ""hi""".'
                )
            values.append(value)
        if position >= length:
            return values
        position += 1  # past the comma


def _join_values(values: Sequence[str]) -> str:
    return ",".join(_quote_value(value) for value in values)


def _quote_value(value: str) -> str:
    if "," in value or '"' in value or value != value.strip() or value.startswith("/") or value.endswith("/"):
        return '"' + value.replace('"', '""') + '"'
    return value


def _parse_schedule(value: str) -> dict[str, Any]:
    days: list[str] = []
    start = end = None
    if not value:
        raise FilterError(
            "The schedule filter needs weekdays, hours or both, as in schedule=mon-fri 09:00-18:00."
        )
    for token in re.sub(r"\s*([-,])\s*", r"\1", value).split():
        if token[0].isdigit():
            if start is not None:
                raise FilterError("The schedule filter takes one hours interval, as in 09:00-18:00.")
            start, _dash, end = token.partition("-")
            if not end:
                raise FilterError(f"Schedule hours {token!r} need a start and an end, as in 09:00-18:00.")
        else:
            if days:
                raise FilterError(
                    "The schedule filter takes its weekdays as one comma-separated list, as in mon-fri,sun."
                )
            for item in token.split(","):
                first, dash, last = item.partition("-")
                first_index = _weekday_index(first)
                last_index = _weekday_index(last) if dash else first_index
                index = first_index
                while True:
                    days.append(WEEKDAYS[index])
                    if index == last_index:
                        break
                    index = (index + 1) % 7
    return {"days": days, "start": start, "end": end}


def _weekday_index(text: str) -> int:
    day = text.lower()
    if day in WEEKDAYS:
        return WEEKDAYS.index(day)
    if day in _FULL_WEEKDAYS:
        return _FULL_WEEKDAYS.index(day)
    raise FilterError(f"Schedule weekday {text!r} is not one of {', '.join(WEEKDAYS)}.")


def _describe_days(days: Sequence[str]) -> str:
    """Week-ordered day names with runs of three or more written as ranges: mon-fri,sun."""
    indexes = [WEEKDAYS.index(day) for day in days]
    parts: list[str] = []
    run_start = 0
    for position in range(1, len(indexes) + 1):
        if position == len(indexes) or indexes[position] != indexes[position - 1] + 1:
            run = indexes[run_start:position]
            if len(run) >= 3:
                parts.append(f"{WEEKDAYS[run[0]]}-{WEEKDAYS[run[-1]]}")
            else:
                parts.extend(WEEKDAYS[index] for index in run)
            run_start = position
    return ",".join(parts)


def _parse_date_range(value: str) -> dict[str, Any]:
    if ".." in value:
        start, _dots, end = value.partition("..")
        return {"start": start.strip() or None, "end": end.strip() or None}
    if not value:
        raise FilterError("The date filter needs a date range, as in date=2026-12-01..2026-12-31.")
    return {"start": value, "end": value}


# --- JSON specs --------------------------------------------------------------------------------------------


def validate_filters(specs: Any) -> list[dict[str, Any]]:
    """A stream's filter list, as loaded from JSON, checked and normalised; raise FilterError for the first
    bad filter, named by its position from 1."""
    if not isinstance(specs, list):
        raise FilterError("Stream filters must be a JSON list of filter objects.")
    normalised = []
    for number, spec in enumerate(specs, 1):
        try:
            normalised.append(_normalise(spec))
        except FilterError as exc:
            raise FilterError(f"Filter {number}: {exc}") from None
    return normalised


def _normalise(spec: Any) -> dict[str, Any]:
    """One spec checked and rewritten to its canonical form (every key present, values tidied)."""
    if not isinstance(spec, Mapping):
        raise FilterError('A filter must be a JSON object with a name, such as {"name": "country", ...}.')
    name = spec.get("name")
    if not isinstance(name, str) or name not in FILTER_NAMES:
        raise FilterError(f"Unknown filter {name!r}; known filters are {', '.join(FILTER_NAMES)}.")
    negate = spec.get("negate", False)
    if not isinstance(negate, bool):
        raise FilterError(f"The {name} filter's negate must be true or false, not {negate!r}.")
    out: dict[str, Any] = {"name": name, "negate": negate}
    if name in VALUE_FILTERS:
        _check_keys(spec, name, ("values",))
        out["values"] = _normalise_value_list(name, spec.get("values"))
    elif name == "ip":
        _check_keys(spec, name, ("values",))
        out["values"] = _dedupe(
            [_normalise_network(value) for value in _string_list(name, spec.get("values"))]
        )
        if not out["values"]:
            raise FilterError(
                f"The ip filter needs at least one address or network, as in {_EXAMPLES['ip']}."
            )
    elif name in TEXT_FILTERS:
        out.update(_normalise_text(name, spec))
    elif name == "schedule":
        _check_keys(spec, name, ("days", "start", "end"))
        out.update(_normalise_schedule(spec))
    elif name == "date":
        _check_keys(spec, name, ("start", "end"))
        out.update(_normalise_date_range(spec))
    elif name == "unique":
        _check_keys(spec, name, ("scope",))
        scope = spec.get("scope")
        if scope not in UNIQUE_SCOPES:
            raise FilterError(f"The unique filter's scope must be campaign or stream, not {scope!r}.")
        out["scope"] = scope
    else:
        _check_keys(spec, name, ())
    return out


def _check_keys(spec: Mapping[str, Any], name: str, allowed: Sequence[str]) -> None:
    extra = sorted(str(key) for key in spec if key not in ("name", "negate", *allowed))
    if extra:
        takes = ", ".join(("negate", *allowed))
        raise FilterError(f"The {name} filter has unknown key(s) {', '.join(extra)}; it takes {takes}.")


def _string_list(name: str, values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise FilterError(f"The {name} filter's values must be a list of strings.")
    if any(not value for value in values):
        raise FilterError(
            f"The {name} filter has an empty value in its list (two commas, or a trailing comma)."
        )
    return values


def _dedupe(values: list[str]) -> list[str]:
    """The values without case-insensitive repeats, first spelling kept, in order."""
    seen: set[str] = set()
    out = []
    for value in values:
        if value.lower() not in seen:
            seen.add(value.lower())
            out.append(value)
    return out


def _normalise_value_list(name: str, raw: Any) -> list[str]:
    values: list[str] = []
    for raw_value in _string_list(name, raw):
        value = raw_value.strip()
        if not value:
            raise FilterError(f"The {name} filter has an empty value in its list.")
        if value.lower() == UNKNOWN:
            value = UNKNOWN
        elif name == "country":
            value = value.upper()
            if not _COUNTRY_RE.fullmatch(value):
                raise FilterError(f"Country {raw_value!r} is not a two-letter ISO code such as US or GB.")
        elif name == "device":
            value = value.lower()
            if value not in DEVICE_TYPES:
                raise FilterError(f"Device {raw_value!r} is not one of {', '.join(DEVICE_TYPES)}.")
        elif name == "language":
            value = value.lower()
            if not _LANGUAGE_RE.fullmatch(value):
                raise FilterError(
                    f"Language {raw_value!r} is not a primary language code such as en or de"
                    " (the filter compares the visitor's first language without its region)."
                )
        values.append(value)
    values = _dedupe(values)
    if not values:
        raise FilterError(f"The {name} filter needs at least one value, as in {_EXAMPLES[name]}.")
    return values


def _normalise_network(value: str) -> str:
    text = value.strip()
    try:
        network = ip_network(text)
    except ValueError:
        try:
            loose = ip_network(text, strict=False)
        except ValueError:
            raise FilterError(
                f"{value!r} is not an IP address or CIDR network such as 10.0.0.0/8 or 2001:db8::/32."
            ) from None
        raise FilterError(f"IP network {value!r} has host bits set; write {loose} instead.") from None
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def _normalise_text(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    keys: tuple[str, ...] = ("match", "values", "pattern")
    out: dict[str, Any] = {}
    if name == "param":
        keys += ("param",)
        param = spec.get("param")
        if not isinstance(param, str) or not _PARAM_NAME_RE.fullmatch(param):
            raise FilterError(
                f"The param filter needs a parameter name without spaces, quotes, commas, =, ! or ~,"
                f" not {param!r}."
            )
        out["param"] = param
    elif name == "sub_id":
        keys += ("slot",)
        slot = spec.get("slot")
        if not isinstance(slot, int) or isinstance(slot, bool) or not 1 <= slot <= SUB_ID_SLOTS:
            raise FilterError(
                f"The sub_id filter's slot must be a number from 1 to {SUB_ID_SLOTS}, not {slot!r}."
            )
        out["slot"] = slot
    _check_keys(spec, name, keys)
    display = _display_name({"name": name, **out})
    kind = spec.get("match")
    if kind not in MATCH_KINDS:
        raise FilterError(
            f"The {display} filter's match must be one of {', '.join(MATCH_KINDS)}, not {kind!r}."
        )
    out["match"] = kind
    if kind == "regex":
        if "values" in spec:
            raise FilterError(f"The {display} filter matches a regex, so it takes a pattern and no values.")
        out["pattern"] = _check_regex(spec.get("pattern"), display)
    elif kind == "empty":
        if "values" in spec or "pattern" in spec:
            raise FilterError(
                f"The {display} filter matches an empty value, so it takes no values or pattern."
            )
    else:
        if "pattern" in spec:
            raise FilterError(f"The {display} filter matches {kind}, so it takes values and no pattern.")
        values = _string_list(display, spec.get("values"))
        if not values:
            example = f"{display}~promo" if kind == "contains" else f"{display}=promo"
            raise FilterError(f"The {display} filter needs at least one value, as in {example}.")
        out["values"] = _dedupe(values)
    return out


def _check_regex(pattern: Any, display: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise FilterError(f"The {display} filter needs a regex between slashes, as in {display}~/fb|ig/.")
    if len(pattern) > MAX_REGEX_LENGTH:
        raise FilterError(f"The {display} filter's regex is longer than {MAX_REGEX_LENGTH} characters.")
    # Patterns come from the tracker's own users, not from visitors; the length cap keeps an accidental
    # catastrophic pattern small, and there is no other guard against backtracking on long visitor text.
    try:
        re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise FilterError(f"The {display} filter's regex {pattern!r} is not valid: {exc}.") from None
    return pattern


def _normalise_schedule(spec: Mapping[str, Any]) -> dict[str, Any]:
    raw_days = spec.get("days", [])
    if not isinstance(raw_days, list) or not all(isinstance(day, str) for day in raw_days):
        raise FilterError("The schedule filter's days must be a list of weekday names such as mon or fri.")
    indexes = sorted({_weekday_index(day) for day in raw_days})
    start, end = spec.get("start"), spec.get("end")
    if (start is None) != (end is None):
        raise FilterError("The schedule filter's hours need both a start and an end, as in 09:00-18:00.")
    if start is not None:
        start_minute, end_minute = _minutes(start, False), _minutes(end, True)
        if start_minute == end_minute:
            raise FilterError(
                f"Schedule hours {start}-{end} start and end at the same time; use 00:00-24:00 for all day."
            )
        start, end = _clock_text(start_minute), _clock_text(end_minute)
    elif not indexes:
        raise FilterError(
            "The schedule filter needs weekdays, hours or both, as in schedule=mon-fri 09:00-18:00."
        )
    return {"days": [WEEKDAYS[index] for index in indexes], "start": start, "end": end}


def _minutes(text: Any, is_end: bool) -> int:
    match = _TIME_RE.fullmatch(text) if isinstance(text, str) else None
    if match:
        hours, minutes = int(match.group(1)), int(match.group(2))
        if minutes < 60 and (hours < 24 or (is_end and hours == 24 and minutes == 0)):
            return hours * 60 + minutes
    limit = "24:00" if is_end else "23:59"
    raise FilterError(f"Schedule time {text!r} is not a time from 00:00 to {limit} in HH:MM form.")


def _clock_text(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _normalise_date_range(spec: Mapping[str, Any]) -> dict[str, Any]:
    start, end = _date(spec.get("start")), _date(spec.get("end"))
    if start is None and end is None:
        raise FilterError("The date filter needs a start, an end or both, as in date=2026-12-01..2026-12-31.")
    if start is not None and end is not None and start > end:
        raise FilterError(f"The date filter's range {start}..{end} ends before it starts.")
    return {
        "start": None if start is None else start.isoformat(),
        "end": None if end is None else end.isoformat(),
    }


def _date(text: Any) -> datetime.date | None:
    if text is None:
        return None
    if isinstance(text, str) and _DATE_RE.fullmatch(text):
        try:
            return datetime.date.fromisoformat(text)
        except ValueError:
            pass
    raise FilterError(f"Date {text!r} is not a calendar date in YYYY-MM-DD form.")


# --- compile and evaluate ----------------------------------------------------------------------------------

# A filter's test answers the IS question; `negate` turns it into IS NOT. Seen renders what the test looked
# at for a trace, given the test's result so that probes such as seen_in_stream are not called twice.
_Test = Callable[[FilterSubject, int], Any]
_Seen = Callable[[FilterSubject, int, bool], str]


@dataclass(frozen=True, slots=True)
class _Filter:
    description: str
    test: _Test
    negate: bool
    seen: _Seen


class StreamFilters:
    """One stream's compiled filters; `outcome` is the only thing the click path calls."""

    __slots__ = ("specs", "mode", "names", "_filters", "_tests", "_is_and", "_steps")

    def __init__(self, specs: list[dict[str, Any]], mode: str, filters: tuple[_Filter, ...]) -> None:
        self.specs = specs
        self.mode = mode
        self.names: frozenset[str] = frozenset(spec["name"] for spec in specs)
        self._filters = filters
        self._tests = tuple((item.test, item.negate) for item in filters)
        self._is_and = mode == "and"
        # PERF: each filter's outcome step made once: the deciding filter's place costs nothing per click.
        sign = "-" if self._is_and else "+"
        self._steps = tuple((item.test, item.negate, f"{sign}{i}") for i, item in enumerate(filters))

    def __len__(self) -> int:
        return len(self._filters)

    def __repr__(self) -> str:
        return f"StreamFilters({self.mode}: {'; '.join(item.description for item in self._filters)})"

    def outcome(self, subject: FilterSubject, stream_id: int, trace: list | None = None) -> str:
        """The verdict with the filter that decided it, as the route summary keeps it
        (models/routing/router.py): "+" all passed (or there are none), "+2" filter 2 (from 0) passed
        (OR), "-1" filter 1 failed (AND), "-" none passed (OR). With `trace`, as `matches`."""
        if trace is None:
            if self._is_and:
                for test, negate, step in self._steps:
                    if test(subject, stream_id) == negate:
                        return step
                return "+"
            for test, negate, step in self._steps:
                if test(subject, stream_id) != negate:
                    return step
            return "-" if self._steps else "+"
        start = len(trace)
        self.matches(subject, stream_id, trace)
        for index, (_, passed, _) in enumerate(trace[start:]):
            if passed != self._is_and:  # The first failure (AND) or pass (OR) decided.
                return self._steps[index][2]
        return "+" if self._is_and or not self._steps else "-"

    def matches(self, subject: FilterSubject, stream_id: int, trace: list | None = None) -> bool:
        """Whether the click passes; an empty filter list passes in both modes.

        Without `trace` evaluation stops at the first failure (AND) or pass (OR). With a list, every filter
        is evaluated and (description, passed, seen value) appended per filter; the verdict is the same.
        """
        if trace is None:
            # PERF: a test's truth equal to `negate` is a failed filter; no wrapper closure for IS NOT.
            if self._is_and:
                for test, negate in self._tests:
                    if test(subject, stream_id) == negate:
                        return False
                return True
            for test, negate in self._tests:
                if test(subject, stream_id) != negate:
                    return True
            return not self._tests
        passed_all, passed_any = True, False
        for item in self._filters:
            result = bool(item.test(subject, stream_id))
            passed = result != item.negate
            trace.append((item.description, passed, item.seen(subject, stream_id, result)))
            passed_all = passed_all and passed
            passed_any = passed_any or passed
        return passed_all if self._is_and else (passed_any or not self._filters)


def compile_filters(specs: list[dict[str, Any]], mode: str, tz: datetime.tzinfo) -> StreamFilters:
    """Validate a stream's specs and prepare them for `matches`; times are read in `tz` (the campaign's).

    Raises FilterError for a bad spec or a mode other than "and" / "or".
    """
    if mode not in FILTER_MODES:
        raise FilterError(f"Filter mode must be 'and' or 'or', not {mode!r}.")
    normalised = validate_filters(specs)
    filters = tuple(_compile(spec, tz) for spec in normalised)
    return StreamFilters(normalised, mode, filters)


def _compile(spec: dict[str, Any], tz: datetime.tzinfo) -> _Filter:
    name = spec["name"]
    if name in VALUE_FILTERS:
        test, seen = _compile_value_list(name, spec["values"])
    elif name == "ip":
        test, seen = _compile_ip(spec["values"])
    elif name in TEXT_FILTERS:
        test, seen = _compile_text(spec)
    elif name == "schedule":
        test, seen = _compile_schedule(spec, tz)
    elif name == "date":
        test, seen = _compile_date_range(spec, tz)
    elif name == "unique":
        if spec["scope"] == "campaign":
            test = _unique_in_campaign
        else:
            test = _unique_in_stream
        seen = _seen_unique
    else:
        test, seen = _is_bot, _seen_bot
    return _Filter(describe_filter(spec), test, spec["negate"], seen)


def _unique_in_campaign(subject: FilterSubject, stream_id: int) -> bool:
    return subject.is_unique_campaign


def _unique_in_stream(subject: FilterSubject, stream_id: int) -> bool:
    return not subject.seen_in_stream(stream_id)


def _seen_unique(subject: FilterSubject, stream_id: int, result: bool) -> str:
    return "unique" if result else "seen"


def _is_bot(subject: FilterSubject, stream_id: int) -> bool:
    return subject.is_bot


def _seen_bot(subject: FilterSubject, stream_id: int, result: bool) -> str:
    return "yes" if result else "no"


_SUBJECT_FIELD = {
    "country": "country",
    "region": "region",
    "city": "city",
    "device": "device_type",
    "os": "os",
    "browser": "browser",
    "referrer": "referrer",
    "keyword": "keyword",
    "user_agent": "user_agent",
    "isp": "isp",
    "connection": "connection",
    "carrier": "carrier",
}


def _first_language(subject: FilterSubject) -> str:
    languages = subject.languages
    return languages[0] if languages else ""


def _compile_value_list(name: str, values: list[str]) -> tuple[_Test, _Seen]:
    # Country codes arrive upper-case and device types lower-case from a fixed set, languages lower-case
    # from parse_accept_language: compared as given. Free-text geo and ua-parser names are lower-cased.
    fold = str.upper if name == "country" else str.lower
    allowed = frozenset(fold(value) for value in values if value != UNKNOWN)
    if UNKNOWN in values:
        allowed |= {"", UNKNOWN}
    get = _first_language if name == "language" else attrgetter(_SUBJECT_FIELD[name])

    if name in ("country", "device", "language"):

        def test(subject: FilterSubject, stream_id: int) -> bool:
            return get(subject) in allowed

    else:

        def test(subject: FilterSubject, stream_id: int) -> bool:
            return get(subject).lower() in allowed

    if name == "language":

        def seen(subject: FilterSubject, stream_id: int, result: bool) -> str:
            return ",".join(subject.languages) or UNKNOWN

    else:

        def seen(subject: FilterSubject, stream_id: int, result: bool) -> str:
            return get(subject) or UNKNOWN

    return test, seen


def _ip_ranges(values: list[str]) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """Per family (IPv4, IPv6): sorted, merged (starts, ends) of the listed networks, inclusive ends."""
    by_family: dict[int, list[tuple[int, int]]] = {4: [], 6: []}
    for value in values:
        network = ip_network(value)
        by_family[network.version].append((int(network.network_address), int(network.broadcast_address)))
    out = []
    for version in (4, 6):
        merged: list[list[int]] = []
        for start, end in sorted(by_family[version]):
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out.append((tuple(start for start, _end in merged), tuple(end for _start, end in merged)))
    return tuple(out)


def _compile_ip(values: list[str]) -> tuple[_Test, _Seen]:
    (v4_starts, v4_ends), (v6_starts, v6_ends) = _ip_ranges(values)

    def test(subject: FilterSubject, stream_id: int) -> bool:
        text = subject.ip
        # PERF: inet_pton + int.from_bytes is about eight times faster than ipaddress.ip_address.
        try:
            if ":" in text:
                number = int.from_bytes(inet_pton(AF_INET6, text), "big")
                if number >> 32 == 0xFFFF:  # ::ffff:a.b.c.d is the IPv4 client of a dual-stack socket
                    number &= 0xFFFFFFFF
                    starts, ends = v4_starts, v4_ends
                else:
                    starts, ends = v6_starts, v6_ends
            else:
                number = int.from_bytes(inet_pton(AF_INET, text), "big")
                starts, ends = v4_starts, v4_ends
        except (OSError, ValueError):
            return False
        index = bisect_right(starts, number) - 1
        return index >= 0 and number <= ends[index]

    def seen(subject: FilterSubject, stream_id: int, result: bool) -> str:
        return subject.ip or UNKNOWN

    return test, seen


def _compile_text(spec: dict[str, Any]) -> tuple[_Test, _Seen]:
    name, kind = spec["name"], spec["match"]
    get: Callable[[FilterSubject], str]
    if name == "param":
        param = spec["param"]

        def get(subject: FilterSubject) -> str:
            return subject.params.get(param, "")

    elif name == "sub_id":
        index = spec["slot"] - 1

        def get(subject: FilterSubject) -> str:
            sub_ids = subject.sub_ids
            return sub_ids[index] if index < len(sub_ids) else ""

    else:
        get = attrgetter(_SUBJECT_FIELD[name])

    if kind == "empty":

        def test(subject: FilterSubject, stream_id: int) -> bool:
            return not get(subject)

    elif kind == "exact":
        allowed = frozenset(value.lower() for value in spec["values"])

        def test(subject: FilterSubject, stream_id: int) -> bool:
            return get(subject).lower() in allowed

    elif kind == "contains":
        needles = tuple(value.lower() for value in spec["values"])
        if len(needles) == 1:
            needle = needles[0]

            def test(subject: FilterSubject, stream_id: int) -> bool:
                return needle in get(subject).lower()

        else:

            def test(subject: FilterSubject, stream_id: int) -> bool:
                text = get(subject).lower()
                for needle in needles:
                    if needle in text:
                        return True
                return False

    else:
        search = re.compile(spec["pattern"], re.IGNORECASE).search

        def test(subject: FilterSubject, stream_id: int) -> bool:
            return search(get(subject)) is not None

    def seen(subject: FilterSubject, stream_id: int, result: bool) -> str:
        value = get(subject)
        if not value:
            return "(empty)"
        return value if len(value) <= 200 else value[:199] + "…"

    return test, seen


def _compile_schedule(spec: dict[str, Any], tz: datetime.tzinfo) -> tuple[_Test, _Seen]:
    day_set = {WEEKDAYS.index(day) for day in spec["days"]} or set(range(7))
    is_day = tuple(index in day_set for index in range(7))
    start = _minutes(spec["start"], False) if spec["start"] is not None else 0
    end = _minutes(spec["end"], True) if spec["end"] is not None else 1440
    wraps = start > end
    cached: tuple[float | None, int, int] = (None, 0, 0)

    def local_minute(now: float) -> tuple[float | None, int, int]:
        """(UTC minute, local minute of the day, local weekday) for `now`, from the cache when it can."""
        # PERF: fromtimestamp with a ZoneInfo costs ~0.9 µs, so the local time is computed once per UTC
        # minute; zone offsets are whole minutes and transitions fall on whole minutes, so a UTC minute is
        # one local minute. One tuple, so a concurrent caller never pairs one minute with another's time.
        nonlocal cached
        utc_minute = now // 60
        if cached[0] != utc_minute:
            local = datetime.datetime.fromtimestamp(utc_minute * 60, tz)
            cached = (utc_minute, local.hour * 60 + local.minute, local.weekday())
        return cached

    def test(subject: FilterSubject, stream_id: int) -> bool:
        _utc_minute, minute, weekday = local_minute(subject.now)
        if start <= minute < end:
            return is_day[weekday]
        if wraps:
            if minute >= start:
                return is_day[weekday]
            if minute < end:  # after midnight: the interval started the day before
                return is_day[weekday - 1]
        return False

    def seen(subject: FilterSubject, stream_id: int, result: bool) -> str:
        _utc_minute, minute, weekday = local_minute(subject.now)
        return f"{_clock_text(minute)} {_WEEKDAY_TITLES[weekday]}"

    return test, seen


def _compile_date_range(spec: dict[str, Any], tz: datetime.tzinfo) -> tuple[_Test, _Seen]:
    def midnight(day: datetime.date) -> float:
        return datetime.datetime.combine(day, datetime.time(), tzinfo=tz).timestamp()

    first = -float("inf")
    if spec["start"] is not None:
        first = midnight(datetime.date.fromisoformat(spec["start"]))
    after = float("inf")
    if spec["end"] is not None:
        last = datetime.date.fromisoformat(spec["end"])
        if last < datetime.date.max:
            after = midnight(last + datetime.timedelta(days=1))

    def test(subject: FilterSubject, stream_id: int) -> bool:
        return first <= subject.now < after

    def seen(subject: FilterSubject, stream_id: int, result: bool) -> str:
        return datetime.datetime.fromtimestamp(subject.now, tz).strftime("%Y-%m-%d %H:%M")

    return test, seen
