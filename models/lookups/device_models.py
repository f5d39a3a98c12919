"""The device type device-detector gives a model name, from its brand and model regexes (LGPL data).

`DeviceModels.device_type(ua, start, end)` answers device-detector's type ("tablet", "tv", "smartphone",
...) for the model name at ua[start:end] ("SM-T220", "Lenovo TB-X606F", "43LU8010T"), or None if none of
its brands matches there. The data, data/device_models.json.gz (LGPL-3.0-or-later, its licence beside
it), is made by scripts/device_detector_models.py from a device-detector checkout; it keeps the brands'
regexes and only the models whose type differs from their brand's (the others cannot change a type).

As in device-detector, the first brand that matches wins, then the first of its models that matches,
else the brand's own type. Unlike it, they are matched only where the model name or one of its words
begins, not anywhere in the header: that is what makes an index possible.

PERF: each entry is filed under the two-character prefixes its matches can start with (computed by the
script), and the entries of one prefix form one Python regex, their alternatives in device-detector's
order, each ending in an empty named group so `lastgroup` says which matched (a brand's long model list
goes to a re2.Set instead, see LARGE). They are compiled on first use: ~0.6 ms on average, ~1.4 s in
all if every prefix is ever needed, once per process. A lookup is 2-4 matches, ~7 µs median and ~25 µs
p99 over device-detector's fixtures. One re2.Set of every brand instead took ~19 MB and grew its DFA
with traffic; these take ~12 MB if every prefix is ever compiled, and most traffic needs a small part
of them.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import re2

__all__ = ["DATA_PATH", "KEY_LENGTH", "DeviceModels"]

DATA_PATH = Path(__file__).parent / "data" / "device_models.json.gz"
KEY_LENGTH = 2  # scripts/device_detector_models.py files entries by prefixes of this length
# How far past a model name's start a match may look (" Build/..."): bounds the cost of the few ".+" regexes
# on a hostile header.
MATCH_WINDOW = 160
MAX_WORDS = 3  # Words of a model name tried: "HUAWEI MediaPad T1" is found by its second.
_WORD_BREAKS = frozenset(" _")
# A brand's models under one prefix, when more than this ("sm": ~230 Samsung tablet models, tried for every
# Samsung phone), go into a re2.Set: Python's re tries alternatives one by one (~15 µs there), re2 in one
# pass (~1 µs). Each Set costs ~0.3 MB; brands' own long lists (Huawei's ~500 under "hw") would cost
# several MB each for model names seldom seen, and stay in Python.
LARGE = 40


# A Set's program and DFA cache share this; when the cache is full re2 empties it and goes on (a Set never
# gives up for slowness), so it bounds memory, not answers. re2's default (8 MB) let ~25 Sets grow ~12 MB.
SET_MAX_MEM = 1 << 20


def _set_options(max_mem: int) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False  # device-detector matches case-insensitively.
    options.never_capture = True
    options.log_errors = False  # Patterns re2 refuses (look-arounds) are expected: Python's re takes them.
    options.max_mem = max_mem
    return options


def _compiled_set(indexes: list[int], patterns: list[str]) -> tuple[Any, list[int], list[int]]:
    """A re2.Set of the entries re2 accepts, their indexes, and the indexes of those it refuses."""
    for max_mem in (SET_MAX_MEM, 8 * SET_MAX_MEM):  # The larger budget only if the program does not fit.
        matcher = re2.Set.MatchSet(_set_options(max_mem))
        accepted, refused = [], []
        for index in indexes:
            try:
                matcher.Add(patterns[index])
            except re2.error:
                refused.append(index)
            else:
                accepted.append(index)
        try:
            if accepted:
                matcher.Compile()
        except re2.error:
            continue
        return (matcher if accepted else None), accepted, refused
    return None, [], indexes


class _Entries:
    """Some entries, in order; `first` is the lowest-numbered one that matches at a position."""

    def __init__(self, indexes: list[int], patterns: list[str], use_set: bool) -> None:
        self._set: Any = None
        self._set_indexes: list[int] = []
        rest = indexes
        if use_set and len(indexes) > LARGE:
            self._set, self._set_indexes, rest = _compiled_set(indexes, patterns)
        self._regex = (
            re.compile("|".join(f"(?:{patterns[index]})(?P<e{index}>)" for index in rest), re.IGNORECASE)
            if rest
            else None
        )

    def first(self, ua: str, position: int, stop: int) -> int | None:
        found = None
        if self._regex is not None:
            match = self._regex.match(ua, position, stop)
            if match is not None and match.lastgroup is not None:  # Every alternative is a named group.
                found = int(match.lastgroup[1:])
        if self._set is not None:
            hits = self._set.Match(ua[position:stop])
            if hits:
                index = self._set_indexes[min(hits)]
                found = index if found is None or index < found else found
        return found


class DeviceModels:
    """device-detector's brand and model regexes, indexed by prefix; build one per process (~20 ms)."""

    def __init__(self, path: Path = DATA_PATH) -> None:
        with gzip.open(path, "rt", encoding="utf-8") as file:
            data = json.load(file)
        self.commit: str = data["commit"]
        self._brand_types: list[str | None] = [brand_type for _name, brand_type in data["brands"]]
        entries = data["entries"]  # [brand index, is a model (0/1), device type, regex], in order
        self._types: list[str | None] = [entry[2] for entry in entries]
        self._brands: list[int] = [entry[0] for entry in entries]
        self._patterns: list[str] = [entry[3] for entry in entries]
        self._brand_keys: dict[str, list[int]] = {}
        self._model_keys: dict[tuple[int, str], list[int]] = {}
        for key, indexes in data["keys"].items():
            for index in indexes:
                if entries[index][1]:
                    self._model_keys.setdefault((entries[index][0], key), []).append(index)
                else:
                    self._brand_keys.setdefault(key, []).append(index)
        anywhere = data["any"]
        self._anywhere_brands = self._union([index for index in anywhere if not entries[index][1]])
        self._anywhere_models: dict[int, list[int]] = {}
        for index in anywhere:
            if entries[index][1]:
                self._anywhere_models.setdefault(entries[index][0], []).append(index)
        self._compiled: dict[object, _Entries] = {}

    def _union(self, indexes: list[int], use_set: bool = False) -> _Entries:
        return _Entries(indexes, self._patterns, use_set)

    def _brand_regex(self, key: str) -> _Entries:
        regex = self._compiled.get(key)
        if regex is None:
            regex = self._compiled[key] = self._union(self._brand_keys.get(key, []))
        return regex

    def _model_regex(self, brand: int, key: str) -> _Entries:
        regex = self._compiled.get((brand, key))
        if regex is None:
            indexes = sorted((*self._model_keys.get((brand, key), ()), *self._anywhere_models.get(brand, ())))
            regex = self._compiled[(brand, key)] = self._union(indexes, use_set=True)
        return regex

    def device_type(self, ua: str, start: int, end: int) -> str | None:
        """device-detector's device type for the model name at ua[start:end], or None."""
        starts = [start]
        for index in range(start, end):
            if ua[index] in _WORD_BREAKS and len(starts) < MAX_WORDS:
                starts.append(index + 1)
        stop = min(len(ua), start + MATCH_WINDOW)
        brand = None
        for position in starts:
            hit = self._brand_regex(ua[position : position + KEY_LENGTH].lower()).first(ua, position, stop)
            if position == start:
                anywhere = self._anywhere_brands.first(ua, position, stop)
                if anywhere is not None and (hit is None or anywhere < hit):
                    hit = anywhere
            if hit is not None:
                brand = self._brands[hit]
                break
        if brand is None:
            return None
        model = None
        for position in starts:
            key = ua[position : position + KEY_LENGTH].lower()
            hit = self._model_regex(brand, key).first(ua, position, stop)
            if hit is not None and (model is None or hit < model):
                model = hit
        return self._brand_types[brand] if model is None else self._types[model]
