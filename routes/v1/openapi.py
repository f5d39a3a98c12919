"""`GET /api/v1/openapi.json`: the OpenAPI 3.1 document, built from the routes' own declarations
(routes/v1/__init__.py's paths, each resource's `operations`), never kept by hand."""

from __future__ import annotations

import json
import re
from typing import Any

import falcon

from routes.v1.spec import Field, Operation

PATH_FIELD = re.compile(r"\{(\w+)(?::(\w+)(?:\([^)]*\))?)?\}")
SCHEMAS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "strings": {"type": "array", "items": {"type": "string"}},
    "integers": {"type": "array", "items": {"type": "integer"}},
    "offers": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"offer_id": {"type": "integer"}, "weight": {"type": "integer", "default": 100}},
            "required": ["offer_id"],
            "additionalProperties": False,
        },
    },
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "numbers": {"type": "object", "additionalProperties": {"type": "number"}},
    "objects": {"type": "array", "items": {"type": "object"}},
    "landers": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "lander_id": {"type": "integer"},
                "name": {"type": "string", "description": "Its name (instead of lander_id)."},
                "weight": {"type": "integer", "default": 100},
            },
            "additionalProperties": False,
        },
    },
}
ERROR = {"$ref": "#/components/schemas/Error"}
ERRORS = {
    400: "Bad request: the description says what to change.",
    401: "No API key, or one nobody holds.",
    403: "The key may not do this (a read-only key writing).",
    404: "No such thing.",
}


def openapi_path(path: str) -> str:
    """A Falcon route template as OpenAPI writes it: `{stream_id:int(min=1)}` -> `{stream_id}`."""
    return PATH_FIELD.sub(lambda m: "{" + m.group(1) + "}", path)


def _body_schema(fields: tuple[Field, ...]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            f.name: {
                **SCHEMAS[f.type],
                **({"items": _body_schema(f.items)} if f.items else {}),
                **({"description": f.about} if f.about else {}),
            }
            for f in fields
        },
        "additionalProperties": False,
    }
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    return schema


def _operation(path: str, method: str, operation: Operation) -> dict[str, Any]:
    parameters = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "integer" if converter == "int" else "string"},
        }
        for name, converter in PATH_FIELD.findall(path)
    ]
    parameters += [
        {"name": p.name, "in": "query", "description": p.about, "schema": SCHEMAS[p.type]}
        for p in operation.params
    ]
    answers: dict[str, Any] = {}
    for code, about in {200: "OK.", **operation.answers}.items():
        answers[str(code)] = {"description": about, "content": {"application/json": {}}}
    if operation.body or operation.body_type in ("csv", "zip"):
        answers["413"] = {
            "description": "The body is over the size cap.",
            "content": {"application/json": {"schema": ERROR}},
        }
    for code, about in ERRORS.items():
        answers[str(code)] = {"description": about, "content": {"application/json": {"schema": ERROR}}}
    document: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": f"{method.lower()}{re.sub(r'[^A-Za-z0-9]+', '_', openapi_path(path))}".rstrip("_"),
        "parameters": parameters,
        "responses": answers,
    }
    if operation.body:
        document["requestBody"] = {
            "required": any(f.required for f in operation.body),
            "content": {"application/json": {"schema": _body_schema(operation.body)}},
        }
    elif operation.body_type == "csv":
        document["requestBody"] = {"required": True, "content": {"text/csv": {"schema": {"type": "string"}}}}
    elif operation.body_type == "zip":
        binary = {"schema": {"type": "string", "contentMediaType": "application/zip"}}
        document["requestBody"] = {"required": True, "content": {"application/zip": binary}}
    return document


def openapi_document(routes: list[tuple[str, object]]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, resource in routes:
        operations = getattr(resource, "operations", {})
        paths[openapi_path(path)] = {
            method.lower(): _operation(path, method, operation) for method, operation in operations.items()
        }
        if not hasattr(resource, "auth"):  # Open to anyone (this document).
            for operation in paths[openapi_path(path)].values():
                operation["security"] = []
    return {
        "openapi": "3.1.0",
        "info": {"title": "Lanner admin API", "version": "1"},
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}, "description": {"type": "string"}},
                    "required": ["title"],
                }
            },
        },
        "security": [{"apiKey": []}, {"bearer": []}],
        "paths": paths,
    }


class OpenApiResource:
    """The document, for anyone: it names routes and fields, no data."""

    operations = {"GET": Operation("This document.")}

    def __init__(self, routes: list[tuple[str, object]]) -> None:
        self.routes = routes  # Itself among them: the document is built at the first request.
        self._text: str | None = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self._text is None:
            self._text = json.dumps(openapi_document(self.routes))
        resp.content_type = falcon.MEDIA_JSON
        resp.text = self._text
