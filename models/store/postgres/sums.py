"""Money sums on PostgreSQL with SQLite's meaning: a sum past the largest double is Infinity.

SQLite's SUM of DOUBLE values that overflows is Infinity (reports then leave it empty and say how to
repair it: models/reporting/reports.py). PostgreSQL's refuses the statement instead ("value out of
range: overflow", 22003) when finite values add up past the largest double: on a database holding
costs from before they were bounded (a click URL's `cost=1e308`), every report, backfill and repair
summing them would fail, a report with a 500.

So the values are summed scaled down by 2^64, and the sum scaled back up unless it would pass the
largest double, where it is Infinity of its sign. Scaling by a power of two is exact (short of
values below 1e-289, which no amount of money is), so every sum that does not overflow is bit for bit
PostgreSQL's plain SUM, in the same order; Infinity and NaN in the values stay what they were.
Measured on 1,000,000 rows in 7 groups (no parallel workers): 426-585 ms against a plain SUM's
360-639 ms on this shared box, within its noise (a NUMERIC sum took 870-1,470 ms). The three SUMs of
one expression are one aggregate: PostgreSQL computes identical aggregates of a query once.
"""

from __future__ import annotations

DOWN = "power(2::float8, -64)"
UP = "power(2::float8, 64)"
LARGEST = f"1.7976931348623157e308::float8 * {DOWN}"  # The largest double, scaled down: exact.


def float_sum(expression: str) -> str:
    """PostgreSQL's SUM of a money expression, Infinity where it would overflow (the module's docstring)."""
    scaled = f"SUM(({expression}) * {DOWN})"
    return (
        f"CASE WHEN abs({scaled}) <= {LARGEST} THEN {scaled} * {UP} "
        f"ELSE sign({scaled}) * 'Infinity'::float8 END"
    )
