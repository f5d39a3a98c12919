"""The references in docs/reference/, generated from the code: the CLI (the `lanner` click group), the
settings (settings.SETTINGS), the admin API (its OpenAPI document) and the metrics (models/ops/metrics.py
CATALOGUE). `make docs` writes them:

    .venv/bin/python scripts/reference.py

tests/test_docs.py fails when a committed file differs from a fresh generation. A script, not a module
of workers/: it reads the CLI and the routes from above, and nothing imports it.

Everything here is deterministic and independent of the machine: click's help is formatted for a fixed
width, settings show their declared defaults (never the values this process was started with), and the
OpenAPI document is built from the route declarations without a database.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DIR = Path("docs") / "reference"
WIDTH = 100  # Columns of click's help formatting, whatever the terminal that runs `make docs`.
GENERATED = "Generated from the code by `make docs` ({source}); do not edit by hand."
METHODS = ("get", "post", "put", "patch", "delete")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lowercase, spaces to dashes, punctuation dropped."""
    text = heading.strip().lower()
    return "".join(c for c in text.replace(" ", "-") if c.isalnum() or c in "-_")


# -- CLI ------------------------------------------------------------------------------------------


def walk_commands(
    command: click.Command, ctx: click.Context
) -> Iterator[tuple[str, click.Command, click.Context]]:
    """(path, command, its context) for the group and every command under it, depth first, by name.
    `list_commands`, not `.commands`: `lanner bench` adds its scenarios lazily."""
    yield ctx.command_path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from walk_commands(sub, click.Context(sub, info_name=name, parent=ctx))


def command_paths() -> list[str]:
    """Every command's full name, `lanner campaign create` and so on (groups included)."""
    return [path for path, _, _ in walk_commands(*_root())]


def _root() -> tuple[click.Command, click.Context]:
    from cli import main

    ctx = click.Context(
        main, info_name="lanner", terminal_width=WIDTH, max_content_width=WIDTH, show_default=True
    )
    return main, ctx


def cli_reference() -> str:
    commands = list(walk_commands(*_root()))
    lines = [
        "# CLI reference",
        "",
        GENERATED.format(source="scripts/reference.py, from the `lanner` click group"),
        "Each command's `--help`, with every option's default shown. The [guides](../README.md) say what",
        "the commands are for.",
        "",
    ]
    for path, command, _ in commands:
        depth = len(path.split()) - 1
        summary = command.get_short_help_str(limit=WIDTH)
        about = f" — {_text(summary)}" if summary else ""
        lines.append(f"{'  ' * max(depth - 1, 0)}- [`{path}`](#{slug(path)}){about}")
    for path, command, ctx in commands:
        lines += ["", f"## {path}", "", "```text", command.get_help(ctx).rstrip(), "```"]
    return "\n".join(lines) + "\n"


# -- Settings -------------------------------------------------------------------------------------


def settings_reference() -> str:
    from settings import SETTINGS

    lines = [
        "# Settings reference",
        "",
        GENERATED.format(source="scripts/reference.py, from `settings.SETTINGS`"),
        "",
        "Every setting is an environment variable, read once when a process starts (settings.py, the",
        "only reader of the environment). `lanner settings` prints the values in effect; this page shows",
        "only the declared defaults. A secret is never printed and may instead be read from the file that",
        "`LANNER_<NAME>_FILE` names. On an install, the variables live in `/etc/lanner/lanner.env`",
        "([operations](../operations.md)).",
        "",
        "| Variable | Default |",
        "|---|---|",
    ]
    for setting in SETTINGS:
        default = _short_default(setting.default)
        lines.append(f"| [`{setting.env}`](#{slug(setting.env)}) | {default} |")
    for setting in SETTINGS:
        lines += ["", f"## {setting.env}", "", _text(setting.help), ""]
        if "," in setting.default and len(setting.default) > 60:
            lines.append("Default:")
            lines.append("")
            lines += [f"- `{part}`" for part in setting.default.split(",")]
        else:
            lines.append(f"Default: {_code(setting.default) if setting.default else '(empty)'}")
        if setting.is_secret:
            lines += ["", f"Secret: never printed; `{setting.env}_FILE` may name a file holding it."]
    return "\n".join(lines) + "\n"


def _short_default(default: str) -> str:
    if not default:
        return "(empty)"
    if len(default) > 60:
        return "(a list: see below)"
    return _code(default).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# -- Admin API ------------------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    """The document `GET /api/v1/openapi.json` serves, built from the route declarations alone (the
    resources are made without a database; none is touched)."""
    from routes.v1 import v1_routes
    from routes.v1.openapi import openapi_document as build
    from settings import load_settings

    settings = load_settings({"LANNER_DATA_DIR": "/nonexistent/lanner"})
    return build(v1_routes(None, settings))  # type: ignore[arg-type]


def openapi_json() -> str:
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def api_reference() -> str:
    document = openapi_document()
    paths = document["paths"]
    lines = [
        "# Admin API reference",
        "",
        GENERATED.format(source="scripts/reference.py, from the OpenAPI document of routes/v1/"),
        "The same document as the API serves at `GET /api/v1/openapi.json`: [openapi.json](openapi.json).",
        "Keys, roles, pages and errors: the [admin API guide](../api.md).",
        "",
        "Every operation takes the key as `X-Api-Key: KEY` or `Authorization: Bearer KEY` unless it says",
        'otherwise, and answers errors as `{"title": …, "description": …}`.',
        "",
    ]
    operations = [(path, method) for path in sorted(paths) for method in METHODS if method in paths[path]]
    for path, method in operations:
        heading = f"{method.upper()} {path}"
        lines.append(f"- [`{heading}`](#{slug(heading)}) — {_text(paths[path][method]['summary'])}")
    for path, method in operations:
        lines += [""] + _operation(path, method, paths[path][method])
    return "\n".join(lines) + "\n"


def _operation(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"## {method.upper()} {path}", "", _text(operation["summary"])]
    if operation.get("security") == []:
        lines += ["", "No key needed."]
    if operation["parameters"]:
        lines += ["", "| Parameter | In | Type | Description |", "|---|---|---|---|"]
        for parameter in operation["parameters"]:
            required = " (required)" if parameter.get("required") else ""
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']}{required} | {_type(parameter['schema'])} | "
                f"{_cell(parameter.get('description', ''))} |"
            )
    body = operation.get("requestBody")
    if body:
        for media, content in body["content"].items():
            schema = content.get("schema", {})
            required = "required" if body.get("required") else "optional"
            if schema.get("type") == "object" and "properties" in schema:
                lines += ["", f"Request body ({required}), `{media}`:", ""]
                lines += ["| Field | Type | Required | Description |", "|---|---|---|---|"]
                lines += _fields(schema)
            else:
                lines += ["", f"Request body ({required}): `{media}`."]
    lines += ["", "| Answer | Meaning |", "|---|---|"]
    for code in sorted(operation["responses"]):
        lines.append(f"| {code} | {_cell(operation['responses'][code]['description'])} |")
    return lines


def _fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    required = set(schema.get("required", ()))
    for name, field in schema["properties"].items():
        about = field.get("description", "")
        if "default" in field:
            about = f"{about} Default: `{field['default']}`.".strip()
        rows.append(
            f"| `{prefix}{name}` | {_type(field)} | {'yes' if name in required else ''} | {_cell(about)} |"
        )
        items = field.get("items", {})
        if items.get("type") == "object" and "properties" in items:
            rows += _fields(items, f"{prefix}{name}[].")
    return rows


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items", {})
        return f"array of {'objects' if items.get('type') == 'object' else _type(items)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    return kind


def _text(text: str) -> str:
    """Prose from the declarations, safe in Markdown: `<` would open an HTML tag."""
    return text.replace("<", "&lt;")


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|").replace("\n", " ")


# -- Metrics --------------------------------------------------------------------------------------


def metrics_reference() -> str:
    from models.ops.metrics import CATALOGUE, LATENCY_BOUNDS

    lines = [
        "# Metrics reference",
        "",
        GENERATED.format(source="scripts/reference.py, from `models/ops/metrics.py` CATALOGUE"),
        "",
        "`GET /metrics` on each node's admin side answers these in Prometheus' text format (version",
        "0.0.4); [operations](../operations.md#metrics) says where and how to scrape it. Counters are the",
        "node's web workers' counts added up: they only grow, across worker and server restarts. Gauges",
        "are looked at when asked; one whose source does not answer is left out, never shown as 0.",
        "",
        "| Metric | Type | Label |",
        "|---|---|---|",
    ]
    for metric in CATALOGUE:
        label = f"`{metric.label}`" if metric.label else ""
        lines.append(f"| [`{metric.name}`](#{slug(metric.name)}) | {metric.kind} | {label} |")
    for metric in CATALOGUE:
        lines += ["", f"## {metric.name}", "", f"Type: {metric.kind}.", "", _text(metric.help)]
        if metric.values:
            values = ", ".join(f"`{value}`" for value in metric.values)
            lines += ["", f"Label `{metric.label}`: {values}."]
        elif metric.label:
            lines += ["", f"Label `{metric.label}`."]
        if metric.kind == "histogram":
            bounds = ", ".join(f"{bound:g}" for bound in LATENCY_BOUNDS)
            lines += [
                "",
                f"Samples: `{metric.name}_bucket{{le=...}}` (seconds: {bounds}, `+Inf`), "
                f"`{metric.name}_sum`, `{metric.name}_count`.",
            ]
    return "\n".join(lines) + "\n"


# -- All of them ----------------------------------------------------------------------------------


def references() -> dict[str, str]:
    """Each reference file's path (relative to the repository root) and its text."""
    return {
        str(REFERENCE_DIR / "cli.md"): cli_reference(),
        str(REFERENCE_DIR / "settings.md"): settings_reference(),
        str(REFERENCE_DIR / "api.md"): api_reference(),
        str(REFERENCE_DIR / "metrics.md"): metrics_reference(),
        str(REFERENCE_DIR / "openapi.json"): openapi_json(),
    }


def write_references(root: Path) -> list[str]:
    """Write every reference under root; the paths whose text changed."""
    changed = []
    for name, text in references().items():
        path = root / name
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(name)
    return changed


def main() -> None:
    changed = write_references(ROOT)
    for name in changed:
        print(f"wrote {name}")
    if not changed:
        print("docs/reference/ is current")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
