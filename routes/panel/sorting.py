"""A list page's sort: `?sort=KEY[,KEY]`, two keys at most, each a column's name, `-` before it for
descending (`sort=-clicks,name`: most clicks first, equal ones by name). A row without a value for a
key (no ROI without cost) goes last whichever the direction, as the reports' sort puts it.

Clicking a column's header makes it the first key and the first key so far the second (the header of
the first key turns it round), so two clicks sort by two columns, as in Binom's and Keitaro's lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import falcon

MAX_KEYS = 2


@dataclass(frozen=True)
class SortKey:
    column: str
    is_descending: bool

    @property
    def text(self) -> str:
        return ("-" if self.is_descending else "") + self.column


@dataclass(frozen=True)
class Sort:
    keys: tuple[SortKey, ...]

    @classmethod
    def parse(cls, text: str | None, columns: Iterable[str]) -> Sort:
        """The sort `text` asks for among `columns` (none: the list's own order); 400 naming the columns
        for a bad one."""
        allowed = tuple(columns)
        parts = [part.strip() for part in (text or "").split(",") if part.strip()]
        keys: list[SortKey] = []
        for part in parts:
            column = part.removeprefix("-")
            if column not in allowed or any(key.column == column for key in keys):
                named = ", ".join(allowed)
                raise falcon.HTTPBadRequest(
                    title="Bad sort",
                    description=f"Sort by up to {MAX_KEYS} of {named} (a - before one: descending).",
                )
            keys.append(SortKey(column, part.startswith("-")))
        if len(keys) > MAX_KEYS:
            raise falcon.HTTPBadRequest(
                title="Bad sort", description=f"Sort by one or {MAX_KEYS} columns, comma-separated."
            )
        return cls(tuple(keys))

    @property
    def text(self) -> str:
        return ",".join(key.text for key in self.keys)

    def clicked(self, column: str, *, is_descending_first: bool) -> str:
        """The sort a click on `column`'s header asks for."""
        if not self.keys:
            return SortKey(column, is_descending_first).text
        first = self.keys[0]
        if first.column == column:
            return ",".join([SortKey(column, not first.is_descending).text, *(k.text for k in self.keys[1:])])
        return f"{SortKey(column, is_descending_first).text},{first.text}"

    def direction(self, column: str) -> str:
        """`ascending` / `descending` for the first key's column (aria-sort), `` for any other."""
        if not self.keys or self.keys[0].column != column:
            return ""
        return "descending" if self.keys[0].is_descending else "ascending"

    def rank(self, column: str) -> int:
        """1 or 2 for a key's column (shown by its header), 0 for any other."""
        for index, key in enumerate(self.keys):
            if key.column == column:
                return index + 1
        return 0

    def apply(self, rows: list[Any], value_of: Callable[[Any, str], Any]) -> list[Any]:
        """`rows` in this order (stable: rows equal on every key keep their order)."""
        ordered = list(rows)
        for key in reversed(self.keys):
            present = [row for row in ordered if value_of(row, key.column) is not None]
            missing = [row for row in ordered if value_of(row, key.column) is None]
            present.sort(key=lambda row: value_of(row, key.column), reverse=key.is_descending)
            ordered = present + missing
        return ordered
