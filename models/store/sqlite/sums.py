"""Money sums on SQLite: a plain SUM, which is Infinity past the largest double (reports show it as
"not a finite number"); models/store/postgres/sums.py gives PostgreSQL's SUM the same meaning."""

from __future__ import annotations


def float_sum(expression: str) -> str:
    """The sum of a money expression (DOUBLE)."""
    return f"SUM({expression})"
