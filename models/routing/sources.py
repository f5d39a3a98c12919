"""A traffic source's parameters: parsed from a template, mapped to click fields, turned into macros.

A source's parameters are the campaign URL's query names, each with the ad network's placeholder for
its value (`zoneid={zoneid}&cost={cost}&external_id=${SUBID}`) and the click field it fills: a name
Lanner already reads (cost, external_id, source, keyword) fills itself; any other fills a sub_id
slot, given (`--slot zoneid=3`) or the next free one in template order. This module is pure rules:
the service (models/admin/sources.py) stores them, the config loader (models/routing/config.py)
resolves them once per change into the dicts the click path looks up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from models.choices import SUB_ID_SLOTS
from models.errors import LannerError
from models.routing.macros import MACRO_NAMES

# The query parameters the click path reads as themselves (routes/click.py VisitParser).
BUILTIN_FIELDS = ("cost", "external_id", "source", "keyword")
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_PLACEHOLDER = 100
_SLOT_NAME = re.compile(r"sub(_id_)?[0-9]+")
_PLACEHOLDER_FORBIDDEN = re.compile(r"[\s&#\x00-\x1f\x7f]")
_FILTER_NAME = re.compile(r"(\s*)([A-Za-z][A-Za-z0-9_]*)(\s*(?:!=|!~|=|~))")


class SourceError(LannerError, ValueError):
    """A source parameter template or mapping that cannot be used; one sentence for the user."""


def _check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise SourceError(
            f"Parameter name {name!r} must be 1-32 lowercase letters, digits or '_', starting with a letter."
        )
    if _SLOT_NAME.fullmatch(name):
        raise SourceError(
            f"{name!r} already fills a sub_id slot on every campaign; name the parameter otherwise."
        )
    if name in MACRO_NAMES and name not in BUILTIN_FIELDS:
        raise SourceError(f"{name!r} is one of Lanner's own macros; name the parameter otherwise.")
    return name


def _check_placeholder(name: str, placeholder: str) -> str:
    if not placeholder or len(placeholder) > MAX_PLACEHOLDER or _PLACEHOLDER_FORBIDDEN.search(placeholder):
        raise SourceError(
            f"Parameter {name!r} needs the network's placeholder (e.g. {{{name}}}): up to {MAX_PLACEHOLDER}"
            " characters without spaces, '&' or '#'."
        )
    return placeholder


def parse_slots(expressions: Iterable[str]) -> dict[str, int]:
    """`zoneid=3` expressions as {name: slot}."""
    slots: dict[str, int] = {}
    for expression in expressions:
        name, separator, slot = expression.partition("=")
        slot = slot.strip().removeprefix("sub_id_")
        if not separator or not slot.isascii() or not slot.isdigit() or not 1 <= int(slot) <= SUB_ID_SLOTS:
            raise SourceError(
                f"{expression!r} is not a slot mapping such as zoneid=3 (slots 1 to {SUB_ID_SLOTS})."
            )
        slots[name.strip()] = int(slot)
    return slots


def parse_template(template: str, slots: Mapping[str, int] | None = None) -> list[dict[str, str]]:
    """The parameters of `name=placeholder&...`, each with its field; SourceError if unusable."""
    slots = dict(slots or {})
    pairs: list[tuple[str, str]] = []
    for part in template.strip().lstrip("?").split("&"):
        if not part:
            continue
        name, separator, placeholder = part.partition("=")
        name = _check_name(name.strip())
        if not separator:
            raise SourceError(f"{part!r} is not a parameter of the form name={{placeholder}}.")
        if any(name == seen for seen, _ in pairs):
            raise SourceError(f"Parameter {name!r} appears twice in the template.")
        pairs.append((name, _check_placeholder(name, placeholder.strip())))
    names = [name for name, _ in pairs]
    for name in slots:
        if name not in names:
            raise SourceError(f"The slot mapping names {name!r}, which is not in the template.")
        if name in BUILTIN_FIELDS:
            raise SourceError(f"{name!r} fills the click's own {name}; it takes no sub_id slot.")
    taken = list(slots.values())
    if len(set(taken)) != len(taken):
        raise SourceError("Two parameters are mapped to the same sub_id slot.")
    free = (slot for slot in range(1, SUB_ID_SLOTS + 1) if slot not in taken)
    parameters = []
    for name, placeholder in pairs:
        if name in BUILTIN_FIELDS:
            field = name
        else:
            slot = slots.get(name) or next(free, None)
            if slot is None:
                raise SourceError(f"The template has more parameters than the {SUB_ID_SLOTS} sub_id slots.")
            field = f"sub_id_{slot}"
        parameters.append({"name": name, "placeholder": placeholder, "field": field})
    return parameters


def loads(text: str) -> list[dict[str, str]]:
    """A stored source's parameters (the column's JSON); an unreadable one is none."""
    try:
        parameters = json.loads(text or "[]")
    except ValueError:
        return []
    return [p for p in parameters if isinstance(p, dict) and {"name", "placeholder", "field"} <= set(p)]


def template_text(parameters: Iterable[Mapping[str, str]]) -> str:
    """`zoneid={zoneid}&cost={cost}`: what a campaign URL of this source carries."""
    return "&".join(f"{p['name']}={p['placeholder']}" for p in parameters)


def slot_of(parameters: Iterable[Mapping[str, str]]) -> dict[str, int]:
    """Name -> sub_id slot (1-based) of the parameters that fill one."""
    return {
        p["name"]: int(p["field"].removeprefix("sub_id_"))
        for p in parameters
        if p["field"].startswith("sub_id_")
    }


def macro_renames(parameters: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """Name -> the click macro its value is stored under (`{zoneid}` is `{sub_id_1}`)."""
    return {name: f"sub_id_{slot}" for name, slot in slot_of(parameters).items()}


def campaign_url(alias: str, parameters: Iterable[Mapping[str, str]]) -> str:
    """The campaign URL path as the network takes it: `/alias?zoneid={zoneid}&...`."""
    query = template_text(parameters)
    return f"/{alias}?{query}" if query else f"/{alias}"


def slot_filter(expression: str, slots: Mapping[str, int]) -> str:
    """A stream filter expression on a source's name (`zoneid=123`) as the slot's (`sub_id_3=123`),
    which is how it is stored; any other expression as it is."""
    match = _FILTER_NAME.match(expression)
    if match is None or match.group(2).lower() not in slots:
        return expression
    slot = slots[match.group(2).lower()]
    return f"{match.group(1)}sub_id_{slot}{match.group(3)}{expression[match.end() :]}"
