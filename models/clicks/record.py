"""The click record: its columns, its journal line, and the visitor hash and key.

A click travels as one line in the spool journal and lands in the `click` table. This module is
the only place that knows the line's shape:

    ip TAB ua_hash TAB created_at TAB G TAB C TAB S TAB subid TAB campaign_id TAB stream_id TAB offer_id
    TAB lander_id ... TAB location TAB domain [TAB key] NL

i.e. the visitor prefix and the three uniqueness flags first (decided under the journal lock),
then the rest of the columns, then the Location answered (so a debounced repeat served by another
worker gets exactly the same one; it is not stored in the table). A line whose IP is anonymised
(LANNER_ANONYMIZE_IP, models/clicks/privacy.py) ends with its visitor key: the key is the full
address's, which the truncated one no longer gives (else every visitor of a /24 with the same
browser would be one). A line without it is keyed from its ip and ua_hash. Text is UTF-8 with backslash,
tab, CR and LF escaped, so a newline can only be the terminator; a NULL id is an empty field.
`lander_id` (the lander the click was sent to, migration 0015) and `domain` (the request's host,
migration 0016) came in one release: a line of the release before (without them, told by its
number of fields) still decodes, with no lander and an empty domain.

An LP click (the visitor leaving a lander for the offer, models/clicks/tracker.py `lp_click`) is a
line of its own in the same journal, told by its first field (never an address):

    lp TAB subid TAB clicked_at TAB offer_id TAB location NL
PERF: this costs ~3 µs per click where JSON cost ~13 µs, and the tail is built outside the lock.
"""

from __future__ import annotations

import math
import operator
import random
import re
import socket
import time
import zlib

from models.routing.path import with_flushed_steps
from models.store.functions import visitor_key as visitor_key  # The store computes it too.

# Positions in a decoded record (the hot path reads them from here).
from models.tables.click import CAMPAIGN_ID as CAMPAIGN_ID
from models.tables.click import (  # The click row's columns, in the order a record keeps them.
    CLICK_COLUMNS,
    IP,
    JOURNAL_COLUMNS,
    OFFER_ID,
    ROUTING_COLUMNS,
    STREAM_ID,
    SUB_ID_COLUMNS,
    SUBID,
)
from models.tables.click import CREATED_AT as CREATED_AT
from models.tables.click import UA_HASH as UA_HASH
from models.tables.click import USER_AGENT as USER_AGENT

COLUMN_COUNT = len(CLICK_COLUMNS)
IS_BOT = CLICK_COLUMNS.index("is_bot")
ROUTE = CLICK_COLUMNS.index("route")  # The decision path (models/routing/path.py).
NOT_CHECKED = -1  # is_bot of a line whose bot check the web worker left to the spool flusher.
DEVICE_TYPE, OS, BROWSER = (CLICK_COLUMNS.index(column) for column in ("device_type", "os", "browser"))
LANDER_ID, DOMAIN = COLUMN_COUNT, COLUMN_COUNT + 1
LOCATION = len(JOURNAL_COLUMNS)  # The one field past the columns...
VISITOR_KEY = LOCATION + 1  # ...and the visitor key a line carries, or None (see the module doc).

HEAD_COLUMNS = ("ip", "ua_hash", "created_at", "is_unique_global", "is_unique_campaign", "is_unique_stream")
TAIL_COLUMNS = (
    "subid",
    "campaign_id",
    "stream_id",
    "offer_id",
    "lander_id",
    "cost",
    "is_bot",
    # The text columns, last, so they are escaped in one go.
    "user_agent",
    "referrer",
    "source",
    "external_id",
    *SUB_ID_COLUMNS,
    *ROUTING_COLUMNS,
    "location",
    "domain",  # Last and never escaped: the edge keeps only a host's characters (routes/click.py).
)
LINE_COLUMNS = HEAD_COLUMNS + TAIL_COLUMNS
KEYED_FIELD_COUNT = len(LINE_COLUMNS) + 1  # An anonymised click's line: its visitor key last.
# Lines of earlier releases, read during an upgrade (and by a flusher replaying an old spool): the
# release before the lander step (no lander_id, no domain), keyed or not, and the one before
# ROUTING_COLUMNS.
_LANDER_FIELD = LINE_COLUMNS.index("lander_id")
PREVIOUS_FIELD_COUNT = len(LINE_COLUMNS) - 2
PREVIOUS_KEYED_FIELD_COUNT = PREVIOUS_FIELD_COUNT + 1
LEGACY_FIELD_COUNT = PREVIOUS_FIELD_COUNT - len(ROUTING_COLUMNS)
_INT_COLUMNS = frozenset(
    {
        "ua_hash",
        "created_at",
        "campaign_id",
        "stream_id",
        "offer_id",
        "lander_id",
        "is_bot",
        *HEAD_COLUMNS[3:],
    }
)
_NULLABLE_INT_COLUMNS = frozenset({"stream_id", "offer_id", "lander_id"})
# A line's fields in record order (JOURNAL_COLUMNS, then location), and which need parsing.
_TO_RECORD = operator.itemgetter(*(LINE_COLUMNS.index(column) for column in (*JOURNAL_COLUMNS, "location")))
_NULLABLE_POSITIONS = (STREAM_ID, OFFER_ID, LANDER_ID)
_COST = CLICK_COLUMNS.index("cost")

# What a journal line may hold. A line that parses but holds a number out of these ranges is
# corrupt (a bit flip, a hand edit, a broken writer): SQLite cannot store an integer past 64 bits,
# and one such line used to crash every worker that read it and stall the flusher for good.
# created_at is unix ms: before 2000 is a broken clock (or seconds taken for ms), after 2100 garbage.
MIN_CREATED_AT = 946_684_800_000  # 2000-01-01 UTC
MAX_CREATED_AT = 4_102_444_800_000  # 2100-01-01 UTC
MAX_ID = (1 << 63) - 1  # SQLite's largest INTEGER.
MAX_UA_HASH = (1 << 32) - 1  # CRC-32.
MAX_COST = 1_000_000.0  # Per click; the edge stores a larger cost as 0 (routes/click.py).
_RANGES = {
    "created_at": (MIN_CREATED_AT, MAX_CREATED_AT),
    "campaign_id": (1, MAX_ID),
    "stream_id": (1, MAX_ID),
    "offer_id": (1, MAX_ID),
    "lander_id": (1, MAX_ID),
    "ua_hash": (0, MAX_UA_HASH),
    "is_unique_global": (0, 1),
    "is_unique_campaign": (0, 1),
    "is_unique_stream": (0, 1),
    "is_bot": (NOT_CHECKED, 1),
    "visitor_key": (-(1 << 63), MAX_ID),
}
# (position, column, lowest, highest) of the integers a record needs (not NULL).
_INT_CHECKS = tuple(
    (CLICK_COLUMNS.index(c), c, *_RANGES[c])
    for c in CLICK_COLUMNS
    if c in _INT_COLUMNS - _NULLABLE_INT_COLUMNS
)
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}

_SUBID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase: sorts as it counts.
# What new_subid makes: 17 characters of that alphabet.
SUBID_PATTERN = re.compile(r"^[0-9a-hjkmnp-tv-z]{17}$")
# A domain a line carries: what host_domain keeps of a Host header.
_DOMAIN_PATTERN = re.compile(r"[0-9a-z.\-:\[\]]{1,253}")
MAX_DOMAIN = 253
_SUBID_PAIRS = tuple(a + b for a in _SUBID_ALPHABET for b in _SUBID_ALPHABET)


def ua_hash(user_agent: str) -> int:
    """CRC-32 of the UTF-8 user agent: the unsigned value PHP's crc32() returns."""
    return zlib.crc32(user_agent.encode("utf-8", "surrogatepass"))


def new_subid(now_ms: int | None = None) -> str:
    """A time-ordered, unique-in-practice subid: 9 base32 chars of milliseconds + 8 of 40 random bits.

    Time order keeps inserts into the unique index local; 40 random bits per millisecond make a
    collision negligible even at tens of thousands of clicks per second.
    """
    value = ((int(time.time() * 1000) if now_ms is None else now_ms) << 40) | random.getrandbits(40)
    pairs = _SUBID_PAIRS
    return (
        _SUBID_ALPHABET[(value >> 80) & 31]
        + pairs[(value >> 70) & 1023]
        + pairs[(value >> 60) & 1023]
        + pairs[(value >> 50) & 1023]
        + pairs[(value >> 40) & 1023]
        + pairs[(value >> 30) & 1023]
        + pairs[(value >> 20) & 1023]
        + pairs[(value >> 10) & 1023]
        + pairs[value & 1023]
    )


_SUBID_VALUES = {char: value for value, char in enumerate(_SUBID_ALPHABET)}


def subid_ms(subid: str) -> int | None:
    """The Unix ms new_subid made a subid at (the click's created_at), None if it is not one of its."""
    if not SUBID_PATTERN.match(subid):
        return None
    value = 0
    for char in subid:
        value = value << 5 | _SUBID_VALUES[char]
    return value >> 40


def host_domain(host: str) -> str:
    """The domain of a Host header as a click stores it: lowercased, without its port, at most 253
    characters; "" when absent or not a host name or address (it is never escaped in the line)."""
    if not host:
        return ""
    host = host.strip().lower()
    if host.startswith("["):  # [IPv6]:port
        end = host.find("]")
        host = host[: end + 1] if end > 0 else ""
    else:
        host = host.partition(":")[0]
    host = host[:MAX_DOMAIN]
    return host if _DOMAIN_PATTERN.fullmatch(host) else ""


def _escape(text: str) -> str:
    for special, escaped in _ESCAPES.items():
        text = text.replace(special, escaped)
    return text


def _unescape(text: str) -> str:
    out, chars = [], iter(text)
    for char in chars:
        out.append(_UNESCAPES.get(next(chars, ""), "") if char == "\\" else char)
    return "".join(out)


def line_tail(
    subid: str,
    campaign_id: int,
    stream_id: int | None,
    offer_id: int | None,
    cost: float,
    is_bot: int,
    texts: list[str],
    lander_id: int | None = None,
    domain: str = "",
) -> bytes:
    """Everything of a journal line after the head; built before the journal lock is taken.

    `texts` are the text columns in TAIL_COLUMNS order: user_agent, referrer, source,
    external_id, sub_id_1..30, the ROUTING_COLUMNS, location. `domain` is the request's host as the
    edge keeps it (`host_domain`: letters, digits, `.-[]:` only), never escaped.
    """
    joined = "\t".join(texts)
    if "\\" in joined or "\n" in joined or "\r" in joined or joined.count("\t") != len(texts) - 1:
        joined = "\t".join(map(_escape, texts))
    stream = "" if stream_id is None else stream_id
    offer = "" if offer_id is None else offer_id
    lander = "" if lander_id is None else lander_id
    return (
        f"{subid}\t{campaign_id}\t{stream}\t{offer}\t{lander}\t{cost!r}\t{int(is_bot)}\t{joined}\t{domain}"
    ).encode("utf-8", "replace")


def encode_line(
    ip: str, ua_hash: int, created_at: int, flags: tuple[int, int, int], tail: bytes, key: int | None = None
) -> bytes:
    """The whole journal line: the head (visitor and uniqueness flags), then `tail`, then the visitor
    `key` when `ip` is anonymised (it cannot be computed from that `ip` any more)."""
    if key is not None:
        return b"%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\n" % (
            ip.encode("ascii", "replace"),
            ua_hash,
            created_at,
            *flags,
            tail,
            key,
        )
    return b"%s\t%d\t%d\t%d\t%d\t%d\t%s\n" % (
        ip.encode("ascii", "replace"),
        ua_hash,
        created_at,
        *flags,
        tail,
    )


def peek_line(line: bytes) -> tuple[str, int, int]:
    """(ip, ua_hash, created_at) of a journal line without parsing the rest; ValueError if not one."""
    ip, visitor_hash, created_at, _ = line.split(b"\t", 3)
    return (
        _checked_ip(ip.decode("ascii")),
        _checked_int(visitor_hash, "ua_hash"),
        _checked_int(created_at, "created_at"),
    )


_PEEK_SUBID, _PEEK_CAMPAIGN, _PEEK_STREAM, _PEEK_OFFER = (
    LINE_COLUMNS.index(column) for column in ("subid", "campaign_id", "stream_id", "offer_id")
)
_KEYED_TABS = (KEYED_FIELD_COUNT - 1, PREVIOUS_KEYED_FIELD_COUNT - 1)


def peek_counted(line: bytes) -> tuple[str, int, int, int, int | None, int | None]:
    """(ip, ua_hash, created_at, campaign_id, stream_id, offer_id): what a worker indexes and counts of
    another worker's line, parsing only the first fields; ValueError if the line is not a click's."""
    fields = line.split(b"\t", _PEEK_OFFER + 1)
    if len(fields) <= _PEEK_OFFER + 1:
        raise ValueError("journal line has too few fields")
    return _peeked(fields)


def _peeked(fields: list[bytes]) -> tuple[str, int, int, int, int | None, int | None]:
    """peek_line's three fields and the counted ids, checked from a split the caller made (a worker
    reads every other worker's line: one a click at two workers, split once)."""
    stream, offer = fields[_PEEK_STREAM], fields[_PEEK_OFFER]
    return (
        _checked_ip(fields[0].decode("ascii")),
        _checked_int(fields[1], "ua_hash"),
        _checked_int(fields[2], "created_at"),
        _checked_int(fields[_PEEK_CAMPAIGN], "campaign_id"),
        _checked_int(stream, "stream_id") if stream else None,
        _checked_int(offer, "offer_id") if offer else None,
    )


def peek_visitor(line: bytes) -> tuple[int, int, int, int | None, int | None, str | None]:
    """(visitor key, created_at, campaign_id, stream_id, offer_id, subid of a click sent to a lander
    else None) of another worker's line, for the recent-visitor index and the held landers' clicks:
    the key the line carries, else the one of its ip and ua_hash."""
    fields = line.split(b"\t", _LANDER_FIELD + 1)
    if len(fields) <= _LANDER_FIELD + 1:
        raise ValueError("journal line has too few fields")
    ip, visitor_hash, created_at, campaign_id, stream_id, offer_id = _peeked(fields)
    # PERF: a new line's lander field is empty or an id; the previous release's holds a cost there,
    # which always has a "." or an "e" (repr of a float): no count of the fields needed.
    lander = fields[_LANDER_FIELD]
    subid = fields[_PEEK_SUBID].decode("ascii") if lander and lander.isdigit() else None
    last = line[line.rfind(b"\t") + 1 : -1]
    # PERF: a domain or a location is seldom a number, so most lines are told by that (~0.1 µs); a
    # number is the key if the tabs (text escapes its own) count one field more than a line without
    # it (~0.3 µs).
    if last.lstrip(b"-").isdigit() and line.count(b"\t") in _KEYED_TABS:
        key = _checked_int(last, "visitor_key")
    else:
        key = visitor_key(ip, visitor_hash)
    return key, created_at, campaign_id, stream_id, offer_id, subid


def _checked_int(text: bytes | str, column: str) -> int:
    value = int(text)
    low, high = _RANGES[column]
    if not low <= value <= high:
        raise ValueError(f"journal line's {column} {value} is out of range")
    return value


def _checked_ip(ip: str) -> str:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)
    except (OSError, ValueError):
        raise ValueError(f"journal line's ip {ip!r} is not an address") from None
    return ip


def _line_fields(line: bytes) -> list[str]:
    """A journal line's tab-separated fields, still escaped; ValueError if unterminated or not UTF-8."""
    if not line.endswith(b"\n"):
        raise ValueError("journal line without its terminator")
    try:
        return line[:-1].decode("utf-8").split("\t")
    except UnicodeDecodeError:
        raise ValueError("journal line is not UTF-8") from None


def decode_line(line: bytes) -> list:
    """A journal line as a record: JOURNAL_COLUMNS values, the location, then the visitor key the line
    carries (None for a line keyed from its ip and ua_hash). ValueError if broken."""
    fields = _line_fields(line)
    key = None
    count = len(fields)
    if count != len(LINE_COLUMNS):
        if count == KEYED_FIELD_COUNT:
            key = _checked_int(fields.pop(), "visitor_key")
        else:
            if count == PREVIOUS_KEYED_FIELD_COUNT:
                key = _checked_int(fields.pop(), "visitor_key")
                count -= 1
            if count == LEGACY_FIELD_COUNT:
                fields[-1:-1] = [""] * len(ROUTING_COLUMNS)
            elif count != PREVIOUS_FIELD_COUNT:
                raise ValueError("journal line has the wrong number of fields")
            fields.insert(_LANDER_FIELD, "")  # No lander...
            fields.append("")  # ...and no domain: the previous release's line.
    if b"\\" in line:
        fields = [_unescape(field) if "\\" in field else field for field in fields]
    record = list(_TO_RECORD(fields))
    for position, column, low, high in _INT_CHECKS:
        value = record[position] = int(record[position])
        if not low <= value <= high:
            raise ValueError(f"journal line's {column} {value} is out of range")
    for position in _NULLABLE_POSITIONS:
        if record[position]:
            record[position] = _checked_int(record[position], JOURNAL_COLUMNS[position])
        else:
            record[position] = None
    cost = record[_COST] = float(record[_COST])
    if not (math.isfinite(cost) and 0 <= cost <= MAX_COST):
        raise ValueError(f"journal line's cost {cost} is out of range")
    if not SUBID_PATTERN.match(record[SUBID]):
        raise ValueError(f"journal line's subid {record[SUBID][:40]!r} is not one Lanner makes")
    _checked_ip(record[IP])
    record.append(key)
    return record


def decode_row(line: bytes) -> list:
    """A journal line as the click table's row: JOURNAL_COLUMNS values, then the visitor key to store
    (None: the store computes it from ip and ua_hash). ValueError if broken."""
    record = decode_line(line)
    # Answered to the visitor, not stored: only a redirect's origin, in the decision path.
    location = record.pop(LOCATION)
    record[ROUTE] = with_flushed_steps(record[ROUTE], location, None)
    return record


LP_PREFIX = b"lp\t"  # An LP click's line (see the module doc); a click's starts with an address.


def is_lp_line(line: bytes) -> bool:
    return line.startswith(LP_PREFIX)


def encode_lp_line(subid: str, clicked_at: int, offer_id: int | None, location: str) -> bytes:
    """An LP click's journal line: the click's subid, when, the offer chosen and the Location answered
    (a repeat of the LP click gets exactly that one)."""
    offer = "" if offer_id is None else offer_id
    return f"lp\t{subid}\t{clicked_at}\t{offer}\t{_escape(location)}\n".encode("utf-8", "replace")


def decode_lp_line(line: bytes) -> tuple[str, int, int | None, str]:
    """(subid, clicked_at, offer_id or None, location) of an LP click's line; ValueError if broken."""
    fields = _line_fields(line)
    if len(fields) != 5 or fields[0] != "lp":
        raise ValueError("LP click line has the wrong number of fields")
    _, subid, clicked_at, offer, location = fields
    if not SUBID_PATTERN.match(subid):
        raise ValueError(f"LP click line's subid {subid[:40]!r} is not one Lanner makes")
    return (
        subid,
        _checked_int(clicked_at, "created_at"),
        _checked_int(offer, "offer_id") if offer else None,
        _unescape(location) if "\\" in location else location,
    )
