"""SQLite's parameter spelling (`?`, `?N`) as psycopg's (`%s`), so a store's statement is written once.

A statement is translated once (cached): each `?` outside a quoted literal or identifier becomes `%s`;
`?N` (SQLite's numbered parameter, which may repeat) becomes `%s` too, with the order in which to take
the caller's values; and a literal `%` is doubled, since psycopg reads `%` as the start of a placeholder
whenever values are passed.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=2048)
def qmark_to_pyformat(sql: str, with_params: bool) -> tuple[str, tuple[int, ...] | None]:
    """(psycopg's statement, the value order for `?N` parameters or None to pass the values as given)."""
    if not with_params:
        return sql, None
    out: list[str] = []
    order: list[int] = []
    quote = ""
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        if quote:
            out.append("%%" if char == "%" else char)
            if char == quote:
                quote = ""
            i += 1
        elif char in "'\"":
            quote = char
            out.append(char)
            i += 1
        elif char == "%":
            out.append("%%")
            i += 1
        elif char == "?":
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            # A bare `?` is numbered one past the largest number so far, as in SQLite.
            order.append(int(sql[i + 1 : j]) - 1 if j > i + 1 else max(order, default=-1) + 1)
            out.append("%s")
            i = j
        else:
            out.append(char)
            i += 1
    in_place = order == list(range(len(order)))
    return "".join(out), None if in_place else tuple(order)
