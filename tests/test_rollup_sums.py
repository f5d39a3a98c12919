"""The flusher's rollup sums: a batch whose keys repeat adds up exactly, in every table, as adding the
clicks one at a time would (models/reporting/rollups.py RollupDelta sums a key's clicks in memory first)."""

from __future__ import annotations

import random

from models.clicks.record import new_subid
from models.reporting.rollups import RollupDelta
from models.store.database import write_tx
from models.tables.click import JOURNAL_COLUMNS
from models.tables.dimensions import DIMENSIONS, HOUR_MS, TABLES

NODE = 7  # A flusher's own partial, not partial 0 that every other writer adds onto.
# Costs whose float sums depend on the order they are added in; None is a NULL cost (counts as 0).
COSTS = (0.1, 0.2, 1 / 3, 1e-7, 0.0, 12345.678, None)
SUMMED = ("clicks", "unique_global", "unique_campaign", "bots", "click_cost", "lp_views")


def journal_rows(count: int, start_ms: int, rng: random.Random) -> list[list]:
    """Clicks as the flusher lands them (JOURNAL_COLUMNS), over two hours, on a few repeating keys."""
    rows = []
    for n in range(count):
        created_at = start_ms + rng.randrange(2 * HOUR_MS)
        column = dict.fromkeys(JOURNAL_COLUMNS, "")
        column.update(
            subid=new_subid(created_at),
            created_at=created_at,
            campaign_id=rng.choice((1, 2)),
            stream_id=rng.choice((1, None)),  # A click of no stream: key 0.
            offer_id=rng.choice((3, 4, None)),
            cost=rng.choice(COSTS),
            is_unique_global=n % 2,
            is_unique_campaign=n % 3 == 0,
            is_unique_stream=1,
            is_bot=int(n % 5 == 0),
            ua_hash=0,
            country=rng.choice(("US", "DE", "")),
            device_type=rng.choice(("desktop", "mobile")),
            os="Android",
            browser="Chrome",
            lander_id=rng.choice((None, 9)),  # Sent to a lander: an LP view.
        )
        rows.append([column[name] for name in JOURNAL_COLUMNS])
    return rows


def one_at_a_time(rows: list[list]) -> dict[tuple, list]:
    """The hourly detail sums as adding each click on its own, in order, gives them."""
    at = {name: JOURNAL_COLUMNS.index(name) for name in JOURNAL_COLUMNS}
    sums: dict[tuple, list] = {}
    for row in rows:
        # A NULL stream or offer is key 0 (a primary key cannot hold NULL).
        key = tuple(
            0 if row[at[name]] is None and name.endswith("_id") else row[at[name]] for name in DIMENSIONS
        )
        created_at = row[at["created_at"]]
        total = sums.setdefault((created_at - created_at % HOUR_MS, *key), [0, 0, 0, 0, 0.0, 0])
        total[0] += 1
        total[1] += row[at["is_unique_global"]]
        total[2] += int(row[at["is_unique_campaign"]])
        total[3] += row[at["is_bot"]]
        total[4] += row[at["cost"]] or 0
        total[5] += row[at["lander_id"]] is not None
    return sums


def folded(hourly: dict[tuple, list], width: int, positions: tuple[int, ...]) -> dict[tuple, list]:
    """A coarser table's sums: the hourly detail sums added up, one at a time, in the order their keys
    first came."""
    sums: dict[tuple, list] = {}
    for (hour, *key), metrics in hourly.items():
        total = sums.setdefault((hour - hour % width, *(key[i] for i in positions)), [0, 0, 0, 0, 0.0, 0])
        for index, value in enumerate(metrics):
            total[index] += value
    return sums


def test_a_batch_whose_keys_repeat_sums_exactly_in_every_table(db):
    rng = random.Random(28)
    rows = journal_rows(600, 1_764_900_000_000 - 1_764_900_000_000 % 86_400_000 + 23 * HOUR_MS, rng)
    delta = RollupDelta(node=NODE)
    # Two batches' clicks before one apply: the second adds onto the sums the first left.
    delta.add_clicks(rows[:250])
    delta.add_clicks(rows[250:])
    with write_tx(db):
        delta.apply(db.connection())
    assert not delta.changes
    hourly = one_at_a_time(rows)
    for table, width, positions in TABLES:
        names = [DIMENSIONS[i] for i in positions]
        stored = db.execute_sql(
            f"SELECT period, {', '.join(names)}, {', '.join(SUMMED)} FROM {table} WHERE node = {NODE}"
        ).fetchall()
        expected = folded(hourly, width, positions)
        got = {tuple(row[: 1 + len(names)]): list(row[1 + len(names) :]) for row in stored}
        assert len(stored) == len(got), f"{table}: a key stored twice"
        assert got == expected, table
        # Floats compared exactly above; the money is really summed, not all zero.
        assert sum(total[4] for total in got.values()) > 0
    # Two hours across midnight: the daily tables fold the hours into two days.
    days = {row[0] for row in db.execute_sql(f"SELECT period FROM rollup_day WHERE node = {NODE}").fetchall()}
    assert len(days) == 2
