"""The click record: its columns, its journal line, and the visitor hash.

A click travels as one JSON array line in the spool journal, in `CLICK_COLUMNS` order plus the
Location it was answered with, and lands in the `click` table with the columns. This module is the only place that knows that shape.
"""

from __future__ import annotations

import json
import random
import time
import zlib

from models.click import SUB_ID_COLUMNS

CLICK_COLUMNS: tuple[str, ...] = (
    "subid",
    "created_at",
    "campaign_id",
    "stream_id",
    "offer_id",
    "ip",
    "user_agent",
    "ua_hash",
    "referrer",
    "source",
    "external_id",
    "cost",
    "is_unique_global",
    "is_unique_campaign",
    "is_unique_stream",
    "is_bot",
    *SUB_ID_COLUMNS,
)
COLUMN_COUNT = len(CLICK_COLUMNS)
# Positions used on the hot path without building dicts.
SUBID, CREATED_AT, CAMPAIGN_ID, STREAM_ID, OFFER_ID, IP, USER_AGENT, UA_HASH = range(8)
# A journal line carries one field past the columns: the Location answered, so a debounced repeat
# served by another worker gets exactly the same one. It is not stored in the click table.
LOCATION = COLUMN_COUNT

_encode = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
_decode = json.JSONDecoder().decode

_SUBID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase: sorts as it counts.
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


def encode_line(record: list | tuple) -> bytes:
    """One journal line; ASCII-only JSON, so a newline can only be the terminator."""
    return (_encode(record) + "\n").encode("ascii")


def decode_line(line: bytes) -> list:
    """Parse and validate one journal line; raise ValueError when it is not a click record."""
    record = _decode(line.decode("ascii"))
    if not isinstance(record, list) or len(record) != COLUMN_COUNT + 1:
        raise ValueError("not a click record")
    if not isinstance(record[SUBID], str) or not isinstance(record[CREATED_AT], int):
        raise ValueError("click record without subid or created_at")
    return record
