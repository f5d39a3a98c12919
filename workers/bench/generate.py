"""Realistic historic clicks for benchmarks and rehearsals: `lanner generate clicks`.

The mix follows what trackers see: mostly new visitors, a share of repeat visitors, and carrier
NAT addresses shared by thousands of user agents. Rows are generated in time order so the
uniqueness flags are exactly the tracker's (models/clicks/history.py): a click is unique in a scope
(global, campaign, stream) when the visitor has no earlier click there within the window (the
global one, or the campaign's `uniqueness_hours` for campaign and stream); rows are inserted in
large transactions.
"""

from __future__ import annotations

import queue
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

from peewee import Database

from models.clicks.record import new_subid, ua_hash
from models.reporting.currency import report_currency
from models.reporting.rollups import RollupDelta, is_partial, present_tables
from models.routing.caps import CounterZones, add_to_counters
from models.store.database import write_tx
from models.store.generated import GeneratedStore
from models.store.meta import MetaStore

CHUNK = 50_000
NEVER = -(1 << 60)  # A visitor's last click time when there was none.
BROWSERS = (
    "Mozilla/5.0 (Linux; Android {a}; SM-A{m}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Mobile Safari/537.36",  # noqa: E501
    "Mozilla/5.0 (iPhone; CPU iPhone OS {a}_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{a}.0 Mobile/15E{m} Safari/604.1",  # noqa: E501
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.{m}.0 Safari/537.36",  # noqa: E501
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_{a}) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.{a} Safari/605.1.15",  # noqa: E501
    "Mozilla/5.0 (X11; Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0",
)
# What ua-parser says of each template above: (device_type, os, browser).
DEVICES = (
    ("mobile", "Android", "Chrome Mobile"),
    ("mobile", "iOS", "Mobile Safari"),
    ("desktop", "Windows", "Chrome"),
    ("desktop", "Mac OS X", "Safari"),
    ("desktop", "Linux", "Firefox"),
)
COUNTRIES = ("US", "US", "US", "DE", "GB", "FR", "BR", "IN", "ID", "MX", "TR", "PL", "")
LANGUAGES = {"US": "en", "GB": "en", "DE": "de", "FR": "fr", "BR": "pt", "MX": "es", "TR": "tr", "PL": "pl"}
SOURCES = ("propellerads", "facebook", "tiktok", "google", "push-house", "richads", "")


PRIVATE_FIRST_OCTETS = frozenset({0, 10, 100, 127, 169, 172, 192}) | frozenset(range(224, 256))


def _public_ip(rng: random.Random) -> str:
    while True:
        address = rng.getrandbits(32)
        if address >> 24 not in PRIVATE_FIRST_OCTETS:
            return socket.inet_ntoa(address.to_bytes(4, "big"))


def _user_agents(rng: random.Random, count: int) -> list[tuple[str, int, tuple[str, str, str]]]:
    """A pool of distinct browser UAs with their hashes and devices; real traffic repeats UAs a lot."""
    pool = {}
    while len(pool) < count:
        kind = rng.randrange(len(BROWSERS))
        user_agent = BROWSERS[kind].format(
            a=rng.randint(9, 17), m=rng.randint(100, 999), v=rng.randint(100, 131)
        )
        pool[user_agent] = DEVICES[kind]
    return [(user_agent, ua_hash(user_agent), pool[user_agent]) for user_agent in sorted(pool)]


def insert_campaign(
    db: Database, name: str, alias: str, offer_url: str, offer_name: str | None = None
) -> int:
    """A campaign with one stream to a new offer, as `lanner campaign create --offer-url` makes it,
    written with the generator's statements (no audit entry: fixture data); returns its id."""
    now_ms = int(time.time() * 1000)
    with write_tx(db):
        conn = db.connection()
        campaign_id = GeneratedStore(conn).insert_campaign(
            name, alias, offer_name or name, offer_url, report_currency(conn), now_ms
        )
        MetaStore(conn).bump_config_version()
    return campaign_id


def ensure_campaigns(db: Database, count: int) -> list[tuple[int, list[int], list[int]]]:
    """Campaigns to spread clicks over: [(campaign_id, stream_ids, offer_ids)], creating missing ones."""
    existing = GeneratedStore(db.connection()).generated_campaigns()
    for n in range(existing, count):
        url = f"https://offer{n}.example/?click={{subid}}"
        insert_campaign(db, f"Generated {n}", f"gen-{n}", url, offer_name=f"Generated offer {n}")
    campaigns: dict[int, tuple[list[int], list[int]]] = {}
    for campaign_id, stream_id, offer_id in GeneratedStore(db.connection()).generated_targets():
        streams, offers = campaigns.setdefault(campaign_id, ([], []))
        streams.append(stream_id)
        offers.append(offer_id)
    return [(campaign_id, streams, offers) for campaign_id, (streams, offers) in campaigns.items()]


def _click_rows(
    rng: random.Random,
    targets: list,
    count: int,
    start: int,
    mean_gap: float,
    windows: dict[int, int],
    global_window: int,
    zone_count: int = 9000,
) -> Iterator[list[tuple]]:
    """Chunks of click rows in time order, with exact uniqueness flags (`windows`: campaign id -> ms)."""
    nat_ips = [_public_ip(rng) for _ in range(60)]
    agents = _user_agents(rng, 20_000)
    returning: list[tuple[str, str, int, tuple]] = []
    last_seen: dict[tuple[str, int], int] = {}
    last_in_campaign: dict[tuple[str, int, int], int] = {}
    last_in_stream: dict[tuple[str, int, int], int] = {}
    horizon = max([global_window, *windows.values()])
    tail = ("", rng.choice(SOURCES), "", 0.0)
    empty_subs = ("",) * 28
    zones = [str(zone) for zone in range(1000, 1000 + zone_count)]
    creatives = [f"cr{n}" for n in range(1, 41)]
    uniform = rng.random
    produced = 0
    while produced < count:
        rows = []
        for _ in range(min(CHUNK, count - produced)):
            # One click per slot of mean_gap, at a random moment in it: in time order, and never
            # past the end of the spread (random gaps summed would overshoot it by hours).
            created = start + int((produced + len(rows) + uniform()) * mean_gap)
            kind = uniform()
            if kind < 0.25 and returning:
                ip, user_agent, visitor_hash, device = returning[int(uniform() * len(returning))]
            else:
                ip = nat_ips[int(uniform() * 60)] if kind > 0.85 else _public_ip(rng)
                user_agent, visitor_hash, device = agents[int(uniform() * len(agents))]
                if len(returning) < 200_000:
                    returning.append((ip, user_agent, visitor_hash, device))
                else:
                    returning[int(uniform() * 200_000)] = (ip, user_agent, visitor_hash, device)
            campaign_id, streams, offers = targets[int(rng.paretovariate(1.2)) % len(targets)]
            country = COUNTRIES[int(uniform() * len(COUNTRIES))]
            pick = int(uniform() * len(streams))
            visitor = (ip, visitor_hash)
            in_campaign = (ip, visitor_hash, campaign_id)
            in_stream = (ip, visitor_hash, streams[pick])
            window = windows[campaign_id]
            # The tracker's rule: seen when an earlier click is at most the window old.
            is_unique_global = int(created - last_seen.get(visitor, NEVER) > global_window)
            is_unique_campaign = int(created - last_in_campaign.get(in_campaign, NEVER) > window)
            is_unique_stream = int(created - last_in_stream.get(in_stream, NEVER) > window)
            last_seen[visitor] = last_in_campaign[in_campaign] = last_in_stream[in_stream] = created
            if uniform() < 0.01:
                tail = ("", SOURCES[int(uniform() * len(SOURCES))], "", 0.0)
            rows.append(
                (
                    new_subid(created),
                    created,
                    campaign_id,
                    streams[pick],
                    offers[pick],
                    ip,
                    user_agent,
                    visitor_hash,
                    *tail,
                    is_unique_global,
                    is_unique_campaign,
                    is_unique_stream,
                    0,
                    zones[int(uniform() * zone_count)],
                    creatives[int(uniform() * 40)],
                    *empty_subs,
                    country,
                    "",
                    "",
                    *device,
                    LANGUAGES.get(country, ""),
                    "",
                    f"{streams[pick]}+ o{offers[pick]} =h",  # A 302 to the offer: a recorded path.
                )
            )
        produced += len(rows)
        # Clicks older than every window decide nothing: forgetting them bounds the memory.
        oldest = rows[-1][1] - horizon
        for last in (last_seen, last_in_campaign, last_in_stream):
            for key in [key for key, created in last.items() if created < oldest]:
                del last[key]
        yield rows


def generate_clicks(
    db: Database,
    count: int,
    days: float,
    *,
    campaigns: int = 20,
    seed: int | None = None,
    end_ms: int | None = None,
    global_uniqueness_hours: float = 24.0,
    on_progress: Callable[[int], None] | None = None,
    zone_count: int = 9000,
) -> int:
    """Insert `count` clicks spread over the `days` before `end_ms` (default: now). Returns rows added.

    `global_uniqueness_hours`: the global uniqueness window (LANNER_UNIQUENESS_HOURS); `zone_count`: how
    many sub_id_1 values (zone ids from 1000 up) the clicks spread over.
    """
    rng = random.Random(seed)
    targets = ensure_campaigns(db, campaigns)
    store = GeneratedStore(db.connection())
    windows = {  # As models/routing/config.py computes a campaign's uniqueness_ms.
        campaign_id: int(hours * 3_600_000) for campaign_id, hours in store.uniqueness_hours().items()
    }
    zones = CounterZones()
    zones.load(db.connection())
    rollups = RollupDelta(present_tables(db.connection()))  # `--to` an earlier migration has fewer.
    node = 0 if is_partial(db.connection()) else None  # Nor partials, before 0036.
    end_ms = end_ms if end_ms is not None else int(time.time() * 1000)
    start_ms = end_ms - int(days * 86_400_000)
    mean_gap = (end_ms - start_ms) / max(count, 1)
    added = 0
    with_visitor_key = store.has_visitor_key()
    # PERF: sqlite3 releases the GIL while it steps, so generating the next chunk in a thread
    # overlaps with inserting this one; a big page cache keeps the index pages in memory.
    with store.bulk():
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(0.0002)  # Hand the GIL back promptly when SQLite is done stepping.
        global_window = int(global_uniqueness_hours * 3_600_000)
        clicks = _click_rows(rng, targets, count, start_ms, mean_gap, windows, global_window, zone_count)
        try:
            for rows in _prefetched(clicks):
                with db.atomic():
                    connection = db.connection()
                    GeneratedStore(connection).insert_clicks(rows, with_visitor_key)
                    # Generated campaigns and offers count days in UTC (their default timezone).
                    add_to_counters(
                        connection, zones.increments(connection, ((r[3], r[4], r[1]) for r in rows)), node
                    )
                    rollups.add_clicks(rows)
                    rollups.apply(connection)
                added += len(rows)
                if on_progress:
                    on_progress(len(rows))
        finally:
            sys.setswitchinterval(switch_interval)
    store.optimize()
    return added


def _prefetched(iterator: Iterator[list], depth: int = 2) -> Iterator[list]:
    """Run `iterator` in a thread, `depth` items ahead of the consumer."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in iterator:
                while not stop.is_set():
                    try:
                        items.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        finally:
            items.put(done)

    thread = threading.Thread(target=produce, name="generate-clicks", daemon=True)
    thread.start()
    try:
        while (item := items.get()) is not done:
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)
