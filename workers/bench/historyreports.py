"""`lanner bench history-reports`: issue 28's report targets on a big columnar history (docs/PERFORMANCE.md).

Builds, in a fresh data directory, what a single box looks like after months of traffic with
LANNER_RAW_RETENTION doing its work, then times the issue's reports through the real report code:

- the old clicks (all but the recent window) are written **straight into the DuckDB history** by DuckDB
  SQL over `range()`, with hash-based values: 20 campaigns (~30% of the clicks the biggest), each
  buying one geo (98% of its clicks from its country, the rest from any of 200, mostly the big ones)
  from one of 7 sources, each source with its own ~7,000 of the ~50,000 zones (`sub_id_1`, a few
  zones with most clicks), 40 creatives (`sub_id_2`), 2,000 placements (`sub_id_3`), regions and
  cities in the 40 biggest countries, devices, OS, browsers, languages, referrers, a cost per click by
  zone, uniqueness and bot flags, repeat visitors, and a subid in Lanner's own format (its time
  prefix, which the zone maps use). They are laid out as the appender lays them: in id (time) order,
  each 50,000 sorted by (campaign, time);
- the rollups' campaign cube and the country cube's days get those clicks' sums (what the flusher
  would have added as they landed; the detail cube and the country cube's hours are left without
  them, and no timed report reads them: each run checks);
- the row store is told what retention would have left: the history holds the old part
  (`history_state.position`), the time before the window is pruned (`pruned_before`), and it keeps the
  newest old click (retention never deletes the newest click, so new ids follow the history's);
- the recent window lands in the row store through `lanner generate clicks`' code (ids after the
  history's, rollups, exact uniqueness; its own model: 13 countries, zones drawn evenly from one
  source's 7,142), is copied by the real appender, and a last minute of clicks stays past the position
  (the tail every report reads from the row store);
- the closed days are compacted (models/reporting/compaction.py), and their sub id cube built
  (models/reporting/subidcube.py), as the worker does after its appends;
- conversions arrive through the real postback path: a share of the window's clicks, and a few late
  ones for clicks only the history holds (which puts the click back in the row store first).

Then each report runs `repeat` times in this process through `run_report(..., history=...)`, as every
API does: the first run is noted apart (cold: DuckDB imported and the file opened for the first time in
the process), the median and slowest of the rest are the warm figures, each with the load average
it was taken at. A built directory is reused by a later run (the timings only).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from peewee import Database

from models.clicks.record import _SUBID_ALPHABET
from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.reporting.compaction import compact_history
from models.reporting.history import CHUNK as APPEND_CHUNK  # How the appender sorts what it writes.
from models.reporting.history import HistoryFiles, append_history
from models.reporting.historyclicks import ClickHistory
from models.reporting.reportpage import PageQuery, page_report
from models.reporting.reports import ReportQuery, run_report
from models.reporting.subidcube import build_cube
from models.store.conversions import ConversionStore
from models.store.database import write_tx
from models.store.duckdb.connection import open_history
from models.store.duckdb.history import HISTORY_COLUMNS, ColumnarHistory
from models.store.history import HistoryStore
from models.store.meta import MetaStore
from models.store.rollups import RollupStore
from models.tables.dimensions import CONVERSION_METRICS, CUBES, DAY_MS, HOUR_MS
from workers.bench.generate import ensure_campaigns, generate_clicks

CAMPAIGNS = 20
ZONES = 50_000
SOURCES = 7  # Traffic sources, one of them none (direct): each with its own zones.
STRAY_GEO = 0.02  # Of a campaign's clicks, those from outside the country it buys.
COUNTRIES = 200
FILL_CHUNK = 40 * APPEND_CHUNK  # Rows a DuckDB statement generates: bounded memory, a progress step.
BUILT = "bench-history.json"  # In the data directory once it is built: what it holds.
MINUTE_MS = 60_000

# Two-letter codes: 200 countries, the big ones first (the skew puts most clicks there).
_BIG = ("US", "IN", "ID", "BR", "MX", "DE", "GB", "FR", "TR", "PL", "VN", "TH", "PH", "RU", "IT", "ES")
COUNTRY_CODES = (
    *_BIG,
    *[a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if a + b not in _BIG][
        : COUNTRIES - len(_BIG)
    ],
)


def _u(salt: int) -> str:
    """A uniform [0, 1) of the click id `i`, independent per salt (DuckDB's hash)."""
    return f"((hash(i, {salt}) % 1000003) / 1000003.0)"


def _text_list(values) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


# PERF: 2 base32 characters a list lookup (as new_subid does): half the work of one substr a character.
_PAIRS = "[" + ", ".join(f"'{a}{b}'" for a in _SUBID_ALPHABET for b in _SUBID_ALPHABET) + "]"


def _pairs(value: str, count: int) -> str:
    """The low 10 * `count` bits of `value` (an integer expression) as Crockford base32 characters."""
    return " || ".join(
        f"{_PAIRS}[CAST(({value} >> {10 * (count - 1 - k)}) & 1023 AS INTEGER) + 1]" for k in range(count)
    )


def subid_sql(ms: str, random_bits: str) -> str:
    """new_subid's 17 characters: 9 of the milliseconds (5 + 40 bits), 8 of 40 random bits."""
    return (
        f"substr('{_SUBID_ALPHABET}', CAST(({ms} >> 40) & 31 AS INTEGER) + 1, 1) || "
        f"{_pairs(ms, 4)} || {_pairs(random_bits, 4)}"
    )


SKEW = 2.5  # Campaign k of 20 gets a share (k+1)^(1/SKEW) - k^(1/SKEW) of 20^(1/SKEW): ~30% the first.


def fill_sql(targets: list[tuple[int, int, int]]) -> str:
    """The INSERT writing clicks with ids in [?, ?) (whole blocks of APPEND_CHUNK from id 1), block b
    over [? + b * ?, + ?) (Unix ms: the start, the block's span twice).

    PERF: each block is written already in the appender's order (by campaign, then time: its ids
    ordered as the campaigns' shares, each campaign's clicks spread over the block's time), so
    DuckDB sorts nothing: a sort of the chunk cost ~2 µs a click of the ~7."""
    count = len(targets)
    position = f"((i - 1) % {APPEND_CHUNK})"
    campaign = (
        f"least(CAST(floor({count} * pow({position} / {APPEND_CHUNK}.0, {SKEW})) AS INTEGER), {count - 1})"
    )
    first = f"CAST(ceil({APPEND_CHUNK} * pow(c / {count}.0, {1 / SKEW})) AS BIGINT)"
    after = f"CAST(ceil({APPEND_CHUNK} * pow((c + 1) / {count}.0, {1 / SKEW})) AS BIGINT)"
    campaigns = "[" + ", ".join(str(c) for c, _, _ in targets) + "]"
    streams = "[" + ", ".join(str(s) for _, s, _ in targets) + "]"
    offers = "[" + ", ".join(str(o) for _, _, o in targets) + "]"
    # A campaign buys one geo: 98% of its clicks are from it (its own of the 16 big countries), the rest
    # from anywhere, mostly the big ones (GeoIP and the network disagreeing, VPNs).
    country = (
        f"CASE WHEN {_u(3)} < {1 - STRAY_GEO} THEN c % {len(_BIG)} "
        f"ELSE CAST(floor({COUNTRIES} * pow({_u(22)}, 6)) AS INTEGER) END"
    )
    # A campaign buys from one source (of SOURCES), and a zone is one source's: each source has its
    # own ZONES / SOURCES of them, the busiest few with most of the clicks.
    source = f"CAST(hash(c, 7) % {SOURCES} AS INTEGER)"
    zone = f"{source} * {ZONES // SOURCES} + CAST(floor({ZONES // SOURCES} * pow({_u(2)}, 3)) AS INTEGER)"
    os_list = _text_list(("Android", "Android", "Android", "iOS", "iOS", "Windows", "macOS", "Linux"))
    browsers = _text_list(
        ("Chrome", "Chrome", "Chrome", "Safari", "Samsung Internet", "Firefox", "Edge", "Opera")
    )
    devices = _text_list(("mobile", "mobile", "mobile", "desktop", "tablet"))
    languages = _text_list(
        ("en", "en", "es", "pt", "hi", "id", "de", "fr", "tr", "pl", "vi", "th", "ru", "it")
    )
    sources = _text_list(("propellerads", "richads", "push-house", "zeropark", "clickadu", "facebook", ""))
    domains = _text_list(("trk.example.com", "go.example.net", "t.example.org"))
    # Unix ms: the campaign's clicks of the block each in its own slot of the block's time, at a random
    # moment in it (clamped: a float rounding at a share's edge must not leave the block).
    moment = "(hash(i, 20) % 1000) / 1000.0"
    slot = f"(greatest({position} - {first}, 0) + {moment}) / greatest({after} - {first}, 1)"
    created = f"CAST(? + ((i - 1) // {APPEND_CHUNK}) * ? + least(floor({slot} * ?), ? - 1) AS BIGINT)"
    columns = {
        "id": "i",
        "created_at": "created_at",
        "campaign_id": f"{campaigns}[c + 1]",
        "stream_id": f"{streams}[c + 1]",
        "offer_id": f"{offers}[c + 1]",
        "lander_id": "NULL",
        "lp_clicked_at": "NULL",
        "domain": f"{domains}[CAST(hash(i, 4) % 3 AS INTEGER) + 1]",
        # Most push and pop clicks carry no referrer; the rest come from a few hundred sites.
        "referrer_domain": f"CASE WHEN {_u(5)} < 0.7 THEN '' "
        "ELSE 'site' || CAST(hash(i, 6) % 300 AS VARCHAR) || '.example' END",
        "source": f"{sources}[{source} + 1]",
        "cost": "CAST(1 + hash(z, 8) % 40 AS DOUBLE) / 10000",  # A zone's CPC, $0.0001-0.004.
        "is_unique_global": f"CAST({_u(9)} < 0.55 AS TINYINT)",
        "is_unique_campaign": f"CAST({_u(9)} < 0.65 AS TINYINT)",
        "is_unique_stream": f"CAST({_u(9)} < 0.66 AS TINYINT)",
        "is_bot": f"CAST({_u(10)} < 0.03 AS TINYINT)",
        "visitor_key": "CAST(hash(i // 3, 11) >> 1 AS BIGINT)",  # A visitor clicks ~3 times.
        # As `lanner generate clicks` fills them (the window's clicks): the zone, the creative; and a
        # source's placement id, which it leaves empty.
        "sub_id_1": "CAST(1000 + z AS VARCHAR)",
        "sub_id_2": "'cr' || CAST(1 + hash(i, 12) % 40 AS VARCHAR)",
        "sub_id_3": f"'p' || CAST(floor(2000 * pow({_u(13)}, 2)) AS INTEGER)",
        **{f"sub_id_{n}": "''" for n in range(4, 31)},
        "country": f"{_text_list(COUNTRY_CODES)}[k + 1]",
        # Regions and cities where a GeoIP city database knows them: the 40 biggest countries.
        "region": f"CASE WHEN k < 40 THEN {_text_list(COUNTRY_CODES)}[k + 1] || '-' || "
        "CAST(hash(i, 14) % 20 AS VARCHAR) ELSE '' END",
        "city": "CASE WHEN k < 40 THEN 'city' || "
        f"CAST(k * 500 + CAST(floor(500 * pow({_u(15)}, 2)) AS INTEGER) AS VARCHAR) ELSE '' END",
        "device_type": f"{devices}[CAST(hash(i, 16) % 5 AS INTEGER) + 1]",
        "os": f"{os_list}[CAST(hash(i, 17) % 8 AS INTEGER) + 1]",
        "browser": f"{browsers}[CAST(hash(i, 18) % 8 AS INTEGER) + 1]",
        "language": f"{languages}[CAST(hash(i, 19) % 14 AS INTEGER) + 1]",
        "keyword": "''",
        "route": f"CAST({streams}[c + 1] AS VARCHAR) || '+ o' || CAST({offers}[c + 1] AS VARCHAR)",
        "subid": subid_sql("created_at", "CAST(hash(i, 21) & 1099511627775 AS BIGINT)"),
    }
    assert tuple(columns) == HISTORY_COLUMNS, set(HISTORY_COLUMNS) ^ set(columns)
    return (
        f"INSERT INTO click ({', '.join(columns)}) "
        f"SELECT {', '.join(columns.values())} FROM ("
        f"SELECT i, c, {zone} AS z, {country} AS k, "
        f"{created} AS created_at FROM (SELECT i, {campaign} AS c FROM range(?, ?) AS t(i)))"
    )


def fill_history(
    files: HistoryFiles,
    targets: list[tuple[int, int, int]],
    clicks: int,
    start_ms: int,
    end_ms: int,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Write clicks 1..`clicks` over [start_ms, end_ms) straight into the history, chunk by chunk, and
    set its position to the last."""
    blocks = -(-clicks // APPEND_CHUNK)
    span = (end_ms - start_ms) // blocks  # ms a block of APPEND_CHUNK clicks covers.
    sql = fill_sql(targets)
    files.path.parent.mkdir(parents=True, exist_ok=True)
    with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
        history = ColumnarHistory(conn, files.path.parent)
        history.create()
        first = 1
        while first <= clicks:
            last = min(first + FILL_CHUNK, clicks + 1)
            conn.execute(sql, [start_ms, span, span, span, first, last])
            if on_progress:
                on_progress(last - first)
            first = last
        conn.execute(ColumnarHistory.SQL_SET_POSITION, [clicks])
        conn.execute("CHECKPOINT")


# The rollup tables the bench fills from the history's sums: the campaign cube, and the country cube's
# days. The country cube's hours (millions of rows at 30 M clicks: minutes of upserts) and the detail
# cube are not filled, and no timed report may read them (time_reports checks).
ROLLUP_TABLES = tuple(
    (table, CUBES[cube][0], HOUR_MS if granularity == "hour" else DAY_MS)
    for cube in ("campaign", "country")
    for granularity, table in CUBES[cube][1].items()
    if (cube, granularity) != ("country", "hour")
)
SQL_ROLLUP = (
    "SELECT created_at - created_at % {width} AS period, {dims}, COUNT(*), SUM(is_unique_global), "
    "SUM(is_unique_campaign), SUM(is_unique_stream), SUM(is_bot), SUM(cost), 0, 0, "
    + ", ".join("0" * len(CONVERSION_METRICS))
    + " FROM click GROUP BY ALL ORDER BY ALL"
)


def fill_rollups(db: Database, files: HistoryFiles) -> int:
    """Add the history's clicks to the campaign and country cubes (what the flusher would have added as
    they landed), through the rollups' own upsert; the rows written."""
    written = 0
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        for table, dims, width in ROLLUP_TABLES:
            cursor = conn.execute(SQL_ROLLUP.format(width=width, dims=", ".join(dims)))
            while rows := cursor.fetchmany(100_000):
                with write_tx(db):
                    RollupStore(db.connection()).add([(table, [tuple(row) for row in rows])])
                written += len(rows)
    return written


def keep_newest_old_click(db: Database, files: HistoryFiles, position: int) -> None:
    """Put the history's newest click back in the row store, as retention leaves it (it never deletes
    the newest click): SQLite then gives the next click the id after it."""
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        (row,) = ColumnarHistory(conn, files.path.parent).clicks_by_ids([position])
    with write_tx(db):
        ConversionStore(db.connection()).revive_click(row)


def convert(
    db: Database,
    files: HistoryFiles,
    subids: list[str],
    seed: int,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """A lead for each click, some then a sale or rejected, through the real postback path (a click
    only the history holds is put back in the row store first, as a late postback's is)."""
    rng = random.Random(seed)
    recorder = ConversionRecorder(db, park_ms=60_000, history=ClickHistory(files))
    received = Received("GET", "127.0.0.1", "bench")
    for subid in subids:
        params = {"subid": subid, "status": "lead", "payout": f"{rng.choice((5, 10, 25, 40))}", "tid": "b1"}
        recorder.record(parse_postback(params), received)
        roll = rng.random()
        if roll < 0.5:
            recorder.record(parse_postback({**params, "status": "sale"}), received)
        elif roll < 0.7:
            recorder.record(parse_postback({**params, "status": "rejected"}), received)
        if on_progress:
            on_progress(1)
    return len(subids)


def old_subids(files: HistoryFiles, below: int, count: int, seed: int) -> list[str]:
    """Subids of `count` clicks with ids below `below` (only the history holds them: late postbacks)."""
    sample = f"USING SAMPLE reservoir({int(count)} ROWS) REPEATABLE ({int(seed)})"  # No parameters there.
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return [
            row[0]
            for row in conn.execute(
                f"SELECT subid FROM (SELECT subid FROM click WHERE id < ?) {sample}", [below]
            ).fetchall()
        ]


def compact(files: HistoryFiles, progress: Callable[[str, int], Callable[[int], None]] | None = None) -> int:
    """Compact the history's closed days, as the worker does a little each minute after its append (a
    history built straight into DuckDB is laid out as the appender's chunks); the clicks rewritten."""
    advance: list[Callable[[int], None]] = []
    done = [0]

    def on_step(days: int, total: int) -> None:
        if progress is None:
            return
        if not advance:
            advance.append(progress("Compaction (closed days)", total))
        advance[0](days - done[0])
        done[0] = days

    return compact_history(files, on_step=on_step).moved


def cube(files: HistoryFiles, progress: Callable[[str, int], Callable[[int], None]] | None = None) -> int:
    """Build the sub id cube of the closed days, as the worker does after its compaction; the days built."""
    advance: list[Callable[[int], None]] = []

    def on_day(days: int, total: int) -> None:
        if progress is None:
            return
        if not advance:
            advance.append(progress("Sub id cube (closed days)", total))
        advance[0](1)

    return build_cube(files, on_day=on_day).days


@dataclass
class BuildPlan:
    clicks: int  # In all: the history's old part, the recent window and its tail.
    days: float  # The history spans them, to now.
    recent_hours: float  # The row store's window (what LANNER_RAW_RETENTION keeps, scaled down).
    recent_clicks: int  # Of `clicks`, landed through the row store in the window.
    conversions: float  # Share of the window's clicks converted.
    old_conversions: int  # Late postbacks for clicks only the history holds.
    seed: int = 1
    # Compact the closed days (~11-19 µs of CPU a click at 100 M): off, a later run with it on compacts
    # them before its reports, as the worker would by then.
    compact: bool = True


@dataclass
class Built:
    clicks: int
    history_clicks: int
    position: int
    tail: int
    conversions: int
    start_ms: int
    end_ms: int
    seconds: dict[str, float] = field(default_factory=dict)


def build(
    db: Database,
    files: HistoryFiles,
    plan: BuildPlan,
    *,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    now_ms: int | None = None,
) -> Built:
    """Make the history and the row store `plan` describes (see the module's docstring)."""
    now_ms = now_ms or int(time.time() * 1000)
    start_ms = now_ms - int(plan.days * DAY_MS)
    window_ms = now_ms - int(plan.recent_hours * HOUR_MS)
    tail_ms = now_ms - MINUTE_MS
    tail = max(plan.recent_clicks // int(max(plan.recent_hours * 60, 1)), 1)
    window = plan.recent_clicks - tail
    old = plan.clicks - plan.recent_clicks
    if old <= 0 or window <= 0 or not start_ms < window_ms < tail_ms:
        raise ValueError("The history's old part, the window and its tail must each hold clicks and time.")

    def bar(label: str, total: int) -> Callable[[int], None]:
        return progress(label, total) if progress else (lambda n: None)

    seconds: dict[str, float] = {}
    began = time.monotonic()
    targets = [(c, streams[0], offers[0]) for c, streams, offers in ensure_campaigns(db, CAMPAIGNS)]
    fill_history(files, targets, old, start_ms, window_ms, bar("History (DuckDB)", old))
    seconds["history"] = round(time.monotonic() - began, 1)

    began = time.monotonic()
    bar("Rollups (campaign and country cubes)", 1)
    rollup_rows = fill_rollups(db, files)
    seconds["rollups"] = round(time.monotonic() - began, 1)
    with write_tx(db):
        HistoryStore(db.connection()).set_position(old)
        MetaStore(db.connection()).move_pruned_before(window_ms)
    keep_newest_old_click(db, files, old)

    began = time.monotonic()
    hours = (tail_ms - window_ms) / HOUR_MS
    generate_clicks(
        db,
        window,
        hours / 24,
        campaigns=CAMPAIGNS,
        seed=plan.seed,
        end_ms=tail_ms,
        zone_count=ZONES // SOURCES,
        on_progress=bar("Recent window (row store)", window),
    )
    seconds["window"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    appended = append_history(db, files)
    seconds["append"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    if plan.compact:
        compact(files, progress)
    seconds["compaction"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    cube(files, progress)
    seconds["cube"] = round(time.monotonic() - began, 1)
    generate_clicks(
        db,
        tail,
        MINUTE_MS / DAY_MS,
        campaigns=CAMPAIGNS,
        seed=plan.seed + 1,
        end_ms=now_ms,
        zone_count=ZONES // SOURCES,
    )

    began = time.monotonic()
    rng = random.Random(plan.seed)
    window_subids = [
        row[0]
        for row in db.execute_sql("SELECT subid FROM click WHERE id > ? ORDER BY id", (old,)).fetchall()
    ]
    wanted = rng.sample(window_subids, int(len(window_subids) * plan.conversions))
    late = old_subids(files, old, plan.old_conversions, plan.seed) if plan.old_conversions else []
    converted = convert(
        db, files, wanted + late, plan.seed, bar("Conversions (postbacks)", len(wanted) + len(late))
    )
    seconds["conversions"] = round(time.monotonic() - began, 1)
    seconds["rollup_rows"] = rollup_rows
    return Built(
        clicks=plan.clicks,
        history_clicks=appended.position,
        position=appended.position,
        tail=tail,
        conversions=converted,
        start_ms=start_ms,
        end_ms=now_ms,
        seconds=seconds,
    )


@dataclass
class Timing:
    name: str
    target_ms: float | None
    cold_ms: float
    median_ms: float
    max_ms: float
    # CPU time of the process (all its threads: Python's and DuckDB's two) for a warm run, median; on
    # a box shared with other work, what the report costs whatever the load (wall time there is
    # mostly waiting for a core).
    cpu_ms: float
    cold_cpu_ms: float
    rows: int
    clicks: int
    sources: str
    load: float  # The 1-minute load average when the runs ended.
    start_ms: int | None = None  # The (last) report's UTC bounds.
    end_ms: int | None = None


@dataclass(frozen=True)
class Paged:
    """A report timed in its page form, as the panel shows it (models/reporting/reportpage.py): the top
    rows by clicks, the row count and the totals over every row."""

    query: ReportQuery
    page: PageQuery = PageQuery(sort=(("clicks", True),), limit=1000)


def reports(campaign: int) -> list[tuple[str, float | None, tuple[ReportQuery | Paged, ...]]]:
    """(name, target ms, the queries one measurement runs): the issue's table, and beside two of its
    reports their page form."""
    one = {"campaign": (str(campaign),)}
    singles = (
        "campaign", "stream", "offer", "network", "traffic_source", "lander", "source", "country", "device",
        "os", "browser", "language", "sub_id_1", "sub_id_2", "sub_id_3", "sub_id_30", "referrer_domain",
        "domain", "day",
    )  # fmt: skip
    return [
        (
            "one campaign, last 30 days, by zone",
            200,
            (ReportQuery(group_by=("sub_id_1",), preset="last_30_days", filters=one),),
        ),
        *[
            (f"all campaigns, all time, by {name}", 2000, (ReportQuery(group_by=(name,), preset="all_time"),))
            for name in singles
        ],
        (
            "one campaign, last 30 days, by zone: the page (top 1,000 by clicks)",
            200,
            (Paged(ReportQuery(group_by=("sub_id_1",), preset="last_30_days", filters=one)),),
        ),
        (
            "country x zone, last 30 days",
            3000,
            (ReportQuery(group_by=("country", "sub_id_1"), preset="last_30_days"),),
        ),
        (
            "country x zone, last 30 days: the page (top 1,000 by clicks)",
            3000,
            (Paged(ReportQuery(group_by=("country", "sub_id_1"), preset="last_30_days")),),
        ),
        (
            "campaign list: today and last 30 days",
            100,
            (
                ReportQuery(group_by=("campaign",), preset="today"),
                ReportQuery(group_by=("campaign",), preset="last_30_days"),
            ),
        ),
        # Before the history, a report by zone read the row store's raw clicks: today's (all in the
        # window) both ways, for the cost of a click each way.
        (
            "before: by zone, today, raw rows",
            None,
            (ReportQuery(group_by=("sub_id_1",), preset="today", source="raw"),),
        ),
        (
            "after: by zone, today, the history",
            None,
            (ReportQuery(group_by=("sub_id_1",), preset="today", source="history"),),
        ),
    ]


# What the bench does not fill from the history: a timed report must not read it.
UNFILLED = frozenset((*CUBES["detail"][1].values(), CUBES["country"][1]["hour"]))


def time_reports(
    db: Database,
    files: HistoryFiles,
    repeat: int,
    campaign: int,
    *,
    only: str = "",
    on_report: Callable[[Timing], None] | None = None,
) -> list[Timing]:
    """Each report whose name has `only` in it (all of them with "")."""
    timings = []
    for name, target, queries in reports(campaign):
        if only not in name:
            continue
        elapsed, cpu = [], []
        for _ in range(repeat + 1):
            began, began_cpu = time.perf_counter(), time.process_time()
            made = [
                page_report(db, query.query, query.page, history=files)
                if isinstance(query, Paged)
                else run_report(db, query, history=files)
                for query in queries
            ]
            elapsed.append((time.perf_counter() - began) * 1000)
            cpu.append((time.process_time() - began_cpu) * 1000)
        sources = sorted({source for report in made for source in report.sources})
        if UNFILLED & set(sources):
            raise RuntimeError(f"{name} read the detail cube, which the bench does not fill: {sources}.")
        warm = elapsed[1:] or elapsed
        timing = Timing(
            name=name,
            target_ms=target,
            cold_ms=round(elapsed[0], 1),
            median_ms=round(statistics.median(warm), 1),
            max_ms=round(max(warm), 1),
            cpu_ms=round(statistics.median(cpu[1:] or cpu), 1),
            cold_cpu_ms=round(cpu[0], 1),
            rows=made[-1].row_count if made[-1].row_count is not None else len(made[-1].rows),
            clicks=made[-1].total["clicks"],
            sources="+".join(sources),
            load=round(os.getloadavg()[0], 2),
            start_ms=made[-1].start_ms,
            end_ms=made[-1].end_ms,
        )
        timings.append(timing)
        if on_report:
            on_report(timing)
    return timings


def biggest_campaign(files: HistoryFiles) -> int:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return conn.execute(
            "SELECT campaign_id FROM click GROUP BY campaign_id ORDER BY COUNT(*) DESC LIMIT 1"
        ).fetchone()[0]


def sizes(data_dir: Path, files: HistoryFiles, clicks: int) -> dict[str, float]:
    """The history on disk per click, and the row store's size and clicks."""
    history_bytes = sum(path.stat().st_size for path in files.path.parent.glob(files.path.name + "*"))
    row_bytes = sum(path.stat().st_size for path in data_dir.glob("lanner.db*"))
    return {
        "history_bytes": history_bytes,
        "history_bytes_per_click": round(history_bytes / max(clicks, 1), 1),
        "row_store_bytes": row_bytes,
    }


def row_store_clicks(db: Database) -> int:
    return db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0]


def write_built(data_dir: Path, built: Built) -> None:
    (data_dir / BUILT).write_text(json.dumps(asdict(built), indent=2))


def read_built(data_dir: Path) -> Built | None:
    path = data_dir / BUILT
    return Built(**json.loads(path.read_text())) if path.exists() else None
