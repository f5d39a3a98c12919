"""What a request sends, read strictly at the edge: JSON bodies, form bodies and query strings as UTF-8
text, or a refusal in one sentence (a 400), never a 500 further in.

Python's and Falcon's readers are lenient where the stores are not: json.loads takes `"\\ud800"`, and
raw bytes \\xed\\xa0\\x80 too (it decodes bytes with surrogatepass), as a str that neither SQLite nor
PostgreSQL can encode; it recurses once per level of nesting and reads integers of thousands of digits;
Falcon reads a query string's or a form's percent-escapes that are not UTF-8 as U+FFFD, quietly. Every
route family reads through here: the admin API (routes/v1/spec.py read_body), the report and exchange
rate APIs (routes/api.py), the panel's forms (the media handlers install_media_handlers sets, which
routes/panel/session.py read_form reads through), and the query strings of all three (StrictQuery);
the Click API and postbacks (routes/clickapi.py, routes/postback.py) call the same functions and answer
in their own shapes.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, unquote_to_bytes, urlencode

import falcon
from falcon.media import BaseHandler
from falcon.util.uri import parse_query_string

from models.errors import LannerError

MAX_JSON_DEPTH = 32  # The admin API's deepest body is 4 levels; postbacks allow fewer (routes/postback.py).
MAX_JSON_DIGITS = 100  # Past any 64-bit integer or amount; Python's own limit is 4,300.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


class Unreadable(LannerError, ValueError):
    """Input that is not UTF-8 text, or not JSON a store can keep; the message is one sentence for the
    sender."""


def is_text(value: str) -> bool:
    """False for a str holding a lone surrogate (JSON's `\\ud800`), which UTF-8 cannot encode."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8(raw: bytes, what: str) -> str:
    """`raw` as UTF-8 text; Unreadable when it is not (an encoded surrogate is not UTF-8 either)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable(f"{what} is not valid UTF-8.") from None


def wsgi_text(raw: str, what: str) -> str:
    """A WSGI string (the bytes sent, as latin-1) as the UTF-8 text the client sent."""
    return utf8(raw.encode("latin-1", "replace"), what)


def is_utf8_encoded(raw: bytes) -> bool:
    """Whether `raw`, its percent-escapes and `+`s decoded, is UTF-8."""
    try:
        unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def form_pairs(text: str, what: str, max_fields: int | None = None) -> list[tuple[str, str]]:
    """Form-encoded (or query string) `text` as its (name, value) pairs in order; Unreadable when a name
    or value is not UTF-8, or there are more than `max_fields`."""
    try:
        return parse_qsl(text, keep_blank_values=True, errors="strict", max_num_fields=max_fields)
    except UnicodeDecodeError:
        raise Unreadable(f"{what} has a value that is not valid UTF-8.") from None
    except ValueError:
        raise Unreadable(f"{what} has more than {max_fields} parameters.") from None


def json_depth_ok(text: str, max_depth: int) -> bool:
    """Nesting within `max_depth`, checked before json.loads (which recurses once per level)."""
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > max_depth:
            return False
    return True


def load_json(
    raw: bytes, what: str = "The body", *, max_depth: int = MAX_JSON_DEPTH, is_nul_kept: bool = False
) -> Any:
    """The JSON value `raw` holds, every string in it text a store can keep; Unreadable, in one sentence,
    for a body that is not UTF-8, nested deeper than `max_depth`, not JSON (NaN and Infinity are not),
    holding an integer of more than MAX_JSON_DIGITS digits, a lone surrogate or (unless `is_nul_kept`:
    the caller replaces it, as postbacks do) a NUL, which PostgreSQL's text cannot hold. A number too
    large for a float reads as infinity, which the caller's type checks refuse by the field's name."""
    text = utf8(raw, what)
    if not json_depth_ok(text, max_depth):
        raise Unreadable(f"{what} is nested deeper than {max_depth} levels.")
    try:
        value = json.loads(text, parse_int=_bounded_int(what), parse_constant=_refuse_constant)
    except Unreadable:
        raise
    except (ValueError, RecursionError):
        raise Unreadable(f"{what} is not valid JSON.") from None
    if "\\u" in text and not _all_text(value):  # Only an escape makes a surrogate of UTF-8 text.
        raise Unreadable(f"{what} holds a lone surrogate (\\ud800 to \\udfff), which is not text.")
    if not is_nul_kept and "\\u0000" in text and _holds_nul(value):  # JSON's strings hold no raw NUL.
        raise Unreadable(f"{what} holds a NUL character (\\u0000), which is not text a store can keep.")
    return value


def _bounded_int(what: str):
    def parse(digits: str) -> int:
        if len(digits) > MAX_JSON_DIGITS + 1:  # Its sign.
            raise Unreadable(f"{what} holds a number of more than {MAX_JSON_DIGITS} digits.")
        return int(digits)

    return parse


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _all_text(value: Any) -> bool:
    """Whether every string and key in a parsed JSON value is text (no lone surrogate); iterative, so
    no depth limit of its own."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not is_text(item):
                return False
        elif isinstance(item, dict):
            if not all(is_text(key) for key in item):
                return False
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def _holds_nul(value: Any) -> bool:
    """Whether a string or key in a parsed JSON value holds a NUL; iterative, as _all_text."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            if any("\x00" in key for key in item):
                return True
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def has_nul(raw: str) -> bool:
    """Whether form-encoded text (or a query string) holds a NUL, as a byte or as `%00`."""
    return "%00" in raw or "\x00" in raw


NUL_REFUSED = "holds a NUL character (%00), which is not text a store can keep."


def bad_request(exc: Unreadable, title: str) -> falcon.HTTPBadRequest:
    return falcon.HTTPBadRequest(title=title, description=str(exc))


class StrictJSONHandler(BaseHandler):
    """Falcon's JSON media handler for requests, reading as load_json does (400 "Bad JSON")."""

    def deserialize(self, stream, content_type, content_length) -> Any:
        raw = stream.read()
        if not raw:
            raise falcon.MediaNotFoundError("JSON")
        try:
            return load_json(raw)
        except Unreadable as exc:
            raise bad_request(exc, "Bad JSON") from None

    def serialize(self, media: Any, content_type: str) -> bytes:
        return json.dumps(media, ensure_ascii=False).encode()


class StrictFormHandler(BaseHandler):
    """Falcon's urlencoded form handler, refusing (400 "Bad form") a form whose bytes or percent-escapes
    are not UTF-8 where Falcon's would read U+FFFD; raw UTF-8 is taken as it is. The same shape as
    Falcon's: {name: value}, a repeated name's values as a list."""

    def deserialize(self, stream, content_type, content_length) -> Any:
        raw = stream.read()
        try:
            text = utf8(raw, "The form")
            if not is_utf8_encoded(raw):
                raise Unreadable("The form has a value that is not valid UTF-8.")
            if has_nul(text):
                raise Unreadable(f"The form {NUL_REFUSED}")
        except Unreadable as exc:
            raise bad_request(exc, "Bad form") from None
        return parse_query_string(text, keep_blank=True, csv=False)

    def serialize(self, media: Any, content_type: str) -> bytes:
        return urlencode(media, doseq=True).encode()


class StrictQuery:
    """Middleware: 400 ("Bad query string") for a query string that is not UTF-8, percent-escapes
    decoded, or holds a NUL, on the paths under `prefixes`, before any resource reads it (Falcon would
    read U+FFFD; PostgreSQL refuses a NUL in any text it is asked to compare)."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        self.prefixes = prefixes

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        query = req.query_string
        is_plain = query.isascii() and "%" not in query and "\x00" not in query
        if not query or is_plain or not req.path.startswith(self.prefixes):
            return
        if not is_utf8_encoded(query.encode("latin-1", "replace")):
            raise falcon.HTTPBadRequest(
                title="Bad query string", description="The query string is not valid UTF-8."
            )
        if has_nul(query):
            raise falcon.HTTPBadRequest(
                title="Bad query string", description=f"The query string {NUL_REFUSED}"
            )


def install_media_handlers(app: falcon.App) -> None:
    """Read `app`'s JSON and form bodies (req.get_media()) with the strict handlers."""
    app.req_options.media_handlers[falcon.MEDIA_JSON] = StrictJSONHandler()
    app.req_options.media_handlers[falcon.MEDIA_URLENCODED] = StrictFormHandler()
