"""A visit: what one request says (IP, User-Agent, referrer, language, query parameters, bot signals), as
the edge parsed it (routes/click.py) for the click pipeline (models/clicks/tracker.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.choices import SUB_ID_SLOTS


@dataclass
class Visit:
    """What the edge parsed from one request; strings are already valid text and bounded."""

    ip: str
    user_agent: str
    referrer: str = ""
    source: str = ""
    external_id: str = ""
    keyword: str = ""
    accept_language: str = ""
    # What else the request says about a bot (HEAD, From, Sec-CH-UA...): models/lookups/bots.py
    # request_signals. Decided on the click path: the journal line has no room for it.
    bot_signals: str = ""
    cost: float = 0.0
    sub_ids: list[str] = field(default_factory=lambda: [""] * SUB_ID_SLOTS)
    params: dict[str, str] = field(default_factory=dict)
    # The Host the request came in on: `host` as sent (for a lander's {offer}), `domain` as the click
    # stores it (models.clicks.record.host_domain); is_https: over TLS (directly or per a trusted proxy).
    host: str = ""
    domain: str = ""
    is_https: bool = False
