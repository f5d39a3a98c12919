"""Cursor pagination: `limit` (default 50, at most 500) and `cursor`, the opaque `next` of the page before.

A cursor is the last row's key as URL-safe base64 of JSON; the order behind it is stable (ids, or
(time, id) for the logs), so rows added between pages neither repeat nor push others out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any

import falcon

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def page_limit(req: falcon.Request) -> int:
    text = req.get_param("limit")
    if text is None:
        return DEFAULT_LIMIT
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise falcon.HTTPBadRequest(
            title="Bad limit", description=f"The limit is a whole number from 1 to {MAX_LIMIT}."
        )
    return int(text)


def encode_cursor(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(req: falcon.Request) -> Any:
    """The key a `cursor` parameter holds, or None without one; 400 for one this API did not make."""
    text = req.get_param("cursor")
    if text is None:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        raise falcon.HTTPBadRequest(
            title="Bad cursor", description="The cursor is not one this API gave; start again without it."
        ) from None


def id_cursor(req: falcon.Request) -> int | None:
    """A cursor holding one row id (the logs')."""
    key = decode_cursor(req)
    if key is None:
        return None
    if not isinstance(key, int) or isinstance(key, bool) or not 0 < key < 2**63:
        raise falcon.HTTPBadRequest(
            title="Bad cursor", description="The cursor is not one this API gave; start again without it."
        )
    return key


def page(
    req: falcon.Request, items: Sequence[Any], key: Callable[[Any], list]
) -> tuple[list[Any], str | None]:
    """One page of a short list held in memory (campaigns, offers ...), ordered by `key` (a JSON list)."""
    limit = page_limit(req)
    after = decode_cursor(req)
    ordered = sorted(items, key=key)
    if after is not None:
        if not isinstance(after, list):
            raise falcon.HTTPBadRequest(
                title="Bad cursor", description="The cursor is not one this API gave; start again without it."
            )
        try:
            ordered = [item for item in ordered if key(item) > after]
        except TypeError:
            raise falcon.HTTPBadRequest(
                title="Bad cursor", description="The cursor is not one this API gave; start again without it."
            ) from None
    chosen = ordered[:limit]
    more = len(ordered) > limit
    return chosen, encode_cursor(key(chosen[-1])) if more else None


def log_page(rows: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """A page of a log read with `limit + 1` rows: the extra one only says there is a next page."""
    chosen = rows[:limit]
    return chosen, encode_cursor(chosen[-1]["id"]) if len(rows) > limit else None
