"""CPU cost of the flusher's rollup writes per click, in-process: every cube vs. every cube but one.

Takes the newest clicks of a database (a copy: it writes, then rolls back), moves them to the current
hour as the flusher would land them, and times `RollupDelta.add_clicks` + `apply` in batches against
the database's rollup tables, once with every table of TABLES and once without the tables named by
--without (default: the country cube, migration 0011), alternating, every round rolled back. Prints
the median µs per click of each and the difference: what the left-out tables cost the flusher.

    .venv/bin/python scripts/rollup_cost.py DATABASE [--clicks 20000] [--batch 200] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from models.clicks.record import CLICK_COLUMNS
    from models.reporting.rollups import RollupDelta
    from models.store.database import open_database
    from models.store.samples import SampleStore
    from models.tables.dimensions import HOUR_MS, TABLES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", type=Path)
    parser.add_argument("--clicks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--without", default="rollup_campaign_country_hour,rollup_campaign_country_day")
    args = parser.parse_args()

    conn = open_database(args.database).connection()
    samples = SampleStore(conn)
    rows = samples.newest_clicks(CLICK_COLUMNS, args.clicks)
    created = CLICK_COLUMNS.index("created_at")
    hour = int(time.time() * 1000) // HOUR_MS * HOUR_MS
    records = [[*row[:created], hour + n % HOUR_MS, *row[created + 1 :]] for n, row in enumerate(rows)]
    left_out = set(args.without.split(","))
    variants = {"all": TABLES, "without": tuple(t for t in TABLES if t[0] not in left_out)}
    timings: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, tables in variants.items():
            with samples.discarded_tx():
                start = time.thread_time()
                for offset in range(0, len(records), args.batch):
                    delta = RollupDelta(tables)
                    delta.add_clicks(records[offset : offset + args.batch])
                    delta.apply(conn)
                timings[name].append((time.thread_time() - start) * 1e6 / len(records))
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(f"{len(records)} clicks in batches of {args.batch}, {args.rounds} rounds, median µs per click:")
    print(f"  every table ({len(TABLES)}):  {medians['all']:.2f}")
    print(f"  without {', '.join(sorted(left_out))} ({len(variants['without'])}): {medians['without']:.2f}")
    print(f"  difference: {medians['all'] - medians['without']:+.2f} µs per click")


if __name__ == "__main__":
    main()
