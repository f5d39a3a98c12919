"""Fuzzing the parsers at the edge: Hypothesis-made requests through the real WSGI app, in this process.

Four parsers, each a function of `PARSERS` sending one generated request to a `Stack` (the app over a
migrated database and spool, a campaign, its Click API token, a click's subid, the keys):

- `click URL`: `/<alias>` and the other click paths (`/lp/click`, `/?_lp=1`, `/px/click/<alias>`) with
  query strings of sub ids, macros, costs and garbage;
- `postback`: GET query, form body and JSON body, with the right key, a wrong one and none;
- `Click API`: `/click_api/v3` and `/api.php`, its query and form parameters;
- `admin API`: every /api/v1 route with a JSON body (POST, PATCH, PUT; bodies built from the OpenAPI
  document's fields, with values of any type) and every list's query parameters.

Values are hostile: any unicode (lone surrogates too), bytes that are not UTF-8, huge numbers, nested
JSON, long values, SQL fragments, NUL bytes, percent-encoding garbage. For every request (`check`): no
5xx, and no traceback logged; the answer has the endpoint's documented shape; a refusal writes nothing
(the rows of the tables it must not touch, the journal's bytes), an accepted request at most a bound.
tests/test_fuzz_parsers.py runs 1,000 examples of each in `make test`; `lanner bench fuzz --examples N`
runs more and prints parser, examples and failures.
"""

from __future__ import annotations

import functools
import json
import logging
import wsgiref.validate
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_from_bytes

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from models.errors import LannerError

# What a refusal must never touch, per parser (rows counted before and after each request).
ADMIN_TABLES = (
    "campaign",
    "stream",
    "stream_offer",
    "stream_lander",
    "offer",
    "lander",
    "traffic_source",
    "network",
    "postback_target",
    "status_map",
    "cost_entry",
    "conversion",
    "audit_log",
    "campaign_share",
)
POSTBACK_TABLES = ("conversion", "postback_log", "postback_delivery", "click")
ACCEPTED_ROWS = 64  # Rows one accepted admin request may add (a campaign: its stream, offer, audit rows).
JOURNAL_SLACK = 4096  # Bytes of a click's line beyond twice the request's own size.

SQL = ["' OR 1=1 --", "1; DROP TABLE click; --", '" OR ""="', "%' --", "1 UNION SELECT sqlite_version()"]
NASTY = [
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "\r\nX-Injected: 1",
    "{subid}",
    "{sub_id_1}",
    "{date:Y-m-d}",
    "{",
    "}",
    "$",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "1e309",
    "-1e309",
    "NaN",
    "Infinity",
    "-0",
    "0x10",
    "9" * 400,
    "-" + "9" * 40,
    "1.7976931348623157e308",
    "\u202e\u200b\ufeff",
    "\U0001f680",
    "ǅ",
    *SQL,
]
RAW = [
    b"%",
    b"%zz",
    b"%ff",
    b"%c3%28",
    b"%ed%a0%80",
    b"%00",
    b"\xff\xfe",
    b"\xc3",
    b"\xed\xa0\x80",
    b"+",
    b"&&==",
]

# Any code point, lone surrogates included (Hypothesis leaves them out of text by default).
ANY_CHAR = st.characters(codec=None, categories=None)
# Any code point UTF-8 can encode: every one but the surrogates. PERF: said as the category left out,
# not as codec="utf-8" (the same characters; also from_regex's default alphabet), which makes
# Hypothesis test all 1.1 M code points against the codec once per process without a cached table
# (~1.5 CPU-s, in each pytest-xdist worker of a fresh checkout).
UTF8_CHAR = st.characters(exclude_categories=["Cs"])
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=24),
    st.sampled_from(NASTY),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=200, max_value=20_000).map(lambda n: "a" * n),  # long values
)


def encode_text(value: str) -> bytes:
    """A value as a client would put it in a query: percent-encoded UTF-8 (a lone surrogate as the
    bytes Python's surrogatepass gives, which no UTF-8 decoder takes)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="").encode()


@functools.cache
def query_value() -> st.SearchStrategy[bytes]:
    return st.one_of(
        TEXT.map(encode_text),
        st.binary(max_size=24).map(lambda raw: quote_from_bytes(raw).encode()),
        st.binary(max_size=16),  # raw bytes on the wire, not escaped
        st.sampled_from(RAW),
    )


def query_string(names: list[str]) -> st.SearchStrategy[bytes]:
    return _query_string(tuple(names))


@functools.cache  # PERF: a strategy built once is drawn from ~10 times faster than one built per draw.
def _query_string(names: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    """name=value pairs: the endpoint's own names (mostly) and random ones, joined with & (or worse)."""
    name = st.one_of(
        st.sampled_from([n.encode() for n in names]), TEXT.map(encode_text), st.sampled_from(RAW)
    )
    pair = st.one_of(
        st.tuples(name, query_value()).map(lambda p: p[0] + b"=" + p[1]),
        name,  # a bare name
    )
    return st.tuples(st.lists(pair, max_size=8), st.sampled_from([b"&", b"&", b";", b"&&"])).map(
        lambda t: t[1].join(t[0])
    )


@functools.cache
def json_values(depth: int = 3) -> st.SearchStrategy[Any]:
    scalar = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**25), max_value=10**25),
        st.floats(allow_nan=False, allow_infinity=False),
        TEXT,
    )
    return st.recursive(
        scalar,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
        max_leaves=8 if depth else 1,
    )


def json_bytes(document: Any) -> bytes:
    """JSON as a client sends it; lone surrogates as \\ud800 escapes (ensure_ascii)."""
    return json.dumps(document).encode()


BROKEN_JSON = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"",
            b"{",
            b"[" * 5000,
            b'{"a":' * 100 + b"1" + b"}" * 100,
            b'{"subid": "\\ud800"}',
            b'{"payout": 1' + b"0" * 500 + b"}",
            b'{"payout": NaN}',
            b'{"payout": Infinity}',
            b"\xef\xbb\xbf{}",
            b'{"a": "\xff"}',
            b"null",
            b"[]",
            b'"text"',
            b"{}" * 3,
        ]
    ),
)


# -- the stack under test ---------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ErrorLog(logging.Handler):
    """Every ERROR record (the catch-all's traceback among them) while the fuzzers run."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Stack:
    """One app over one database and spool, and what requests need: alias, token, a subid, the keys."""

    app: Callable
    db: Any
    spool_dir: Path
    alias: str
    token: str
    subid: str
    stream_id: int
    offer_id: int
    postback_key: str
    api_key: str
    errors: ErrorLog = field(default_factory=ErrorLog)

    def request(
        self,
        path: bytes,
        query: bytes = b"",
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> Answer:
        """The app called as bjoern calls it: PATH_INFO and QUERY_STRING the bytes sent, as latin-1."""
        from falcon.testing import StartResponseMock, create_environ
        from falcon.testing.helpers import closed_wsgi_iterable

        environ = create_environ(
            path="/",
            method=method,
            headers=headers or {},
            body=body,
            host="127.0.0.1",
            remote_addr="127.0.0.1",
        )
        environ["PATH_INFO"] = path.decode("latin-1")
        environ["QUERY_STRING"] = query.decode("latin-1")
        if not any(name.lower() == "user-agent" for name in headers or {}):
            del environ["HTTP_USER_AGENT"]
        answer = StartResponseMock()
        data = b"".join(closed_wsgi_iterable(wsgiref.validate.validator(self.app)(environ, answer)))
        sent = {name.lower(): value for name, value in answer.headers}
        for value in sent.values():
            value.encode("latin-1")  # What a WSGI server must send a header as.
        return Answer(int(answer.status[:3]), sent, data)

    def rows(self, tables: tuple[str, ...]) -> dict[str, int]:
        """Each table's row count, in one statement (the names are this module's constants)."""
        sql = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {table})" for table in tables)
        return dict(zip(tables, self.db.connection().execute(sql).fetchone(), strict=True))

    def journal_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.spool_dir.glob("*.log") if path.is_file())


@dataclass(frozen=True)
class Shape:
    """What a generated request may name of its stack (the strategies draw from these)."""

    alias: str
    token: str
    subid: str
    stream_id: str
    offer_id: str
    postback_key: str

    @classmethod
    def of(cls, stack: Stack) -> Shape:
        return cls(
            stack.alias,
            stack.token,
            stack.subid,
            str(stack.stream_id),
            str(stack.offer_id),
            stack.postback_key,
        )


# Requests are generated once per process with these marks in place of a stack's values, and bound to
# each stack they are sent to (`bind`): tests/test_fuzz_parsers.py sends the same 1,000 requests per
# parser to SQLite and to PostgreSQL, whose tokens, keys and subids differ. PERF: drawing them is
# most of a parser's CPU (~2.5 of ~3 s), so drawing once halves the module's cost. Marks are ASCII
# that needs no escaping in a query or JSON, and no generated value is long enough to hold one by chance.
MARKS = Shape(
    "zqalias1zq",
    "zqtoken2zqzqzqzq",
    "zqsubid3zqzqzqzq",
    "zqstream4zqzqzq",
    "zqoffer5zqzqzqzq",
    "zqpostback6zqzqzq",
)


def bind(value: Any, pairs: list[tuple[str, str]]) -> Any:
    """`value` (a generated request: tuples, lists, dicts of str and bytes) with each mark replaced."""
    if isinstance(value, bytes):
        for mark, real in pairs:
            value = value.replace(mark.encode(), real.encode())
        return value
    if isinstance(value, str):
        for mark, real in pairs:
            value = value.replace(mark, real)
        return value
    if isinstance(value, tuple):
        return tuple(bind(item, pairs) for item in value)
    if isinstance(value, list):
        return [bind(item, pairs) for item in value]
    if isinstance(value, dict):
        return {bind(key, pairs): bind(item, pairs) for key, item in value.items()}
    return value


def bindings(stack: Stack) -> list[tuple[str, str]]:
    shape = Shape.of(stack)
    return [(getattr(MARKS, name), getattr(shape, name)) for name in MARKS.__dataclass_fields__]


def prepare(db, app, spool_dir: Path) -> Stack:
    """A campaign with a token and one landed click (a subid postbacks can convert), the keys."""
    from models.admin.services import create_campaign
    from models.clicks.spool import flush_spool
    from models.conversions.postbacks import read_secret

    campaign = create_campaign(db, "Fuzz", "fuzz", offer_url="https://o.example/?s={subid}&z={sub_id_1}")
    stack = Stack(app, db, spool_dir, "fuzz", campaign.token, "", 0, 0, "", "")
    stack.postback_key, stack.api_key = read_secret(db, "postback_key"), read_secret(db, "api_key")
    answer = stack.request(
        b"/fuzz", b"sub1=x", headers={"User-Agent": "Mozilla/5.0 fuzz", "X-Real-IP": "203.0.113.9"}
    )
    location = answer.headers["location"]
    stack.subid = location.split("s=", 1)[1].split("&", 1)[0]
    flush_spool(db, spool_dir, 1 << 24)
    row = db.connection().execute("SELECT stream_id, offer_id FROM click WHERE subid = ?", (stack.subid,))
    stack.stream_id, stack.offer_id = row.fetchone()
    logging.getLogger().addHandler(stack.errors)
    return stack


def close(stack: Stack) -> None:
    logging.getLogger().removeHandler(stack.errors)


# -- the invariants ---------------------------------------------------------------------------------


class Broken(LannerError, AssertionError):
    """An invariant a request broke; the message says which, with the request (a failed test, or a
    failure `lanner bench fuzz` counts and prints)."""


def expect(condition: bool, what: str, request: Any, answer: Answer) -> None:
    if not condition:
        raise Broken(f"{what}: {request!r} -> {answer.status} {answer.body[:300]!r}")


def check_common(stack: Stack, request: Any, answer: Answer, errors_before: int) -> None:
    expect(200 <= answer.status < 500, "a 5xx (or an unknown status)", request, answer)
    logged = stack.errors.records[errors_before:]
    expect(not logged, f"an error logged ({logged[0].getMessage() if logged else ''})", request, answer)


def json_answer(request: Any, answer: Answer) -> Any:
    try:
        return answer.json()
    except ValueError:
        raise Broken(
            f"an answer that is not JSON: {request!r} -> {answer.status} {answer.body[:300]!r}"
        ) from None


# -- the parsers ------------------------------------------------------------------------------------

CLICK_NAMES = [
    "sub1",
    "sub2",
    "sub_id_1",
    "sub_id_30",
    "sub_id_31",
    "subid",
    "_subid",
    "_lp",
    "_token",
    "cost",
    "source",
    "keyword",
    "external_id",
    "utm_source",
    "zoneid",
    "{subid}",
]


@st.composite
def click_requests(draw, stack: Shape) -> tuple[bytes, bytes, dict[str, str]]:
    path = draw(
        st.one_of(
            st.just(b"/" + stack.alias.encode()),
            st.just(b"/" + stack.alias.encode()),
            st.just(b"/" + stack.alias.encode()),
            st.sampled_from(
                [b"/", b"/lp/click", b"/px/click/" + stack.alias.encode(), b"/lp/visit", b"/click_api"]
            ),
            TEXT.map(lambda text: b"/" + encode_text(text)),
            st.binary(max_size=24).map(lambda raw: b"/" + raw),
        )
    )
    query = draw(query_string(CLICK_NAMES))
    headers = {
        "User-Agent": draw(
            st.sampled_from(["Mozilla/5.0 fuzz", "", "Googlebot/2.1", "\x7f\xff" * 8, "Mozilla\x00fuzz"])
        ),
        "X-Real-IP": draw(
            st.sampled_from(["203.0.113.9", "2001:db8::9", "not an address", "::ffff:1.2.3.4"])
        ),
    }
    if draw(st.booleans()):
        headers["Referer"] = draw(TEXT).encode("utf-8", "surrogatepass").decode("latin-1")
    return path, query, headers


def fuzz_click(stack: Stack, request: tuple[bytes, bytes, dict[str, str]]) -> None:
    path, query, headers = request
    before, errors = stack.journal_bytes(), len(stack.errors.records)
    answer = stack.request(path, query, headers=headers)
    check_common(stack, answer=answer, request=request, errors_before=errors)
    grown = stack.journal_bytes() - before
    if answer.status == 302:
        expect(bool(answer.headers.get("location")), "a 302 without a Location", request, answer)
    if answer.status >= 400 and not (answer.status == 404 and path == b"/" + stack.alias.encode()):
        expect(grown == 0, f"a refusal wrote {grown} bytes to the journal", request, answer)
    bound = 2 * (len(path) + len(query) + sum(len(v) for v in headers.values())) + JOURNAL_SLACK
    expect(grown <= bound, f"{grown} bytes journaled, more than {bound}", request, answer)


POSTBACK_NAMES = [
    "subid",
    "clickid",
    "click_id",
    "status",
    "payout",
    "currency",
    "tid",
    "transaction_id",
    "from",
    "sale_status",
    "lead_status",
    "sub_id_1",
    "key",
]


# A near-valid postback's parameters, one value of them hostile now and then.
POSTBACK_VALUES = {
    b"status": st.sampled_from(["sale", "lead", "approved", "rejected", "rebill", "trash", "hold", "Sale"]),
    b"payout": st.one_of(st.floats(0, 1e9).map(repr), st.integers(0, 10**9).map(str)),
    b"currency": st.sampled_from(["USD", "EUR", "usd", "XXX"]),
    b"tid": st.text(UTF8_CHAR, max_size=12),
    b"from": st.sampled_from(["affise", "adv", ""]),
    b"sale_status": st.just("approved,paid"),
    b"sub_id_1": st.text(UTF8_CHAR, max_size=12),
}
POSTBACK_QUERY = st.lists(
    st.sampled_from(sorted(POSTBACK_VALUES)).flatmap(
        lambda name: st.one_of(POSTBACK_VALUES[name], POSTBACK_VALUES[name], TEXT).map(
            lambda value: name + b"=" + encode_text(value)
        )
    ),
    max_size=5,
).map(b"&".join)


@st.composite
def postback_requests(draw, stack: Shape) -> tuple[str, bytes, bytes, str, bytes]:
    key = draw(st.sampled_from(["path", "query", "body", "wrong", "none"]))
    path = b"/postback"
    if key == "path":
        path = f"/{stack.postback_key}/postback".encode()
    elif key == "wrong":
        path = b"/0123456789abcdef/postback"
    query = draw(st.one_of(query_string(POSTBACK_NAMES), POSTBACK_QUERY, POSTBACK_QUERY))
    subid = draw(st.sampled_from([stack.subid, stack.subid, "01hq7c3d2v9xk4t8m", "{subid}"]))
    if draw(st.integers(0, 3)):
        query += b"&subid=" + subid.encode()
    if key == "query":
        query += b"&key=" + stack.postback_key.encode()
    kind = draw(st.sampled_from(["get", "form", "json", "json", "broken"]))
    body = b""
    if kind == "form":
        body = draw(query_string(POSTBACK_NAMES))
        if key == "body":
            body += b"&key=" + stack.postback_key.encode()
    elif kind == "json":
        fields = draw(st.dictionaries(st.sampled_from(POSTBACK_NAMES), json_values(), max_size=6))
        if draw(st.integers(0, 3)):
            fields["subid"] = subid
        if key == "body":
            fields["key"] = stack.postback_key
        body = json_bytes(fields) if draw(st.integers(0, 9)) else json_bytes(draw(json_values()))
    elif kind == "broken":
        body = draw(BROKEN_JSON)
    content_type = {"get": "", "form": "application/x-www-form-urlencoded", "json": "application/json"}.get(
        kind, "application/json"
    )
    return key, path, query, content_type, body


def fuzz_postback(stack: Stack, request: tuple[str, bytes, bytes, str, bytes]) -> None:
    key, path, query, content_type, body = request
    method = "POST" if content_type else "GET"
    headers = {"Content-Type": content_type} if content_type else {}
    before, errors = stack.rows(POSTBACK_TABLES), len(stack.errors.records)
    answer = stack.request(path, query, method, headers, body)
    check_common(stack, request, answer, errors)
    media = json_answer(request, answer)
    expect(
        isinstance(media, dict) and media.get("status") in ("ok", "error"),
        "not a postback's answer",
        request,
        answer,
    )
    if media["status"] == "error":
        expect(
            isinstance(media.get("detail"), str) and "verdict" in media,
            "an error without its verdict",
            request,
            answer,
        )
    after = stack.rows(POSTBACK_TABLES)
    grown = {table: after[table] - before[table] for table in POSTBACK_TABLES}
    expect(grown["click"] == 0, "a postback wrote a click", request, answer)
    if answer.status == 403:
        expect(not any(grown.values()), f"a wrong key wrote {grown}", request, answer)
    if answer.status >= 400 or media["status"] == "error":
        expect(
            grown["conversion"] == 0 and grown["postback_delivery"] == 0,
            f"a refusal wrote {grown}",
            request,
            answer,
        )
    expect(all(n <= 2 for n in grown.values()), f"one postback wrote {grown}", request, answer)


CLICK_API_NAMES = [
    "token",
    "ip",
    "user_agent",
    "ua",
    "language",
    "referrer",
    "keyword",
    "info",
    "log",
    "force_redirect_offer",
    "sub_id_1",
    "sub_id_30",
    "sub1",
    "cost",
    "x-forwarded-for",
    "uniqueness_cookie",
]


@st.composite
def click_api_requests(draw, stack: Shape) -> tuple[bytes, bytes, str, bytes]:
    path = draw(st.sampled_from([b"/click_api/v3", b"/api.php"]))
    query = draw(query_string(CLICK_API_NAMES))
    token = draw(st.sampled_from([stack.token, stack.token, stack.token, "", "nope"]))
    if draw(st.integers(0, 4)):
        query = b"token=" + token.encode() + b"&" + query
    if draw(st.booleans()):
        query += b"&ip=" + draw(st.sampled_from([b"203.0.113.5", b"2001:db8::5", b"1.2.3", b"%00"]))
    if draw(st.booleans()):
        query += b"&info=1&log=1"
    method = draw(st.sampled_from(["GET", "POST"]))
    body = draw(query_string(CLICK_API_NAMES)) if method == "POST" else b""
    return path, query, method, body


def fuzz_click_api(stack: Stack, request: tuple[bytes, bytes, str, bytes]) -> None:
    path, query, method, body = request
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if method == "POST" else {}
    before, errors = stack.journal_bytes(), len(stack.errors.records)
    answer = stack.request(path, query, method, headers, body)
    check_common(stack, request, answer, errors)
    media = json_answer(request, answer)
    expect(isinstance(media, dict), "not an object", request, answer)
    grown = stack.journal_bytes() - before
    if answer.status >= 400:
        expect(
            isinstance(media.get("error"), str) and bool(media["error"]),
            "a refusal without its error",
            request,
            answer,
        )
        expect(grown == 0, f"a refusal wrote {grown} bytes to the journal", request, answer)
    else:
        expect(isinstance(media.get("headers"), list), "an answer without headers", request, answer)
    bound = 2 * (len(query) + len(body)) + JOURNAL_SLACK
    expect(grown <= bound, f"{grown} bytes journaled, more than {bound}", request, answer)


# The admin API's routes, from its own OpenAPI document: (method, path template, body schema or None,
# query names). Domains are left out (adding one may ask nginx for a certificate).
def admin_operations(stack: Stack) -> list[tuple[str, str, dict | None, list[str]]]:
    document = stack.request(b"/api/v1/openapi.json").json()
    operations = []
    for path, methods in document["paths"].items():
        if "domains" in path:
            continue
        for method, operation in methods.items():
            if method not in ("get", "post", "patch", "put"):
                continue
            content = operation.get("requestBody", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if method != "get" and schema is None:
                continue  # a zip or CSV body
            names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
            operations.append((method.upper(), path, schema, names))
    return operations


def value_for(schema: dict, name: str = "") -> st.SearchStrategy[Any]:
    hostile = _value_for(json.dumps(schema, sort_keys=True))
    return st.one_of(PLAUSIBLE[name], hostile) if name in PLAUSIBLE else hostile


# Values the services take, by field name: half the admin API's bodies are near-valid, so its writes are
# reached (and hostile values land in a body that would otherwise be accepted).
URL = "https://o.example/?s={subid}&z={sub_id_1}"
DAY = st.dates().map(str)
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "url": st.sampled_from([URL, "https://xn--ffer-45d.example/p", "https://o.example/{zoneid}"]),
    "offer_url": st.just(URL),
    "default_url": st.just(URL),
    "postback_url": st.just("https://s.example/pb?c={subid}&p={payout}"),
    "alias": st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True, alphabet=UTF8_CHAR),
    "name": st.text(UTF8_CHAR, min_size=1, max_size=12),
    "campaign": st.just("fuzz"),
    "target": st.just("fuzz"),
    "offer_id": st.just(1),
    "fallback_offer_id": st.just(1),
    "weight": st.integers(0, 1000),
    "filters": st.lists(
        st.sampled_from(
            ["country=US,GB", "param.a~x", "unique=campaign", "ip=10.0.0.0/8", "schedule=mon-fri 09:00-18:00"]
        ),
        max_size=3,
    ),
    "type": st.sampled_from(["intercepting", "regular", "fallback"]),
    "action": st.sampled_from(["offers", "redirect", "html", "not_found", "campaign"]),
    "status": st.sampled_from(["active", "paused", "archived", "sale", "lead", "rejected"]),
    "timezone": st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Mars/Olympus"]),
    "currency": st.sampled_from(["USD", "EUR", "XXX", "usd"]),
    "from": DAY,
    "to": DAY,
    "amount": st.floats(0, 1e6),
    "payout": st.floats(0, 1e9),
    "word": st.text(UTF8_CHAR, min_size=1, max_size=12),
    "statuses": st.lists(st.sampled_from(["sale", "lead", "rejected", "rebill", "trash"]), max_size=3),
    "template": st.sampled_from(["affise", "everflow", "tune", "nope"]),
    "sub_ids": st.dictionaries(st.sampled_from(["zoneid", "sub_id_1", "x"]), TEXT, max_size=2),
}


@functools.cache
def _value_for(key: str) -> st.SearchStrategy[Any]:
    schema = json.loads(key)
    """A value of the field's declared type (with hostile contents), or of any type."""
    kind = schema.get("type")
    typed: st.SearchStrategy[Any]
    if kind == "string":
        typed = TEXT
    elif kind == "integer":
        typed = st.one_of(st.integers(-5, 5), st.integers(), st.sampled_from([2**63, -(2**63) - 1, 10**99]))
    elif kind == "number":
        typed = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**40), 10**40))
    elif kind == "boolean":
        typed = st.booleans()
    elif kind == "array":
        typed = st.lists(value_for(schema.get("items", {})), max_size=4)
    elif kind == "object" and "properties" in schema:
        typed = object_for(schema)
    else:
        typed = json_values()
    return st.one_of(typed, typed, typed, json_values(1))


def object_for(schema: dict) -> st.SearchStrategy[dict]:
    return _object_for(json.dumps(schema, sort_keys=True))


@functools.cache
def _object_for(key: str) -> st.SearchStrategy[dict]:
    schema = json.loads(key)
    properties = schema.get("properties", {})
    if not properties:
        return st.dictionaries(TEXT, json_values(1), max_size=3)
    required = set(schema.get("required", ()))
    fields = {name: value_for(spec, name) for name, spec in properties.items()}
    known = st.fixed_dictionaries(
        {name: fields[name] for name in properties if name in required},
        optional={name: fields[name] for name in properties if name not in required},
    )
    unknown = st.dictionaries(st.sampled_from(["zz_unknown", "id", "__proto__"]), TEXT, max_size=1)
    return st.one_of(known, known, known, st.tuples(known, unknown).map(lambda pair: {**pair[0], **pair[1]}))


@st.composite
def admin_requests(draw, stack: Shape, operations) -> tuple[str, bytes, bytes, bytes]:
    method, template, schema, names = draw(st.sampled_from(operations))
    path = template
    for name, known in (
        ("{ref}", [stack.alias, "1"]),
        ("{stream_id}", [stack.stream_id]),
        ("{offer_id}", [stack.offer_id]),
        ("{subid}", [stack.subid]),
        ("{conversion_id}", ["1"]),
        ("{target_id}", ["1"]),
        ("{word}", ["approved"]),
    ):
        if name in path:
            value = draw(st.one_of(st.sampled_from(known), TEXT.map(lambda t: encode_text(t).decode())))
            path = path.replace(name, value or "x")
    query = draw(query_string(names + ["limit", "cursor", "unknown"])) if method == "GET" else b""
    body = b""
    if schema is not None:
        kind = draw(st.integers(0, 9))
        body = (
            draw(BROKEN_JSON)
            if kind == 0
            else json_bytes(draw(object_for(schema) if kind > 1 else json_values()))
        )
    return method, path.encode(), query, body


def fuzz_admin(stack: Stack, request: tuple[str, bytes, bytes, bytes]) -> None:
    method, path, query, body = request
    headers = {"X-Api-Key": stack.api_key}
    if method != "GET":
        headers["Content-Type"] = "application/json"
    before, errors = stack.rows(ADMIN_TABLES), len(stack.errors.records)
    answer = stack.request(path, query, method, headers, body)
    check_common(stack, request, answer, errors)
    media = json_answer(request, answer) if answer.body else None
    after = stack.rows(ADMIN_TABLES)
    grown = {table: after[table] - before[table] for table in ADMIN_TABLES if after[table] != before[table]}
    if answer.status >= 400:
        expect(
            isinstance(media, dict) and isinstance(media.get("title"), str),
            "an error without a title",
            request,
            answer,
        )
        expect(not grown, f"a refusal changed {grown}", request, answer)
    else:
        expect(sum(grown.values()) <= ACCEPTED_ROWS, f"one request wrote {grown}", request, answer)


# name -> (strategy maker, from a stack's shape and the stack itself; check)
PARSERS: dict[str, tuple[Callable[[Shape, Stack], st.SearchStrategy], Callable[[Stack, Any], None]]] = {
    "click URL": (lambda shape, stack: click_requests(shape), fuzz_click),  # then every click lands
    "postback": (lambda shape, stack: postback_requests(shape), fuzz_postback),
    "Click API": (lambda shape, stack: click_api_requests(shape), fuzz_click_api),
    "admin API": (lambda shape, stack: admin_requests(shape, admin_operations(stack)), fuzz_admin),
}


@dataclass
class Outcome:
    parser: str
    examples: int = 0
    failures: list[str] = field(default_factory=list)


# Requests drawn so far in this process, by (parser, examples, seed): marked, not yet bound to a stack.
_GENERATED: dict[tuple[str, int, int | None], list[Any]] = {}


def generated(stack: Stack, parser: str, examples: int, seed: int | None = None) -> list[Any]:
    """`examples` requests of one parser, with `MARKS` for the stack's values; drawn on the first call
    in a process (derandomized unless `seed`: the same requests every run), the same list after."""
    key = (parser, examples, seed)
    if key not in _GENERATED:
        requests: list[Any] = []

        def keep(request: Any) -> None:  # A function of its own: Hypothesis wraps no builtin.
            requests.append(request)

        _hypothesis_run(parser, stack, keep, examples, seed, (Phase.explicit, Phase.generate))
        _GENERATED[key] = requests
    return _GENERATED[key]


def _hypothesis_run(
    parser: str, stack: Stack, one: Callable[[Any], None], examples: int, seed: int | None, phases
) -> None:
    strategy = PARSERS[parser][0]
    run = given(strategy(MARKS, stack))(one)
    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed is None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )(run)
    if seed is not None:
        from hypothesis import seed as with_seed

        run = with_seed(seed)(run)
    run()


def shrink(stack: Stack, parser: str, examples: int, seed: int | None = None) -> None:
    """After a failure: Hypothesis draws the same requests again, each checked on `stack`, so the
    failure raises shrunk to its smallest request (when the stack, changed by the first pass, still
    fails; else this returns and the caller raises the request that failed first)."""
    check, pairs = PARSERS[parser][1], bindings(stack)
    _hypothesis_run(
        parser, stack, lambda request: check(stack, bind(request, pairs)), examples, seed, tuple(Phase)
    )


def fuzz(
    stack: Stack, parser: str, examples: int, *, collect: bool = False, seed: int | None = None
) -> Outcome:
    """Send `examples` generated requests of one parser (`generated`, bound to this stack). In a test
    (collect=False) the first broken invariant raises, shrunk to its smallest request (`shrink`); the
    bench (collect=True) counts every failure."""
    check, pairs = PARSERS[parser][1], bindings(stack)
    outcome = Outcome(parser)
    for request in generated(stack, parser, examples, seed):
        outcome.examples += 1
        try:
            check(stack, bind(request, pairs))
        except Exception as exc:  # The bench's table counts them all; the first few are printed.
            if not collect:
                shrink(stack, parser, examples, seed)
                raise
            outcome.failures.append(f"{type(exc).__name__}: {exc}")
    problems = []
    if parser in ("click URL", "Click API"):  # Every click answered lands (a bad line blocks none).
        from models.clicks.spool import flush_spool

        try:
            landed = flush_spool(stack.db, stack.spool_dir, 1 << 24)
        except Exception as exc:
            problems.append(f"the spool did not land: {type(exc).__name__}: {exc}")
        else:
            if landed.rejected:
                problems.append(f"the flusher rejected {landed.rejected} journal lines")
    answer = stack.request(b"/healthz")
    if answer.status != 200:
        problems.append(f"/healthz answered {answer.status} after the run")
    if problems and not collect:
        raise Broken("; ".join(problems))
    outcome.failures += problems
    return outcome


def run_fuzz(
    work_dir: Path, parsers: list[str], examples: int, *, seed: int | None = None, report=print
) -> list[Outcome]:
    """`lanner bench fuzz`: each parser's `examples` requests against one app over a fresh SQLite
    database and spool in `work_dir` (the admin API last: it may archive the campaign the others use)."""
    from app import build_tracker, create_worker_app
    from models.migrations.runner import migrate
    from models.store.database import open_database
    from settings import load_settings

    settings_ = load_settings({"LANNER_DATA_DIR": str(work_dir), "LANNER_ADMIN_BIND": "off"})
    db = open_database(settings_.database_location, autocheckpoint=True)
    migrate(db)
    tracker = build_tracker(db, settings_)
    # What a web worker serves: campaign URLs in front of Falcon, the rest through it.
    stack = prepare(db, create_worker_app(settings_, tracker=tracker), settings_.spool_dir)
    outcomes = []
    try:
        for parser in [name for name in PARSERS if name in parsers]:
            report(f"{parser}: {examples} examples...")
            outcomes.append(fuzz(stack, parser, examples, collect=True, seed=seed))
    finally:
        close(stack)
        tracker.close()
        db.close()
    return outcomes
