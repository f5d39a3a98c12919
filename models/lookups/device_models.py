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
order, each ending in an empty named group so `lastgroup` says which matched; a regex is compiled on
first use (~1-3 ms, once per prefix per process). A lookup is ~2-4 regex matches, ~5 µs. One re2.Set of
every brand instead took ~19 MB and grew its DFA with traffic; these regexes take ~12 MB if every prefix
is ever compiled, and most traffic uses a small part of them.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

__all__ = ["DATA_PATH", "KEY_LENGTH", "DeviceModels"]

DATA_PATH = Path(__file__).parent / "data" / "device_models.json.gz"
KEY_LENGTH = 2  # scripts/device_detector_models.py files entries by prefixes of this length
# How far past a model name's start a match may look (" Build/..."): bounds the cost of the few ".+" regexes
# on a hostile header.
MATCH_WINDOW = 160
MAX_WORDS = 3  # Words of a model name tried: "HUAWEI MediaPad T1" is found by its second.
_WORD_BREAKS = frozenset(" _")
_NONE = re.compile(r"(?!)")  # Matches nothing: a prefix with no entries.


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
        self._compiled: dict[object, re.Pattern[str]] = {}

    def _union(self, indexes: list[int]) -> re.Pattern[str]:
        if not indexes:
            return _NONE
        patterns = self._patterns
        return re.compile(
            "|".join(f"(?:{patterns[index]})(?P<e{index}>)" for index in indexes), re.IGNORECASE
        )

    def _brand_regex(self, key: str) -> re.Pattern[str]:
        regex = self._compiled.get(key)
        if regex is None:
            regex = self._compiled[key] = self._union(self._brand_keys.get(key, []))
        return regex

    def _model_regex(self, brand: int, key: str) -> re.Pattern[str]:
        regex = self._compiled.get((brand, key))
        if regex is None:
            indexes = sorted((*self._model_keys.get((brand, key), ()), *self._anywhere_models.get(brand, ())))
            regex = self._compiled[(brand, key)] = self._union(indexes)
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
            match = self._brand_regex(ua[position : position + KEY_LENGTH].lower()).match(ua, position, stop)
            anywhere = self._anywhere_brands.match(ua, position, stop) if position == start else None
            hits = [int(found.lastgroup[1:]) for found in (match, anywhere) if found is not None]
            if hits:
                brand = self._brands[min(hits)]
                break
        if brand is None:
            return None
        model = None
        for position in starts:
            key = ua[position : position + KEY_LENGTH].lower()
            match = self._model_regex(brand, key).match(ua, position, stop)
            if match is not None:
                index = int(match.lastgroup[1:])
                model = index if model is None else min(model, index)
        return self._brand_types[brand] if model is None else self._types[model]
