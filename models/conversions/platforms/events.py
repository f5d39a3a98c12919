"""What a platform is told about one conversion event, and what it answered, platform-neutral.

The click ids a platform needs (fbclid, ttclid, gclid, and Meta's fbp) are not columns of the click:
they are query parameters a campaign URL carries, stored in a sub_id slot by the campaign's traffic
source parameters (`fbclid={fbclid}`) or by LANNER_SUB_ID_ALIASES (`fbclid=20`), so the click path is
unchanged. `click_id_slots` finds each one's slot.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from models.routing.sources import loads, slot_of

# The query parameters whose values platforms match conversions to clicks with.
CLICK_ID_PARAMS = ("fbclid", "fbp", "ttclid", "gclid")


@dataclass(frozen=True)
class Connection:
    id: int
    name: str
    platform: str
    campaign_id: int | None
    source_id: int | None
    credentials: dict[str, str]
    events: dict[str, str]  # Conversion status -> the platform's event name.
    test_event_code: str
    status: str

    @classmethod
    def from_row(cls, row: tuple) -> Connection:
        id_, name, platform, campaign_id, source_id, credentials, events, test_code, status = row
        return cls(
            id_,
            name,
            platform,
            campaign_id,
            source_id,
            json.loads(credentials),
            json.loads(events),
            test_code,
            status,
        )


@dataclass(frozen=True)
class Event:
    """One conversion status as the platform hears of it."""

    delivery_id: int
    event_id: str  # Stable per (conversion, status): the platform's deduplication key.
    event_name: str
    event_time: int  # Unix seconds: when the conversion reached this status.
    value: float
    currency: str
    click_time_ms: int
    ip: str = ""
    user_agent: str = ""
    country: str = ""
    subid: str = ""
    click_ids: Mapping[str, str] = field(default_factory=dict)  # fbclid, fbp, ttclid, gclid as captured.


@dataclass(frozen=True)
class Request:
    url: str  # Without any credential: it is logged.
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    """A platform's answer to a batch: one verdict for the whole batch, or one per event (by delivery id)."""

    ok: bool
    text: str  # What the log shows: the platform's message, trimmed.
    retry_after: float | None = None  # Seconds, from a rate-limit answer.
    failed_rows: dict[int, str] = field(default_factory=dict)  # Delivery id -> the platform's error for it.
    # The platform refused what the request holds (an invalid parameter), not who sent it: one event of
    # a batch may be the cause, so the sender splits the batch to find it.
    refused_content: bool = False


def event_id(conversion_id: int, status: str) -> str:
    """The same for every attempt and every batch, so a platform drops a repeat (and the browser pixel's
    event with this id, if the lander sends one)."""
    return f"lanner-{conversion_id}-{status}"


def sha256_normalised(value: str) -> str:
    """A PII field as the platforms take it: trimmed, lowercased, SHA-256 in lowercase hex."""
    return hashlib.sha256(value.strip().lower().encode("utf-8")).hexdigest()


def click_id_slots(source_parameters: str, aliases: Mapping[str, int]) -> dict[str, int]:
    """Each click-id parameter's sub_id slot: the campaign's source parameters first, then the aliases."""
    slots = {name: slot for name, slot in aliases.items() if name in CLICK_ID_PARAMS}
    slots.update(
        {name: slot for name, slot in slot_of(loads(source_parameters)).items() if name in CLICK_ID_PARAMS}
    )
    return slots


def answer_text(body: bytes, limit: int = 500) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
