"""Rebuild models/lookups/data/device_models.json.gz from a matomo/device-detector checkout.

device-detector (LGPL-3.0-or-later) names a device by its brand regex (the first brand of
regexes/device/*.yml that matches) and then the first of that brand's model regexes that matches; a model
may override the brand's device type. Lanner needs only the type, so the file keeps, for consoles,
portable media players and mobiles (phones, tablets, TVs...), in device-detector's order:

- each brand's regex, split into its top-level alternatives, with the brand's device type;
- the models whose type differs from their brand's (the others cannot change the answer);
- `keys`: for each entry, the two-character lower-case prefixes a match of it can start with, so that
  models/lookups/device_models.py tries only the entries a model name can match. Entries whose start is
  not a short list of literals (`.+FIRETVSTICK`) are listed under `any`.

Regexes Python's `re` cannot compile (variable-width look-behinds) lose their look-arounds, which only
makes them match a little more. Needs PyYAML (not a Lanner dependency).

    python scripts/device_detector_models.py \\
        /path/to/device-detector [models/lookups/data/device_models.json.gz]
"""

from __future__ import annotations

import gzip
import json
import re
import re._constants as sre  # noqa: PLC2701 - the parser's own node names, used only here, offline.
import re._parser as sre_parse  # noqa: PLC2701
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from models.lookups.device_models import KEY_LENGTH  # noqa: E402

FILES = ("consoles", "portable_media_player", "mobiles")  # device-detector's order (DeviceDetector.php)
DEFAULT_OUT = ROOT / "models/lookups/data/device_models.json.gz"
MAX_KEYS = 64  # More possible prefixes than this: the entry goes under `any`.


class _Unbounded(Exception):
    """The pattern can start with too many different characters to list."""


def _class_chars(items: list) -> set[str]:
    chars: set[str] = set()
    for op, arg in items:
        if op is sre.LITERAL:
            chars.add(chr(arg).lower())
        elif op is sre.RANGE and arg[1] - arg[0] <= 40:
            chars.update(chr(code).lower() for code in range(arg[0], arg[1] + 1))
        elif op is sre.CATEGORY and arg is sre.CATEGORY_DIGIT:
            chars.update("0123456789")
        else:
            raise _Unbounded
    return chars


def _extend(nodes: list, prefixes: set[str]) -> set[str]:
    """`prefixes` extended by what the parsed `nodes` can match next, up to KEY_LENGTH characters."""
    for op, arg in nodes:
        todo = {prefix for prefix in prefixes if len(prefix) < KEY_LENGTH}
        if not todo:
            return prefixes
        if op is sre.LITERAL:
            new = {prefix + chr(arg).lower() for prefix in todo}
        elif op is sre.IN:
            chars = _class_chars(arg)
            new = {prefix + char for prefix in todo for char in chars}
        elif op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            new = todo  # Zero-width.
        elif op is sre.SUBPATTERN:
            new = _extend(list(arg[3]), todo)
        elif op is sre.ATOMIC_GROUP:
            new = _extend(list(arg), todo)
        elif op is sre.BRANCH:
            new = set()
            for alternative in arg[1]:
                new |= _extend(list(alternative), todo)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, sub = arg
            new = set(todo) if low == 0 else set()
            current = set(todo)
            for count in range(1, KEY_LENGTH + 1):
                if high is not sre.MAXREPEAT and count > high:
                    break
                current = _extend(list(sub), current)
                if count >= low or all(len(prefix) >= KEY_LENGTH for prefix in current):
                    new |= current
        else:
            raise _Unbounded
        prefixes = (prefixes - todo) | new
        if len(prefixes) > MAX_KEYS:
            raise _Unbounded
    return prefixes


def prefix_keys(pattern: str) -> set[str] | None:
    """The KEY_LENGTH-character lower-case prefixes a match of `pattern` can start with; None if unbounded."""
    try:
        prefixes = _extend(list(sre_parse.parse(pattern, re.IGNORECASE)), {""})
    except (_Unbounded, re.error):
        return None
    return None if any(len(prefix) < KEY_LENGTH for prefix in prefixes) else prefixes


def _structure(pattern: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, char, depth after it) of each "(", ")" and "|" from `start`, outside escapes and classes."""
    depth, index, in_class = 0, start, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith("]", index + 1) or pattern.startswith("^]", index + 1):
                index += 2 if pattern[index + 1] == "]" else 3
                continue
        elif char in "()|":
            depth += (char == "(") - (char == ")")
            yield index, char, depth
        index += 1


def alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of `pattern` (its `|` outside groups and character classes)."""
    out, start = [], 0
    for index, char, depth in _structure(pattern):
        if char == "|" and depth == 0:
            out.append(pattern[start:index])
            start = index + 1
    out.append(pattern[start:])
    return [alternative for alternative in out if alternative.strip()]


def _group_end(pattern: str, start: int) -> int:
    """The index of the ")" closing the group opened at `start`, or -1."""
    for index, char, depth in _structure(pattern, start):
        if char == ")" and depth == 0:
            return index
    return -1


def distributed(pattern: str) -> list[str]:
    """`pattern` as several, one per alternative of its first non-repeated top-level group with any.

    "(?:HW-)?(?:AGS-W09|BAH-L09|...)(?:[);/ ]|$)" becomes "(?:HW-)?(?:AGS-W09)(?:[);/ ]|$)", ... : each
    starts with a short list of literals and so gets prefix keys; matching any of them is matching it.
    """
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            end = index + 1
            end += 1 if pattern.startswith("^", end) else 0
            end += 1 if pattern.startswith("]", end) else 0
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            index = end + 1
            continue
        if char == "(":
            end = _group_end(pattern, index)
            if end < 0:
                return [pattern]
            repeated = pattern[end + 1 : end + 2] in ("?", "*", "+", "{")
            head = pattern[index : index + 3]
            opening = 3 if head in ("(?:", "(?>") else 1 if not head.startswith("(?") else 0
            inner = alternatives(pattern[index + opening : end]) if opening else []
            if not repeated and len(inner) > 1:
                before, after = pattern[:index], pattern[end + 1 :]
                return [f"{before}(?:{alternative}){after}" for alternative in inner]
            index = end + 1
            continue
        index += 1
    return [pattern]


def without_lookarounds(pattern: str) -> str:
    """`pattern` without its (?=...), (?!...), (?<=...), (?<!...) groups: it matches wherever `pattern`
    does."""
    out, index, in_class = [], 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), index):
            depth = 0
            while index < len(pattern):
                if pattern[index] == "\\":
                    index += 1
                elif pattern[index] == "(":
                    depth += 1
                elif pattern[index] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                index += 1
            index += 1
            continue
        out.append(char)
        index += 1
    return "".join(out)


def python_pattern(pattern: str) -> str | None:
    """`pattern` if Python's re compiles it, else without its look-arounds, else None."""
    for candidate in (pattern, without_lookarounds(pattern)):
        if candidate:
            try:
                re.compile(candidate, re.IGNORECASE)
            except re.error:
                continue
            return candidate
    return None


def build(checkout: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    brands: list[list] = []
    entries: list[list] = []  # [brand index, is a model (0/1), device type, regex]
    dropped = 0
    for name in FILES:
        spec = yaml.load((checkout / "regexes" / "device" / f"{name}.yml").read_text("utf-8"), Loader=loader)
        for brand, brand_spec in spec.items():
            brand_type = brand_spec.get("device")
            brand_index = len(brands)
            brands.append([str(brand), brand_type])
            for model in brand_spec.get("models") or []:
                model_type = model.get("device")
                if model_type and model_type != brand_type and str(model.get("regex") or "").strip():
                    pattern = python_pattern(str(model["regex"]))
                    if pattern is None:
                        dropped += 1
                        continue
                    entries.append([brand_index, 1, model_type, pattern])
            for alternative in alternatives(str(brand_spec["regex"])):
                pattern = python_pattern(alternative)
                if pattern is None:
                    dropped += 1
                    continue
                entries.append([brand_index, 0, brand_type, pattern])
    # Entries in device-detector's order: by brand, and within a brand the models (tried after the brand
    # matched) before the brand's own alternatives; lookups rely on it.
    entries.sort(key=lambda entry: (entry[0], -entry[1]))
    keys: dict[str, list[int]] = {}
    anywhere: list[int] = []
    split: list[list] = []
    for entry in entries:
        patterns = [entry[3]]
        for _round in range(3):  # "A?(B|C)(D|E)..." may need a few rounds.
            if all(prefix_keys(pattern) is not None for pattern in patterns):
                break
            patterns = [
                part
                for pattern in patterns
                for part in ([pattern] if prefix_keys(pattern) is not None else distributed(pattern))
            ]
        split += [[*entry[:3], pattern] for pattern in patterns]
    entries = split
    for index, (_brand, _is_model, _type, pattern) in enumerate(entries):
        found = prefix_keys(pattern)
        if found is None:
            anywhere.append(index)
        else:
            for key in sorted(found):
                keys.setdefault(key, []).append(index)
    print(
        f"{len(brands)} brands, {len(entries)} entries ({len(anywhere)} under any), "
        f"{len(keys)} keys, {dropped} dropped"
    )
    for index in anywhere:
        print(f"  under any: {brands[entries[index][0]][0]}: {entries[index][3][:100]}")
    return {"brands": brands, "entries": entries, "keys": keys, "any": anywhere}


def main(checkout: Path, out: Path) -> None:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    data = {
        "source": (
            "https://github.com/matomo-org/device-detector"
            " regexes/device/{consoles,portable_media_player,mobiles}.yml"
        ),
        "commit": commit,
        "license": "LGPL-3.0-or-later",
        **build(checkout),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(out, "wb", mtime=0) as raw:
        raw.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    print(f"{out} ({out.stat().st_size} bytes) from {commit or 'an unknown commit'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_OUT)
