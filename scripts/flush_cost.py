"""The spool flusher's CPU per click, in process: a new User-Agent every click vs. a realistic mix.

Writes --clicks journal lines with the in-process tracker (the plain campaign of scripts/pipeline_cost.py,
a new visitor IP every click) into a fresh migrated SQLite data directory, then lands them with
`flush_spool` in batches of --batch, and reads this process's CPU time over the landing only. Two
User-Agent mixes, alternating round by round on the same database:

- new UA:  a User-Agent never seen before on every click (the `lanner bench clicks` k6 script's worst
           case: the parser's and the bot check's caches never hit);
- pool:    --pool distinct User-Agents drawn with Zipf weights (s = 1), as real traffic repeats a few
           browser builds heavily and has a long tail (the caches hold 4,096 and 8,192 of them).

Prints the median µs per click of each over --rounds rounds and the difference: what parsing a new
User-Agent (device, OS, browser, bot check) costs the flusher per click. HTTP, the web workers and the
Huey consumer are not in these figures (`lanner bench clicks` measures those).

    .venv/bin/python scripts/flush_cost.py [--clicks 10000] [--batch 2000] [--pool 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from itertools import accumulate
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def user_agents(rng: random.Random, count: int, pool: int) -> list[str]:
    """`count` User-Agents: a new one every click (pool 0), else drawn from `pool` with Zipf weights."""
    from pipeline_cost import BASES  # type: ignore[import-not-found]

    if pool == 0:
        return [f"{BASES[n % len(BASES)]} lb/{rng.getrandbits(40):x}" for n in range(count)]
    names = [f"{BASES[n % len(BASES)]} pool/{n:x}" for n in range(pool)]
    weights = list(accumulate(1 / (rank + 1) for rank in range(pool)))
    return rng.choices(names, cum_weights=weights, k=count)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clicks", type=int, default=10_000, help="Per mix and round.")
    parser.add_argument("--batch", type=int, default=2000, help="The flusher's batch size.")
    parser.add_argument("--pool", type=int, default=3000, help="Distinct User-Agents of the realistic mix.")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from pipeline_cost import build

    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.store.database import db
    from settings import load_settings

    with tempfile.TemporaryDirectory(prefix="lanner-flush-cost-") as directory:
        tracker = build(Path(directory))
        settings = load_settings()
        campaign = tracker.campaign("plain")
        rng = random.Random(1)
        spent: dict[str, list[float]] = {"new UA": [], "pool": []}
        for _ in range(args.rounds):
            for mix, pool in (("new UA", 0), ("pool", args.pool)):
                for user_agent in user_agents(rng, args.clicks, pool):
                    first = rng.choice((8, 23, 81, 91, 151, 185))
                    ip = f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
                    tracker.track(campaign, Visit(ip=ip, user_agent=user_agent))
                started = time.process_time()
                result = flush_spool(
                    db, settings.spool_dir, settings.spool_segment_bytes, batch_size=args.batch
                )
                seconds = time.process_time() - started
                if result.inserted != args.clicks:
                    raise SystemExit(f"landed {result.inserted} clicks of {args.clicks}")
                spent[mix].append(seconds / args.clicks * 1e6)
        tracker.close()
    new, pooled = statistics.median(spent["new UA"]), statistics.median(spent["pool"])
    runs = {mix: ", ".join(f"{value:.1f}" for value in values) for mix, values in spent.items()}
    print(
        f"flusher µs/click, median of {args.rounds} rounds of {args.clicks} clicks, batches of {args.batch}:"
    )
    print(f"  new User-Agent every click  {new:7.1f}   ({runs['new UA']})")
    print(f"  {args.pool:,} UAs, Zipf weights  {pooled:7.1f}   ({runs['pool']})")
    print(f"  difference                  {new - pooled:7.1f}")


if __name__ == "__main__":
    main()
