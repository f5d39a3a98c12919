"""Redis memory of cluster mode's shared click state, per visitor: docs/SCALING.md's figure.

Sends --visitors synthetic clicks (distinct IPv4 visitors, one campaign and stream, a capped offer) through
the same script a node runs (models/cluster/shared_state.py) into the Redis at --url, under a prefix of
its own, and prints what INFO memory's used_memory grew by and MEMORY USAGE of each kind of key, then
deletes its keys. Debounce keys live seconds (off by default here: --debounce-ms 2000 adds them),
uniqueness keys their window (24 h by default), so a day's memory is the uniqueness keys of a day's
distinct visitors.

    .venv/bin/python scripts/shared_state_memory.py --url unix:///run/redis/redis.sock [--visitors 100000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DAY_MS = 86_400_000


def main() -> None:
    from models.clicks.record import new_subid, ua_hash, visitor_key
    from models.cluster.shared_state import Cap, Counted, Repeat, SharedState

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--visitors", type=int, default=100_000)
    parser.add_argument(
        "--debounce-ms", type=int, default=0, help="0: uniqueness keys alone (the day's memory)"
    )
    args = parser.parse_args()
    prefix = f"memtest{random.randrange(10**6)}:"
    shared = SharedState(args.url, prefix=prefix, timeout=5.0)
    client = shared.client
    rng = random.Random(1)
    agent = "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0"
    crc = ua_hash(agent)
    caps = [Cap("offer", 1, 20260101, 10**9)]
    seed = lambda cap: 0  # noqa: E731 - the counter is set below
    client.set(f"{prefix}cap:offer:1:20260101", 0)
    before = client.info("memory")["used_memory"]
    started = time.perf_counter()
    now_ms = int(time.time() * 1000)
    for n in range(args.visitors):
        ip = f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        visitor = visitor_key(ip, crc)
        subid = new_subid(now_ms)
        stored = Repeat(subid, 1, 1, f"https://offer.example/landing?click={subid}&src=push")
        answer = shared.click(
            1, visitor, crc, stored, args.debounce_ms, DAY_MS, 1, DAY_MS, 1, caps, seed, now_ms + n
        )
        assert answer.__class__ is Counted, answer
    spent = time.perf_counter() - started
    after = client.info("memory")["used_memory"]
    sample = visitor_key("203.0.113.77", crc)
    shared.click(1, sample, crc, stored, 2000, DAY_MS, 1, DAY_MS, 1, caps, seed, now_ms + args.visitors)
    kinds = {
        "debounce": f"{prefix}debounce:1:{sample}:{crc}",
        "unique global": f"{prefix}unique:g:{sample}",
        "unique campaign": f"{prefix}unique:campaign:1:{sample}",
        "unique stream": f"{prefix}unique:stream:1:{sample}",
    }
    each = spent / args.visitors * 1e6
    print(f"{args.visitors} visitors in {spent:.1f} s ({each:.0f} µs a click, round trip included)")
    grown = after - before
    print(f"used_memory grew by {grown / 2**20:.1f} MiB: {grown / args.visitors:.0f} bytes a visitor")
    for kind, key in kinds.items():
        print(f"  MEMORY USAGE {kind:<16} {client.memory_usage(key, samples=0)} bytes")
    unique = sum(client.memory_usage(k, samples=0) for name, k in kinds.items() if name.startswith("unique"))
    per_million = grown * (10**6 / args.visitors) / 2**20
    print(
        f"per million visitors: {per_million:.0f} MiB by used_memory "
        f"({'with' if args.debounce_ms else 'without'}"
    )
    print(f"  debounce keys), {unique * 10**6 / 2**20:.0f} MiB by MEMORY USAGE of the uniqueness keys alone")
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    print(f"Redis CPU per click (EVALSHA usec_per_call): {stats.get('usec_per_call')} µs")
    for key in client.scan_iter(f"{prefix}*", count=10_000):
        client.unlink(key)
    shared.close()


if __name__ == "__main__":
    main()
