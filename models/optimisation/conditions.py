"""A rule's conditions: `cost >= 5`, `conversions = 0`, `roi < -50` over a report row's metrics.

Percentages (cr, roi, lp_ctr) are in percent, as reports show them. A condition on a ratio with no
value (the ROI of a zone that cost nothing, the CPA of one with no conversion) does not hold. A set of
conditions that no row could meet (`conversions = 0` and `cr > 1`, `roi < -150`, `clicks > 5` and
`clicks < 6`) is refused when the rule is made, naming why.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any

from models.errors import LannerError

COUNT_METRICS = ("clicks", "unique_clicks", "bots", "conversions", "leads", "sales", "lp_views", "lp_clicks")
AMOUNT_METRICS = ("revenue", "cost", "profit", "epc", "cpc", "cpa")
PERCENT_METRICS = ("cr", "roi", "lp_ctr")
METRICS = (*COUNT_METRICS, *AMOUNT_METRICS, *PERCENT_METRICS)
OPERATORS = (">=", "<=", "!=", "=", ">", "<")
# A ratio has a value only where its denominator is above 0.
DENOMINATORS = {
    "cr": "clicks",
    "epc": "clicks",
    "cpc": "clicks",
    "cpa": "conversions",
    "roi": "cost",
    "lp_ctr": "lp_views",
}
_PATTERN = re.compile(r"\s*([a-z_]+)\s*(>=|<=|!=|==|=|>|<)\s*([-+]?[0-9]+(?:\.[0-9]+)?)\s*%?\s*")
MAX_CONDITIONS = 10
COMPARE = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
    "!=": operator.ne,
}


class ConditionError(LannerError, ValueError):
    """A condition that cannot be read, or conditions no row could meet; one sentence for the user."""


@dataclass(frozen=True)
class Condition:
    metric: str
    operator: str
    value: float

    def holds(self, row: dict[str, Any]) -> bool:
        # PERF: 100 rules over 50,000 zones ask this millions of times a run. A report's non-finite
        # amounts are None already (models/reporting/reports.py).
        number = row.get(self.metric)
        return number is not None and COMPARE[self.operator](number, self.value)

    @property
    def text(self) -> str:
        return f"{self.metric} {self.operator} {self.value:g}"

    def as_json(self) -> list:
        return [self.metric, self.operator, self.value]


def parse_condition(text: str) -> Condition:
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise ConditionError(
            f"{text[:60]!r} is not a condition of the form METRIC OPERATOR NUMBER (cost >= 5, roi < -50)."
        )
    metric, operator, number = match.groups()
    if metric not in METRICS:
        raise ConditionError(f"A condition's metric is one of {', '.join(METRICS)}, not {metric!r}.")
    value = float(number)
    if abs(value) > 1e12:
        raise ConditionError(f"{text[:60]!r}: the number is out of any report's range.")
    return Condition(metric, "=" if operator == "==" else operator, value)


def conditions_from_json(items: list) -> list[Condition]:
    return [Condition(metric, operator, float(value)) for metric, operator, value in items]


def parse_conditions(texts: list[str]) -> list[Condition]:
    """The conditions, all of which must hold; ConditionError for one unreadable, or for a set no row
    could meet."""
    texts = [part for text in texts for part in re.split(r"\s+and\s+", text.strip()) if part.strip()]
    if not texts:
        raise ConditionError("A rule needs at least one condition (cost >= 5, conversions = 0 ...).")
    if len(texts) > MAX_CONDITIONS:
        raise ConditionError(f"A rule has at most {MAX_CONDITIONS} conditions.")
    conditions = [parse_condition(text) for text in texts]
    check_possible(conditions)
    return conditions


@dataclass
class _Interval:
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def narrow(self, condition: Condition, is_count: bool) -> None:
        value, op = condition.value, condition.operator
        if is_count and op in (">", "<") and value == int(value):  # Whole numbers: > 5 is >= 6.
            value, op = (value + 1, ">=") if op == ">" else (value - 1, "<=")
        elif is_count and op in (">", ">=") and value != int(value):
            value, op = math.ceil(value), ">="
        elif is_count and op in ("<", "<=") and value != int(value):
            value, op = math.floor(value), "<="
        if op in (">", ">=", "="):
            if value > self.low or (value == self.low and op == ">"):
                self.low, self.low_open = value, op == ">"
        if op in ("<", "<=", "="):
            if value < self.high or (value == self.high and op == "<"):
                self.high, self.high_open = value, op == "<"

    @property
    def is_empty(self) -> bool:
        return self.low > self.high or (self.low == self.high and (self.low_open or self.high_open))

    def allows_above_zero(self) -> bool:
        return self.high > 0

    def allows(self, value: float) -> bool:
        above = value > self.low or (value == self.low and not self.low_open)
        below = value < self.high or (value == self.high and not self.high_open)
        return above and below


def _domain(metric: str) -> _Interval:
    if metric == "profit":
        return _Interval()
    if metric == "roi":  # Revenue is never negative: at worst the whole cost is lost.
        return _Interval(low=-100.0)
    return _Interval(low=0.0)


def check_possible(conditions: list[Condition]) -> None:
    """ConditionError naming why no report row could meet all of `conditions`."""
    intervals: dict[str, _Interval] = {}
    for condition in conditions:
        interval = intervals.setdefault(condition.metric, _domain(condition.metric))
        if condition.operator != "!=":
            interval.narrow(condition, condition.metric in COUNT_METRICS)
        if interval.is_empty:
            together = " and ".join(c.text for c in conditions if c.metric == condition.metric)
            floor = _domain(condition.metric).low
            why = (
                f"{condition.metric} is never below {floor:g}"
                if len([c for c in conditions if c.metric == condition.metric]) == 1
                else "no number meets them all"
            )
            raise ConditionError(f"The conditions can never hold: {together} ({why}).")
    for condition in conditions:
        interval = intervals[condition.metric]
        if condition.operator == "!=" and interval.low == interval.high and interval.low == condition.value:
            raise ConditionError(
                f"The conditions can never hold: {condition.metric} is {condition.value:g} and not."
            )
    for ratio, denominator in DENOMINATORS.items():
        if ratio in intervals and denominator in intervals and not intervals[denominator].allows_above_zero():
            raise ConditionError(
                f"The conditions can never hold: {ratio} has no value where {denominator} is 0."
            )
    conversions = intervals.get("conversions")
    if conversions is not None and not conversions.allows_above_zero():
        if "cr" in intervals and not intervals["cr"].allows(0.0):
            raise ConditionError("The conditions can never hold: cr is 0 where conversions are 0.")
