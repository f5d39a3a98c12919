"""CPU cost of the click pipeline per click, in-process: the plain redirect vs. the rotation campaign.

Runs `ClickTracker.track` (routing, uniqueness probe, journal append; no HTTP) on a fresh migrated
database in a temporary directory, for the same visitors against:

- plain:    one stream, one offer (the `unique` bench campaign);
- rotation: an intercepting stream filtered on country and device, a regular stream with three
            offers in unvisited rotation, offer caps and a fallback offer (the `rotation` bench).

Prints the median µs per click over several rounds, for new User-Agents (a parse per click) and
for a pool of repeated ones (the parser's cache hit). The difference is what filters, rotation and
caps cost; HTTP, Falcon and bjoern come on top in `lanner bench clicks`.

    .venv/bin/python scripts/pipeline_cost.py [--clicks 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASES = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 "
    "Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 "
    "Mobile Safari/537.36",
)


def build(data_dir: Path):
    os.environ["LANNER_DATA_DIR"] = str(data_dir)
    from app import create_tracker
    from models.admin.services import add_stream, create_campaign, create_offer, update_stream
    from models.lookups.geo import build_country_database
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from settings import load_settings

    settings = load_settings()
    open_database(settings.database_location, autocheckpoint=True)
    migrate(db)
    build_country_database(settings.geo_path)
    create_campaign(db, "Plain", "plain", offer_url="https://o.example/?click={subid}")
    offers = [create_offer(db, f"r{n}", f"https://r{n}.example/?click={{subid}}").id for n in range(3)]
    capped = create_offer(db, "m1", "https://m1.example/?click={subid}", total_cap=1_000_000).id
    spare = create_offer(db, "spare", "https://s.example/?click={subid}").id
    campaign = create_campaign(db, "Rotation", "rotation", offer_id=offers[0])
    stream = campaign.streams.get()
    update_stream(
        db, stream.id, offers=[(o, 100) for o in offers], offer_rotation="unvisited", fallback_offer_id=spare
    )
    add_stream(
        db,
        "rotation",
        type="intercepting",
        offers=[(capped, 70), (offers[1], 30)],
        filters=["country=US,GB,DE,FR,CA,AU", "device=mobile,tablet"],
    )
    return create_tracker(settings)


def visitors(rng: random.Random, count: int, *, unique_agents: bool) -> list:
    from models.clicks.visit import Visit

    result = []
    for n in range(count):
        first = rng.choice((8, 23, 81, 91, 151, 185))
        ip = f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        base = BASES[n % len(BASES)]
        agent = f"{base} lb/{n:x}" if unique_agents else f"{base} lb/{n % 300:x}"
        result.append(Visit(ip=ip, user_agent=agent))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanner-pipeline-") as directory:
        tracker = build(Path(directory))
        rng = random.Random(1)
        results: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for agents in ("new UA per click", "300 repeated UAs"):
                batch = visitors(rng, args.clicks, unique_agents=agents.startswith("new"))
                for alias in ("plain", "rotation"):
                    campaign = tracker.campaign(alias)
                    started = time.process_time()
                    for visit in batch:
                        tracker.track(campaign, visit)
                    spent = time.process_time() - started
                    results.setdefault((alias, agents), []).append(spent / len(batch) * 1e6)
        tracker.close()
    print(f"{'campaign':<10} {'user agents':<18} {'median µs/click':>16}  (rounds: {args.rounds})")
    for (alias, agents), values in results.items():
        print(f"{alias:<10} {agents:<18} {statistics.median(values):>16.1f}")


if __name__ == "__main__":
    main()
