"""Folding closed days' partial rows into one row per key (issue 33, point 2; migration 0036).

Every node's flusher adds onto its own partial of the cap counters and the rollups, so a report
reads as many rows per key as nodes landed clicks of it. Once a day is over in every timezone (and a
margin more, for the clicks a node journalled while it could not land them), nothing but a late
click adds onto it: its partials are summed into partial 0 and deleted (models/store/partials.py),
one table's day per transaction, so a report reads one row per key again.

A click that lands after its day was folded (a node that was down for longer than the margin, its
spool landed afterwards) adds onto its node's partial as any click does: a new partial row beside
partial 0, summed by every reader, exact; the next fold of that day (within `days` of the newest
closed one) folds it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from models.store.database import Database, write_tx
from models.store.partials import COUNTER, FOLDED, PartialStore

# Past the end of a day in the last timezone (UTC-12): a node restarted within this time lands its
# journalled clicks before their day is folded (a later one still counts, as a partial of its own).
FOLD_MARGIN_HOURS = 12
# How many closed days, back from the newest, each fold looks at for partials.
FOLD_DAYS = 7
# A local day ends at 24:00 in UTC-12 at the latest: 12:00 UTC the next day.
LAST_ZONE_HOURS = 12


@dataclass
class FoldResult:
    through: date  # The newest day that could be folded.
    chunks: int = 0  # Transactions: one table's day each.
    rows: int = 0  # Partial rows summed into partial 0 and deleted.
    days: list[date] = field(default_factory=list)


def closed_through(now: float, margin_hours: float = FOLD_MARGIN_HOURS) -> date:
    """The newest day that is over in every timezone, `margin_hours` ago."""
    at = datetime.fromtimestamp(now, UTC) - timedelta(hours=LAST_ZONE_HOURS + margin_hours)
    return at.date() - timedelta(days=1)


def _range(table: str, day: date) -> tuple[int, int]:
    """The key range of `day` in `table`: a local YYYYMMDD for the counters, its UTC ms for a rollup."""
    if table == COUNTER:
        number = int(day.strftime("%Y%m%d"))
        return number, number + 1
    start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
    return start, start + 86_400_000


def _as_day(table: str, value: int) -> date:
    if table == COUNTER:
        return datetime.strptime(str(value), "%Y%m%d").date()
    return datetime.fromtimestamp(value / 1000, UTC).date()


def fold_plan(db: Database, through: date, days: int = FOLD_DAYS) -> list[tuple[date, str]]:
    """(day, table) of each table's day in the `days` days up to `through` that holds partials other
    than 0: by day, then in FOLDED's order (the counters, then the rollups in TABLES' order)."""
    first = through - timedelta(days=days - 1)
    store = PartialStore(db.connection())
    plan = []
    for table in FOLDED:
        start, _ = _range(table, first)
        _, end = _range(table, through)
        plan += [(_as_day(table, value), table) for value in store.partial_days(table, start, end)]
    order = list(FOLDED)
    return sorted(plan, key=lambda entry: (entry[0], order.index(entry[1])))


def fold_partials(
    db: Database,
    now: float,
    *,
    margin_hours: float = FOLD_MARGIN_HOURS,
    days: int = FOLD_DAYS,
    on_chunk: Callable[[int, int], None] | None = None,
) -> FoldResult:
    """Fold the partials of the closed days (`days` back from the newest) into partial 0.

    `on_chunk(done, total)` after each committed chunk. Safe to stop at any point (each chunk commits
    whole or not at all) and to run again, or twice at once."""
    result = FoldResult(closed_through(now, margin_hours))
    plan = fold_plan(db, result.through, days)
    for done, (day, table) in enumerate(plan, 1):
        start, end = _range(table, day)
        # Its own transaction, before the fold's (models/store/postgres/partials.py; nothing on SQLite).
        with write_tx(db):
            PartialStore(db.connection()).add_missing_zeros(table, start, end)
        with write_tx(db):
            result.rows += PartialStore(db.connection()).fold(table, start, end)
        result.chunks += 1
        if day not in result.days:
            result.days.append(day)
        if on_chunk is not None:
            on_chunk(done, len(plan))
    return result
