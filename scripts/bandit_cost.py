"""What smart rotation costs a click, in-process: the offer decision alone, and the whole pipeline.

1. The decision (`Router._choose_offer` on a stream of three offers): weighted rotation, bandit_cr by the
   refreshed shares (what the click path runs), and a per-click Thompson draw (three
   random.betavariate calls and a max: what the shares replace) for comparison; and the lander decision
   (`Router._to_lander`, three landers) by weight and by lander shares.
2. The pipeline (`ClickTracker.track`: routing, uniqueness probe, journal append; no HTTP) for a campaign
   whose stream rotates three offers by weight and one whose stream rotates them by bandit_cr, with
   shares refreshed from real numbers, over the same visitors in alternating rounds: the ratio of
   their clicks per CPU second is the bench ratio's in-process share (HTTP and bjoern come on top and
   are the same for both).
3. The web app (`create_app(...)` called as a WSGI server calls it: Falcon, the click resource, the
   pipeline, the 302; no socket) for the same two campaigns, alternating: the click bench's ratio
   without bjoern and the network, which cost the same for both.

    .venv/bin/python scripts/bandit_cost.py [--clicks 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AGENT = (
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Mobile"
)


def build(data_dir: Path):
    os.environ["LANNER_DATA_DIR"] = str(data_dir)
    os.environ["LANNER_DEBOUNCE_SECONDS"] = "0"
    from app import create_tracker
    from models.admin.services import create_campaign, create_offer, update_stream
    from models.migrations.runner import migrate
    from models.store.database import db, open_database
    from settings import load_settings

    settings = load_settings()
    open_database(settings.database_location, autocheckpoint=True)
    migrate(db)
    offers = [create_offer(db, f"o{n}", f"https://o{n}.example/?click={{subid}}").id for n in range(3)]
    for alias, rotation in (("weighted", "weight"), ("bandit", "bandit_cr")):
        campaign = create_campaign(db, alias, alias, offer_id=offers[0])
        update_stream(
            db, campaign.streams.get().id, offers=[(o, 100) for o in offers], offer_rotation=rotation
        )
    return settings, db, create_tracker(settings)


def decision_cost(tracker, rounds: int) -> dict[str, float]:
    """CPU µs per decision, median over rounds of 100,000."""
    from models.routing.config import LanderChoice
    from models.routing.router import History

    class NoHistory(History):
        def offers_in_stream(self, stream_id: int) -> set[int]:
            return set()

    router, history = tracker.router, NoHistory()
    weighted = tracker.campaign("weighted").regular[0]
    bandit = tracker.campaign("bandit").regular[0]
    now_ms = int(time.time() * 1000)
    rng = random.Random(3)
    arms = [(1 + c, 1 + n - c) for n, c in ((1000, 20), (1000, 35), (1000, 25))]

    def thompson() -> int:
        best, pick = -1.0, 0
        for index, (a, b) in enumerate(arms):
            draw = rng.betavariate(a, b)
            if draw > best:
                best, pick = draw, index
        return pick

    campaign = tracker.campaign("weighted")
    landers = tuple(LanderChoice(n, f"l{n}", "remote", None, "", 100) for n in (1, 2, 3))
    by_weight = dataclasses.replace(weighted, landers=landers)
    by_shares = dataclasses.replace(bandit, landers=landers, lander_rotation="bandit_cr")
    # The shares a refresh would store for the stream's landers (no lander clicks to compute them from).
    router.bandit.landers_by_stream[by_shares.id] = {1: 0.2, 2: 0.7, 3: 0.1}

    runs = {
        "lander: weighted (weights)": lambda: router._to_lander(campaign, by_weight, []),
        "lander: bandit_cr (shares)": lambda: router._to_lander(campaign, by_shares, []),
        "weighted (weights)": lambda: router._choose_offer(weighted, history, now_ms, []),
        "bandit_cr (shares)": lambda: router._choose_offer(bandit, history, now_ms, []),
        "per-click Thompson draw (3 betavariate)": thompson,
    }
    result = {}
    for name, run in runs.items():
        samples = []
        for _ in range(rounds):
            started = time.process_time()  # CPU time: the box's other work does not count.
            for _ in range(100_000):
                run()
            samples.append((time.process_time() - started) / 100_000 * 1e6)
        result[name] = statistics.median(samples)
    return result


def feed_state(settings, db, tracker, clicks: int) -> None:
    """Clicks on the bandit campaign, landed, some converted, then the shares refreshed and loaded."""
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
    from models.reporting.bandits import refresh_bandits

    campaign = tracker.campaign("bandit")
    decisions = [
        tracker.track(campaign, Visit(ip=f"10.1.{n // 256 % 256}.{n % 256}", user_agent=f"{AGENT} s{n}"))
        for n in range(clicks)
    ]
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    recorder = ConversionRecorder(db, park_ms=0)
    received = Received("GET", "198.51.100.9", "GET /postback")
    for n, decision in enumerate(decisions):
        if n % (10 + 10 * (decision.offer_id % 3)) == 0:
            recorder.record(parse_postback({"subid": decision.subid, "tid": "t", "status": "lead"}), received)
    refresh_bandits(db)
    tracker._next_bandit_check = 0.0
    tracker._load_bandit(time.time())
    print("shares:", tracker.bandit.by_stream)


def pipeline_cost(tracker, clicks: int, rounds: int) -> dict[str, float]:
    from models.clicks.visit import Visit

    rng = random.Random(1)
    results: dict[str, list[float]] = {}
    for round_ in range(rounds):
        batch = [
            Visit(
                ip=f"{rng.choice((8, 23, 81))}.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}",
                user_agent=f"{AGENT} r{round_}/{n % 300}",
            )
            for n in range(clicks)
        ]
        order = ("weighted", "bandit") if round_ % 2 == 0 else ("bandit", "weighted")
        for alias in order:
            campaign = tracker.campaign(alias)
            started = time.process_time()
            for visit in batch:
                tracker.track(campaign, visit)
            results.setdefault(alias, []).append((time.process_time() - started) / clicks * 1e6)
    return {alias: statistics.median(values) for alias, values in results.items()}


def app_cost(settings, tracker, clicks: int, rounds: int) -> dict[str, float]:
    from falcon.testing import create_environ

    from app import create_app

    app = create_app(settings, tracker=tracker)

    def start_response(status, headers, exc_info=None):
        assert status.startswith("302"), status

    results: dict[str, list[float]] = {}
    for round_ in range(rounds):
        environs = [
            create_environ(
                path="/ALIAS",
                headers={
                    "X-Real-IP": f"23.{round_}.{n // 256 % 256}.{n % 256}",
                    "User-Agent": f"{AGENT} w{n % 300}",
                },
                remote_addr="127.0.0.1",
            )
            for n in range(clicks)
        ]
        for alias in ("weighted", "bandit") if round_ % 2 == 0 else ("bandit", "weighted"):
            batch = [{**environ, "PATH_INFO": f"/{alias}"} for environ in environs]
            started = time.process_time()
            for environ in batch:
                b"".join(app(environ, start_response))
            results.setdefault(alias, []).append((time.process_time() - started) / clicks * 1e6)
    return {alias: statistics.median(values) for alias, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanner-bandit-") as directory:
        settings, db, tracker = build(Path(directory))
        feed_state(settings, db, tracker, 3000)
        for name, micros in decision_cost(tracker, args.rounds).items():
            print(f"decision  {name:<42} {micros:6.2f} µs")
        costs = pipeline_cost(tracker, args.clicks, args.rounds)
        for alias, micros in costs.items():
            print(f"pipeline  {alias:<42} {micros:6.1f} µs/click")
        print(f"pipeline  bandit / weighted clicks per CPU second: {costs['weighted'] / costs['bandit']:.3f}")
        costs = app_cost(settings, tracker, args.clicks, args.rounds)
        for alias, micros in costs.items():
            print(f"web app   {alias:<42} {micros:6.1f} µs/click")
        print(f"web app   bandit / weighted clicks per CPU second: {costs['weighted'] / costs['bandit']:.3f}")
        tracker.close()


if __name__ == "__main__":
    main()
