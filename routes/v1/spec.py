"""What each admin API responder declares: its summary, query parameters and JSON body fields.

The declarations do three jobs: `read_body` checks a request body against them (unknown fields,
wrong types, a missing required field: 400), the OpenAPI document (routes/v1/openapi.py) is built
from them, and `api_resource` wraps every responder with the key check and the error answers.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any

import falcon

from models.errors import ConflictError, LannerError, NotFoundError
from models.reporting.notes import MoneyNote
from models.reporting.reports import PrunedRangeError
from models.store.database import StoreBusy
from routes.inputs import Unreadable, bad_request, load_json

# A campaign's JSON, a CSV of a few thousand conversions: a body beyond this is no one's mistake to accept.
MAX_BODY_BYTES = 1 << 20
# Fields no principal with hides_money sees (README, Admin API).
MONEY_FIELDS = frozenset(
    {
        "cost",
        "revenue",
        "revenue_pending",
        "profit",
        "roi",
        "epc",
        "cpc",
        "cpa",
        "payout",
        "report_payout",
        "cost_value",
        "amount",
        "report_amount",
        "per_click",
        "unconverted",
        "unconverted_note",
        "uncosted",
        "uncosted_note",
    }
)

TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # string, integer, number, boolean, strings, integers (lists), offers ([{offer_id, weight}]),
    # labels ({name: string}), numbers ({name: number}), objects (a list of objects, each with the fields
    # of `items`), landers ([{lander_id or name, weight}])
    about: str = ""
    required: bool = False
    items: tuple[Field, ...] = ()


@dataclass(frozen=True)
class Param:
    name: str
    about: str = ""
    type: str = "string"


@dataclass(frozen=True)
class Operation:
    summary: str
    params: tuple[Param, ...] = ()
    body: tuple[Field, ...] = ()
    body_type: str = "json"  # or csv, zip
    paginated: bool = False
    open_query: bool = False  # The responder checks its own query parameters (reports: f.<name>).
    answers: dict[int, str] = field(default_factory=dict)  # Status codes beyond 200 and the errors.


PAGE_PARAMS = (
    Param("limit", "Rows per page, 1 to 500 (default 50).", "integer"),
    Param("cursor", "The `next` of the page before."),
)


def check_params(req: falcon.Request, params: tuple[Param, ...]) -> dict[str, str]:
    """The query parameters, one value each; 400 for one the route does not take, naming those it does
    (a misspelt filter silently ignored would answer rows for everything)."""
    names = [p.name for p in params]
    given = {}
    for name, value in req.params.items():
        if name not in names:
            raise falcon.HTTPBadRequest(
                title="Unknown parameter",
                description=f"Unknown parameter {name[:40]!r}; use {', '.join(names) or 'none'}.",
            )
        if not isinstance(value, str):
            raise falcon.HTTPBadRequest(title="Repeated parameter", description=f"Give {name!r} once.")
        given[name] = value
    return given


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "strings":
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == "integers":
        return isinstance(value, list) and all(_type_ok(item, "integer") for item in value)
    if kind == "offers":
        return isinstance(value, list) and all(
            isinstance(item, dict)
            and set(item) <= {"offer_id", "weight"}
            and _type_ok(item.get("offer_id"), "integer")
            and _type_ok(item.get("weight", 100), "integer")
            for item in value
        )
    if kind == "labels":
        return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())
    if kind == "numbers":
        return isinstance(value, dict) and all(_type_ok(item, "number") for item in value.values())
    if kind == "objects":  # Each item is checked on its own (check_object), to be refused by its index.
        return isinstance(value, list)
    if kind == "landers":
        return isinstance(value, list) and all(
            isinstance(item, dict)
            and set(item) <= {"lander_id", "name", "weight"}
            and ("lander_id" in item) != ("name" in item)
            and _type_ok(item.get("lander_id", 1), "integer")
            and isinstance(item.get("name", ""), str)
            and _type_ok(item.get("weight", 100), "integer")
            for item in value
        )
    if isinstance(value, bool) and kind != "boolean":
        return False
    if kind == "number" and isinstance(value, float) and not math.isfinite(value):
        return False
    if kind == "integer" and isinstance(value, int) and not -(2**63) <= value < 2**63:
        return False  # What SQLite cannot store: an OverflowError, not a refusal.
    return isinstance(value, TYPES[kind])


def read_raw(req: falcon.Request, max_bytes: int = MAX_BODY_BYTES, what: str = "A request body") -> bytes:
    """The request body, refused past `max_bytes` (413) whatever Content-Length says: a Content-Length
    over it before a byte is read, a body that runs past it at the first byte over."""
    too_large = falcon.HTTPContentTooLarge(
        title="Body too large", description=f"{what} is at most {max_bytes:,} bytes."
    )
    if req.content_length is not None and req.content_length > max_bytes:
        raise too_large
    data = req.bounded_stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise too_large
    return data


def read_body(req: falcon.Request, fields: tuple[Field, ...]) -> dict[str, Any]:
    """The JSON object sent, checked against `fields`; 400 naming the first thing wrong."""
    try:
        body = load_json(read_raw(req) or b"{}")
    except Unreadable as exc:
        raise bad_request(exc, "Bad JSON") from None
    return check_object(body, fields)


def check_object(body: Any, fields: tuple[Field, ...], what: str = "The body") -> dict[str, Any]:
    """`body` checked against `fields` (a request body, or one item of a list field); 400 naming the
    first thing wrong."""
    if not isinstance(body, dict):
        raise falcon.HTTPBadRequest(title="Bad JSON", description=f"{what} must be a JSON object.")
    known = {f.name: f for f in fields}
    for name, value in body.items():
        spec = known.get(name)
        if spec is None:
            raise falcon.HTTPBadRequest(
                title="Unknown field",
                description=f"Unknown field {name[:40]!r}; use {', '.join(known) or 'no fields'}.",
            )
        if not _type_ok(value, spec.type):
            raise falcon.HTTPBadRequest(
                title="Wrong type", description=f"Field {name!r} must be {DESCRIBED[spec.type]}."
            )
    for spec in fields:
        if spec.required and spec.name not in body:
            raise falcon.HTTPBadRequest(
                title="Missing field", description=f"Field {spec.name!r} is required."
            )
    return body


DESCRIBED = {
    "string": "a string",
    "integer": "a whole number (64-bit)",
    "number": "a finite number",
    "boolean": "true or false",
    "strings": "a list of strings",
    "integers": "a list of whole numbers",
    "offers": 'a list of {"offer_id": N, "weight": N} objects',
    "labels": 'an object of strings ({"zoneid": "123"})',
    "numbers": 'an object of numbers ({"EUR": 1.08})',
    "objects": "a list (of objects)",
    "landers": 'a list of {"lander_id": N, "weight": N} (or {"name": "...", "weight": N}) objects',
}


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _without_money(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_money(item) for key, item in value.items() if key not in MONEY_FIELDS}
    if isinstance(value, list):  # A report's notes too: those that name payouts or costs go.
        return [_without_money(item) for item in value if not isinstance(item, MoneyNote)]
    return value


def answer(req: falcon.Request, resp: falcon.Response, data: Any, status: str = falcon.HTTP_200) -> None:
    """JSON for the principal: money fields dropped where it hides money; Infinity and NaN (a cost stored
    before costs were bounded) as null, never the invalid tokens Python prints for them."""
    principal = getattr(req.context, "principal", None)
    if principal is not None and principal.hides_money:
        data = _without_money(data)
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = json.dumps(_finite(data), allow_nan=False, default=str)


def refused(exc: LannerError) -> falcon.HTTPError:
    """A service's one-sentence refusal as an HTTP error, by its type: 404 for a thing that is not there
    (NotFoundError), 409 for one already there (ConflictError), 422 for a range that was pruned, 503 for a
    busy database, else 400."""
    message = str(exc)
    if isinstance(exc, StoreBusy):
        return falcon.HTTPServiceUnavailable(title="Busy", description=message, retry_after=1)
    if isinstance(exc, PrunedRangeError):
        return falcon.HTTPUnprocessableEntity(title="Clicks pruned", description=message)
    if isinstance(exc, NotFoundError):
        return falcon.HTTPNotFound(title="Not found", description=message)
    if isinstance(exc, ConflictError):
        return falcon.HTTPConflict(title="Conflict", description=message)
    return falcon.HTTPBadRequest(title="Refused", description=message)


def api_resource(cls):
    """Wrap each `on_<method>` responder of an admin API resource (which has `auth` and `operations`):
    the key checked first, then the query parameters against the declared ones, a service's LannerError
    answered as `refused` says, Cache-Control no-store."""
    for method, operation in cls.operations.items():
        name = f"on_{method.lower()}"
        responder = getattr(cls, name)

        @functools.wraps(responder)
        def guarded(self, req, resp, *args, _responder=responder, _operation=operation, **kwargs):
            resp.set_header("Cache-Control", "no-store")
            self.auth(req)
            if not _operation.open_query:
                check_params(req, _operation.params)
            try:
                return _responder(self, req, resp, *args, **kwargs)
            except LannerError as exc:
                raise refused(exc) from None

        setattr(cls, name, guarded)
    return cls
