"""Lanner's settings: the only module that reads the environment.

One declarative table (`SETTINGS`) drives the environment variables, `lanner settings`, and the
generated settings reference (docs/reference/settings.md, `make docs`); a test fails when it is stale.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: str
    parse: Callable[[str], Any]
    help: str
    # A secret is never printed (`lanner settings` says only whether it is set) and may come from a file
    # named by LANNER_<NAME>_FILE instead, so it stays out of the process environment and unit files.
    is_secret: bool = False

    @property
    def env(self) -> str:
        return "LANNER_" + self.name.upper()


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _positive(value: str) -> float:
    number = float(value)
    if not 0 < number < float("inf"):
        raise ValueError("must be a positive number")
    return number


def _ip_list(value: str) -> tuple[str, ...]:
    """Addresses and CIDR networks, each checked as models/lookups/iplist.py will read it."""
    from models.lookups.iplist import parse_entry

    entries = _csv(value)
    for entry in entries:
        parse_entry(entry)  # ValueError naming the entry.
    return entries


def _hosts(value: str) -> tuple[str, ...]:
    return tuple(host.lower() for host in _csv(value))


def _aliases(value: str) -> dict[str, int]:
    """Parse `param=N,param2=M` into {param: N}; N is a sub_id slot, 1..SUB_ID_SLOTS."""
    from models.choices import SUB_ID_SLOTS

    aliases: dict[str, int] = {}
    for pair in _csv(value):
        param, _, slot = pair.partition("=")
        if not param or not slot.isdigit() or not 1 <= int(slot) <= SUB_ID_SLOTS:
            raise ValueError(f"sub_id alias {pair!r} is not of the form param=N with N in 1..{SUB_ID_SLOTS}")
        aliases[param.strip()] = int(slot)
    return aliases


def _seconds(value: str) -> float:
    seconds = float(value)
    if not 0 <= seconds < float("inf"):
        raise ValueError("must be a number of seconds, 0 or more")
    return seconds


def _switch(value: str) -> bool:
    if value not in ("on", "off"):
        raise ValueError("it must be `on` or `off`")
    return value == "on"


GEO_SOURCES = ("", "maxmind", "dbip")
GEO_DEFAULT_EDITIONS = {"maxmind": ("GeoLite2-City",), "dbip": ("dbip-city-lite",)}
_EDITION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def _geo_source(value: str) -> str:
    value = value.strip().lower()
    if value not in GEO_SOURCES:
        raise ValueError("it must be empty (the bundled country data), maxmind or dbip")
    return value


def _geo_editions(value: str) -> tuple[str, ...]:
    """Edition names (GeoLite2-City, GeoIP2-ISP, dbip-asn-lite...): at most one country/city edition."""
    editions = _csv(value)
    for edition in editions:
        if not set(edition) <= _EDITION_CHARS:
            raise ValueError(f"edition {edition!r} may hold only letters, digits and dashes")
    if sum(1 for edition in editions if is_location_edition(edition)) > 1:
        raise ValueError("name at most one country or city edition; routing reads one location file")
    return editions


def is_location_edition(edition: str) -> bool:
    """A country or city edition: the file routing reads for country/region/city."""
    lowered = edition.lower()
    return "country" in lowered or "city" in lowered


def _base_url(value: str) -> str:
    value = value.strip().rstrip("/")
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("it must be an http:// or https:// URL")
    return value


SQLITE_URL = "sqlite:///"


POSTGRES_URLS = ("postgresql://", "postgres://")


def _database_url(value: str) -> str:
    """`sqlite:///PATH` (playhouse.db_url's form: sqlite:////abs/path for an absolute one), a libpq
    `postgresql://…` URL, or empty."""
    value = value.strip()
    if not value or (value.startswith(SQLITE_URL) and len(value) > len(SQLITE_URL)):
        return value
    if value.startswith(POSTGRES_URLS) and len(value) > len("postgresql://"):
        return value
    raise ValueError(
        "it must be sqlite:///PATH (relative), sqlite:////PATH (absolute) or postgresql://USER@HOST/DATABASE"
    )


def _node_name(value: str) -> str:
    value = value.strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", value):
        raise ValueError("it must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return value


REDIS_URLS = ("redis://", "rediss://", "unix://")


def _redis_url(value: str) -> str:
    """redis-py's URL forms, or empty (no Redis: the single box)."""
    value = value.strip()
    if value and not (value.startswith(REDIS_URLS) and len(value) > len("unix://")):
        raise ValueError("it must be redis://HOST:PORT/DB, rediss://… (TLS) or unix:///PATH/redis.sock")
    return value


def _days(value: str) -> int:
    days = int(value)
    if days < 0:
        raise ValueError("a number of days cannot be negative")
    return days


def _rules_interval(value: str) -> int:
    minutes = int(value)
    if minutes and (minutes < 0 or 60 % minutes):
        raise ValueError("must be 0 or a divisor of 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)")
    return minutes


_AGE_UNITS_MS = {"h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def _retention(value: str) -> int:
    """`30d`, `4w`, `720h` or a bare number of days, as milliseconds; `off` or 0 is 0 (off)."""
    text = value.strip().lower()
    if text in ("off", "0", "0d", "0h", "0w"):
        return 0
    match = re.fullmatch(r"(\d+)\s*([hdw]?)", text)
    if not match:
        raise ValueError("an age such as 30d, 4w or 720h, or `off`")
    return int(match.group(1)) * _AGE_UNITS_MS[match.group(2) or "d"]


def _currency(value: str) -> str:
    code = value.strip().upper()
    if len(code) != 3 or not code.isalpha() or not code.isascii():
        raise ValueError("a currency is a three-letter code such as USD or EUR")
    return code


ECB_DAILY_URL = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"


def _feed_url(value: str) -> str:
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("the rate feed is an http:// or https:// URL")
    return value


def _spend_window(value: str) -> int:
    days = int(value)
    if not 1 <= days <= 90:
        raise ValueError("from 1 to 90 days")
    return days


def _api_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("an ad platform's API is an http:// or https:// URL")
    return value.rstrip("/")


def _range_sources(value: str) -> tuple[tuple[str, str], ...]:
    """`name=URL,name=URL`: the published crawler lists `lanner bots update` fetches (a name may repeat)."""
    sources = []
    for item in _csv(value):
        name, _, url = item.partition("=")
        name, url = name.strip(), url.strip()
        if not name or not url.startswith(("http://", "https://")):
            raise ValueError(f"{item!r} is not of the form name=https://...")
        sources.append((name, url))
    return tuple(sources)


# The platforms' own lists (Meta publishes none: its AS routes, mirrored by lord-alfred/ipranges).
BOT_RANGE_SOURCES = (
    ("openai-gptbot", "https://openai.com/gptbot.json"),
    ("openai-searchbot", "https://openai.com/searchbot.json"),
    ("openai-chatgpt-user", "https://openai.com/chatgpt-user.json"),
    ("google-googlebot", "https://developers.google.com/static/search/apis/ipranges/googlebot.json"),
    ("google-special", "https://developers.google.com/static/search/apis/ipranges/special-crawlers.json"),
    (
        "google-user-triggered",
        "https://developers.google.com/static/search/apis/ipranges/user-triggered-fetchers.json",
    ),
    (
        "google-user-triggered-google",
        "https://developers.google.com/static/search/apis/ipranges/user-triggered-fetchers-google.json",
    ),
    (
        "google-user-triggered-agents",
        "https://developers.google.com/static/search/apis/ipranges/user-triggered-agents.json",
    ),
    ("bing-bingbot", "https://www.bing.com/toolbox/bingbot.json"),
    ("apple-applebot", "https://search.developer.apple.com/applebot.json"),
    ("duckduckgo-duckduckbot", "https://duckduckgo.com/duckduckbot.json"),
    ("perplexity-bot", "https://www.perplexity.ai/perplexitybot.json"),
    ("perplexity-user", "https://www.perplexity.ai/perplexity-user.json"),
    ("commoncrawl-ccbot", "https://index.commoncrawl.org/ccbot.json"),
    ("ahrefs-crawler", "https://api.ahrefs.com/v3/public/crawler-ip-ranges"),
    ("meta", "https://raw.githubusercontent.com/lord-alfred/ipranges/main/facebook/ipv4_merged.txt"),
    ("meta", "https://raw.githubusercontent.com/lord-alfred/ipranges/main/facebook/ipv6_merged.txt"),
)


def _bytes(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive whole number of bytes")
    return number


def _count(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive whole number")
    return number


def _spool_full_answer(value: str) -> str:
    if value not in ("503", "fallback"):
        raise ValueError("it must be `503` or `fallback`")
    return value


SETTINGS: tuple[Setting, ...] = (
    Setting("data_dir", "./var", str, "Directory holding the database, the Huey queue file and the spool."),
    Setting(
        "database_url",
        "",
        _database_url,
        "The database: sqlite:///PATH, relative to the working directory (sqlite:////PATH for an absolute "
        "one), to keep it on another disk than the spool; postgresql://USER:PASSWORD@HOST/DATABASE (libpq's "
        "URL) for cluster mode (docs/SCALING.md); empty: sqlite:///DATA_DIR/lanner.db.",
    ),
    Setting(
        "node_id",
        "main",
        _node_name,
        "This node's name in cluster mode: each host on one PostgreSQL lands its own spool under its own "
        "name (docs/SCALING.md). Fixed once its spool exists.",
    ),
    Setting("bind", "127.0.0.1:8080", str, "Where `lanner serve` listens: HOST:PORT or unix:/PATH."),
    Setting("workers", "2", int, "Number of bjoern worker processes (one per core is fastest)."),
    Setting(
        "admin_bind",
        "",
        str,
        "Where the report API's own worker listens (niced, so reports never hold a click worker); empty: a "
        "unix socket, NAME-admin.sock next to a unix LANNER_BIND, else DATA_DIR/admin.sock; `off`: the web "
        "workers answer it.",
    ),
    Setting(
        "admin_idle_seconds",
        "1800",
        _seconds,
        "Seconds the admin worker may sit idle before it exits; the next request to its socket starts it "
        "again (PHP-FPM's `ondemand` pool), so an install nobody is reading reports on keeps no process for "
        "them. Half an hour keeps it warm through a working session's pauses (a cold start is 0.1-1.5 s, "
        "a warm page tens of ms); 0 keeps it running.",
    ),
    Setting(
        "admin_idle_priority",
        "on",
        _switch,
        "`on`: the admin worker runs at idle CPU priority (SCHED_IDLE, in a session of its own whose "
        "autogroup is at nice 19), on CPU time nothing else wants; `off`: at normal priority, for a "
        "machine kept busy by other work (a test run) where it would wait minutes.",
    ),
    Setting(
        "panel_session_hours",
        "12",
        _positive,
        "Hours a web panel session lasts since its last request (each request moves it, at most once a "
        "minute); logging out ends it at once.",
    ),
    Setting(
        "max_requests",
        "0",
        int,
        "Recycle a worker after this many requests (0 = never), like PHP-FPM's pm.max_requests.",
    ),
    Setting("graceful_timeout", "10", float, "Seconds a draining worker may take before it is killed."),
    Setting(
        "keepalive_timeout",
        "20",
        float,
        "Seconds a TCP client connection may send and receive nothing before its worker closes it "
        "(sooner near the open-file limit); nginx closes its own, after 10 s.",
    ),
    Setting(
        "trusted_proxies",
        "127.0.0.1,::1",
        _ip_list,
        "Peers whose real-IP header is believed (nginx, or a CDN's CIDR ranges). Clicks over a unix socket "
        "always trust it.",
    ),
    Setting("real_ip_header", "X-Real-IP", str, "Header the trusted proxy sets to the visitor's IP."),
    Setting("fallback_url", "", str, "Where unknown campaign aliases go; empty answers 404."),
    Setting(
        "spool_full_answer",
        "503",
        _spool_full_answer,
        "What a click gets while its spool line cannot be written (a full disk): `503` (with Retry-After) "
        "or `fallback` (a 302 to LANNER_FALLBACK_URL, without a subid).",
    ),
    Setting("uniqueness_hours", "24", float, "Window of the global uniqueness scope (IP + user agent)."),
    Setting(
        "debounce_seconds",
        "2",
        float,
        "A repeat of the same IP + UA on the same campaign within this many seconds reuses its subid.",
    ),
    Setting(
        "sub_id_aliases",
        "",
        _aliases,
        "Extra query parameters captured into sub_id slots, e.g. `aff_sub=1,zoneid=2`.",
    ),
    Setting(
        "max_click_cost",
        "1000",
        _positive,
        "Largest `cost=` a click URL may carry; a larger (or unreadable) one is ignored and the campaign's "
        "cost model prices the click, so one visitor cannot poison the reports.",
    ),
    Setting("flush_interval", "0.25", float, "Seconds between spool flushes by the Huey consumer."),
    Setting(
        "worker_nice",
        "10",
        int,
        "Niceness of `lanner worker`: background work yields the CPU to the web workers under load.",
    ),
    Setting("spool_segment_bytes", str(64 * 1024 * 1024), int, "Size at which a spool segment is sealed."),
    Setting(
        "backlog_alert_seconds",
        "60",
        float,
        "Age of the oldest click not in the database yet at which `/healthz` reports degraded, the "
        "web workers log a warning and the operations alert spool_backlog fires (the flusher is stopped, "
        "stuck or behind).",
    ),
    Setting("log_level", "INFO", str, "Python logging level for every Lanner process."),
    Setting(
        "task_log_level",
        "WARNING",
        str,
        "Logging level of Huey's own loggers in `lanner worker`: INFO logs two lines per task run "
        "(one per spool flush).",
    ),
    Setting(
        "geo_database",
        "",
        str,
        "A MaxMind/DB-IP `.mmdb` file for country/region/city; empty uses DATA_DIR/geo/country.mmdb "
        "(built by `lanner geo build` from the bundled country data).",
    ),
    Setting(
        "geo_source",
        "",
        _geo_source,
        "Where `lanner geo update` (and `lanner worker`, daily, once the data is 30 days old) fetches "
        "current geo data: `maxmind` (GeoLite2/GeoIP2, needs an account id and licence key), `dbip` (DB-IP's "
        "free monthly lite files) or empty (the bundled country data only).",
    ),
    Setting(
        "geo_editions",
        "",
        _geo_editions,
        "The editions to fetch, comma-separated; empty: GeoLite2-City (maxmind) or dbip-city-lite (dbip). "
        "One country/city edition replaces the location file; others (GeoLite2-ASN, GeoIP2-ISP, "
        "GeoIP2-Connection-Type, dbip-asn-lite, GeoIP2-Enterprise) go to DATA_DIR/geo/EDITION.mmdb for the "
        "isp, connection and carrier filters.",
    ),
    Setting("maxmind_account_id", "", str, "Your MaxMind account id (for LANNER_GEO_SOURCE=maxmind)."),
    Setting(
        "maxmind_license_key",
        "",
        str,
        "Your MaxMind licence key (secret: never printed; LANNER_MAXMIND_LICENSE_KEY_FILE may name a file "
        "holding it).",
        is_secret=True,
    ),
    Setting(
        "geo_update_url",
        "",
        _base_url,
        "Base URL to fetch geo data from instead of MaxMind's or DB-IP's own (a mirror; tests).",
    ),
    Setting(
        "bot_ips",
        "",
        _ip_list,
        "IPv4/IPv6 addresses and CIDRs whose clicks are flagged as bots (e.g. your own office, scanners).",
    ),
    Setting(
        "anonymize_ip",
        "off",
        _switch,
        "`on`: keep visitors' IP addresses with the last octet (IPv4) or the last 80 bits (IPv6) zeroed, in "
        "the spool, the click table and the `{ip}` macro; geo, uniqueness and the bot check by IP still see "
        "the full address (see Privacy).",
    ),
    Setting(
        "bot_ranges",
        "",
        str,
        "The published crawler networks file (a click from one is a bot): empty uses DATA_DIR/bots/"
        "ranges.json once `lanner bots update` has written it, the copy shipped with Lanner until then; "
        "`off` checks no ranges.",
    ),
    Setting(
        "bot_range_sources",
        ",".join(f"{name}={url}" for name, url in BOT_RANGE_SOURCES),
        _range_sources,
        "The lists `lanner bots update` fetches, `name=URL` comma-separated (a name may repeat: its "
        "networks are the union); the default is the platforms' own lists (Google, Bing, OpenAI, Apple, "
        "DuckDuckGo, Perplexity, Common Crawl, Ahrefs) and Meta's routes.",
    ),
    Setting(
        "bot_ranges_update_days",
        "0",
        _days,
        "`lanner worker` runs `lanner bots update` when the ranges file is this many days old (checked "
        "daily; 7 = weekly); 0 never fetches them.",
    ),
    Setting(
        "postback_park_hours",
        "24",
        float,
        "How long a postback whose click is not in the database yet waits for it before it expires.",
    ),
    Setting(
        "postback_log_days",
        "30",
        _days,
        "Days the postback log and the refused-postback counters are kept (pruned hourly by `lanner "
        "worker` and by `lanner prune`); 0 keeps them forever. Parked postbacks stay until they expire.",
    ),
    Setting(
        "rules_interval_minutes",
        "5",
        _rules_interval,
        "Minutes between runs of the automation rules (`lanner rule`) by `lanner worker`: 1 to 60, a "
        "divisor of 60 (5 runs them at :00, :05 ...); 0 never runs them (a dry run and `lanner rule run` "
        "still do).",
    ),
    Setting(
        "postback_retry_seconds",
        "30",
        float,
        "First wait before an outbound postback that failed is sent again; it doubles each time (max 6 h).",
    ),
    Setting(
        "report_currency",
        "USD",
        _currency,
        "The currency reports are in: payouts and costs are converted into it when recorded. Adopted by "
        "`lanner db migrate` while the database is empty; fixed once it holds data.",
    ),
    Setting(
        "exchange_rate_url",
        ECB_DAILY_URL,
        _feed_url,
        "The rate feed `lanner worker` reads when it starts and daily at 16:07 UTC: the ECB's reference "
        'rates (XML) or a JSON feed ({"base": "EUR", "rates": {"USD": 1.08, ...}, "date": "2026-12-04"}); '
        "rates are crossed into the report currency, which the feed must quote. Empty: rates only from "
        "`lanner currency rate set`, the API and the panel.",
    ),
    Setting(
        "meta_api_url",
        "https://graph.facebook.com",
        _api_url,
        "Where Meta's Conversions API is (its Graph API host); a test points it at a local fake.",
    ),
    Setting(
        "tiktok_api_url",
        "https://business-api.tiktok.com",
        _api_url,
        "Where TikTok's Events API is; a test points it at a local fake.",
    ),
    Setting(
        "google_ads_api_url",
        "https://googleads.googleapis.com",
        _api_url,
        "Where the Google Ads API is (offline click conversions); a test points it at a local fake.",
    ),
    Setting(
        "propellerads_api_url",
        "https://ssp-api.propellerads.com",
        _api_url,
        "Where PropellerAds' advertiser API (v5) is, for spend; a test points it at a local fake.",
    ),
    Setting(
        "spend_sync_minutes",
        "60",
        _rules_interval,
        "Minutes between the spend syncs (`lanner platform spend`) by `lanner worker`: 1 to 60, a divisor "
        "of 60; 0 never runs them (`lanner platform spend sync` still does).",
    ),
    Setting(
        "spend_window_days",
        "5",
        _spend_window,
        "Days of spend each sync reads again, today included (1 to 90): what a platform corrects within "
        "them replaces what the sync wrote before.",
    ),
    Setting(
        "telegram_api_url",
        "https://api.telegram.org",
        _api_url,
        "Where Telegram's Bot API is (alert channels post to BASE/bot<token>/sendMessage); a test points it "
        "at a local fake.",
    ),
    Setting(
        "slack_webhook_url",
        "https://hooks.slack.com",
        _api_url,
        "Where Slack's incoming webhooks are: a Slack alert channel's webhook URL must start with it; a test "
        "points it at a local fake.",
    ),
    Setting(
        "alert_retry_seconds",
        "30",
        _positive,
        "First wait before an alert that could not be sent is sent again; it doubles each time (max 6 h), "
        "or follows the channel's Retry-After.",
    ),
    Setting(
        "alert_check_minutes",
        "5",
        _rules_interval,
        "Minutes between the operations checks by `lanner worker` (spool backlog, consumer, disk, "
        "certificates, conversion APIs): a divisor of 60; 0 never runs them (`lanner alert check` does).",
    ),
    Setting(
        "alert_consumer_seconds",
        "120",
        _positive,
        "Seconds without a flusher heartbeat (this box's, or any node's in the database) after which an "
        "operations alert says the consumer is down.",
    ),
    Setting(
        "alert_disk_free_percent",
        "10",
        _positive,
        "Free space (percent of the data directory's file system) under which an operations alert says the "
        "disk is nearly full.",
    ),
    Setting(
        "alert_cert_days",
        "14",
        _positive,
        "Days before a domain's certificate expires at which an operations alert says so (certbot renews "
        "at 30: this one means renewal is failing).",
    ),
    Setting(
        "alert_platform_failures",
        "3",
        _count,
        "Failed attempts within the last hour, with none sent since, after which an operations alert says a "
        "conversion API (a platform connection) is failing.",
    ),
    Setting(
        "tracker_hosts",
        "localhost,127.0.0.1,[::1]",
        _hosts,
        "Host names that answer campaign URLs as a domain does once `lanner domain` has any (this box's own "
        "name, loopback for health checks and smoke clicks): comma-separated.",
    ),
    Setting(
        "acme_server",
        "https://acme-v02.api.letsencrypt.org/directory",
        str,
        "The ACME directory `lanner domain` gets certificates from (certbot's --server): Let's Encrypt by "
        "default; its staging directory, or a test server, for trials.",
    ),
    Setting(
        "acme_email",
        "",
        str,
        "The address the ACME server writes to about expiring certificates; empty: certbot registers "
        "without one.",
    ),
    Setting(
        "certbot_dir",
        "",
        str,
        "certbot's directory (its config/, work/ and logs/ under it: accounts, certificates, renewal "
        "settings); empty: DATA_DIR/certbot.",
    ),
    Setting(
        "acme_webroot",
        "",
        str,
        "Where certbot writes its http-01 challenges and nginx serves them from "
        "(/.well-known/acme-challenge/ on every host); empty: DATA_DIR/acme. nginx's user must read it.",
    ),
    Setting(
        "nginx_reload",
        "systemctl reload nginx",
        str,
        "The command that renders the site again (`lanner nginx site --saved`, as root) and makes nginx "
        "load it and renewed certificates (`lanner domain`, the daily renewal).",
    ),
    Setting(
        "redis_url",
        "",
        _redis_url,
        "Cluster mode's Redis (docs/SCALING.md): the click state every node shares (debounce, caps, "
        "uniqueness) and Huey's queue (any node's consumer sends any node's outbound postbacks; each "
        "database sweep runs on one node per tick): redis://HOST:PORT/DB, rediss://… or unix:///PATH; "
        "empty: none, each box alone with its queue in DATA_DIR/huey.db (the default).",
    ),
    Setting(
        "redis_prefix",
        "lanner:",
        str,
        "Prefix of every Redis key Lanner writes, so installs can share one Redis.",
    ),
    Setting(
        "redis_timeout",
        "0.05",
        _positive,
        "Seconds a click waits for Redis (connect or answer) before it goes on with what its node knows; "
        "Redis is asked again after a second.",
    ),
    Setting(
        "lander_max_bytes",
        str(20 * 1024 * 1024),
        _bytes,
        "Largest zip a local lander may be uploaded as (bytes, compressed); a bigger one is refused before "
        "it is read.",
    ),
    Setting(
        "lander_max_unpacked_bytes",
        str(100 * 1024 * 1024),
        _bytes,
        "Largest total a local lander's files may unpack to (bytes, as written, whatever the zip claims): "
        "a zip bomb stops here.",
    ),
    Setting("lander_max_files", "2000", _count, "Most files a local lander's zip may hold."),
    Setting(
        "history_memory_limit",
        "256MB",
        str,
        "DuckDB's memory limit for the columnar click history (DATA_DIR/history/clicks.duckdb) in each "
        "process that opens it: a size such as 256MB or 1GB.",
    ),
    Setting(
        "raw_retention",
        "30d",
        _retention,
        "How long raw clicks stay in the row store (SQLite or PostgreSQL) once the columnar history holds "
        "them: 30d, 4w, 720h; `off` (or 0) keeps them until `lanner prune`. Never less than the largest "
        "uniqueness window plus a day; older clicks are read from the history (docs/analytics.md).",
    ),
    Setting(
        "history_node",
        "",
        str,
        "Cluster mode: the LANNER_NODE_ID of the one node whose worker keeps the columnar click history "
        "(docs/analytics.md); empty: none in cluster mode. Without Redis the box keeps it.",
    ),
)


@dataclasses.dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str
    node_id: str
    bind: str
    workers: int
    admin_bind: str
    admin_idle_seconds: float
    admin_idle_priority: bool
    panel_session_hours: float
    max_requests: int
    graceful_timeout: float
    keepalive_timeout: float
    trusted_proxies: tuple[str, ...]
    real_ip_header: str
    fallback_url: str
    spool_full_answer: str
    uniqueness_hours: float
    debounce_seconds: float
    sub_id_aliases: dict[str, int]
    max_click_cost: float
    flush_interval: float
    worker_nice: int
    spool_segment_bytes: int
    backlog_alert_seconds: float
    log_level: str
    task_log_level: str
    geo_database: str
    geo_source: str
    geo_editions: tuple[str, ...]
    maxmind_account_id: str
    maxmind_license_key: str = dataclasses.field(repr=False)
    geo_update_url: str
    bot_ips: tuple[str, ...]
    anonymize_ip: bool
    bot_ranges: str
    bot_range_sources: tuple[tuple[str, str], ...]
    bot_ranges_update_days: int
    postback_park_hours: float
    postback_log_days: int
    rules_interval_minutes: int
    postback_retry_seconds: float
    report_currency: str
    exchange_rate_url: str
    meta_api_url: str
    tiktok_api_url: str
    google_ads_api_url: str
    propellerads_api_url: str
    spend_sync_minutes: int
    spend_window_days: int
    telegram_api_url: str
    slack_webhook_url: str
    alert_retry_seconds: float
    alert_check_minutes: int
    alert_consumer_seconds: float
    alert_disk_free_percent: float
    alert_cert_days: float
    alert_platform_failures: int
    tracker_hosts: tuple[str, ...]
    acme_server: str
    acme_email: str
    certbot_dir: str
    acme_webroot: str
    nginx_reload: str
    redis_url: str
    redis_prefix: str
    redis_timeout: float
    lander_max_bytes: int
    lander_max_unpacked_bytes: int
    lander_max_files: int
    history_memory_limit: str
    raw_retention: int  # Milliseconds; 0: off.
    history_node: str

    @property
    def uses_postgres(self) -> bool:
        return self.database_url.startswith(POSTGRES_URLS)

    @property
    def database_location(self) -> Path | str:
        """What models/store/database.py's open_database takes: the SQLite file, or the PostgreSQL URL."""
        return self.database_url if self.uses_postgres else self.database_path

    @property
    def database_shown(self) -> str:
        """The database as messages name it: the file, or the URL without its password."""
        if not self.uses_postgres:
            return str(self.database_path)
        return re.sub(r"^(\w+://[^:@/]*):[^@/]*@", r"\1:(secret)@", self.database_url)

    @property
    def database_path(self) -> Path:
        """The SQLite file (for what only a file has: backups, its -wal, file checks)."""
        if self.uses_postgres:
            raise ValueError("This install's database is PostgreSQL, not a SQLite file.")
        return Path(self.database_url[len(SQLITE_URL) :])

    @property
    def history_path(self) -> Path:
        """The columnar click history (DuckDB), beside its lock file history.lock."""
        return self.data_dir / "history" / "clicks.duckdb"

    @property
    def keeps_history(self) -> bool:
        """Whether this node's worker appends to the columnar history: one box always; in cluster mode
        only LANNER_HISTORY_NODE (its DuckDB file is this node's own, the row store's position is shared)."""
        return not self.redis_url or (bool(self.history_node) and self.history_node == self.node_id)

    @property
    def queue_path(self) -> Path:
        return self.data_dir / "huey.db"

    @property
    def spool_dir(self) -> Path:
        return self.data_dir / "spool"

    @property
    def landers_dir(self) -> Path:
        """Where local landers' folders live (served at /landers/: by nginx, or by the app without it)."""
        return self.data_dir / "landers"

    @property
    def postback_park_ms(self) -> int:
        return int(self.postback_park_hours * 3_600_000)

    @property
    def admin_address(self) -> str:
        """The admin pool's bind, or "" when the web workers serve the API (`off`)."""
        if self.admin_bind == "off":
            return ""
        if self.admin_bind:
            return self.admin_bind
        if self.bind.startswith("unix:"):
            path = Path(self.bind[5:])
            return f"unix:{path.with_name(path.stem + '-admin' + path.suffix)}"
        # Not a second TCP port: port + 1 collided with client ports in TIME_WAIT.
        return f"unix:{self.data_dir / 'admin.sock'}"

    @property
    def geo_path(self) -> Path:
        """The geo database routing uses: the configured one, else the one `lanner geo build` makes."""
        return Path(self.geo_database) if self.geo_database else self.data_dir / "geo" / "country.mmdb"

    @property
    def geo_update_editions(self) -> tuple[str, ...]:
        """What `lanner geo update` fetches: the configured editions, else the source's default."""
        if not self.geo_source:
            return ()
        return self.geo_editions or GEO_DEFAULT_EDITIONS[self.geo_source]

    def geo_edition_path(self, edition: str) -> Path:
        """Where an edition's file lives: a country/city edition is the location file routing reads."""
        return self.geo_path if is_location_edition(edition) else self.data_dir / "geo" / f"{edition}.mmdb"

    @property
    def geo_network_paths(self) -> tuple[Path, ...]:
        """The ISP / ASN / connection-type files the isp, connection and carrier filters read."""
        editions = self.geo_editions or self.geo_update_editions
        return tuple(self.geo_edition_path(e) for e in editions if not is_location_edition(e))

    @property
    def bot_ranges_path(self) -> Path | None:
        """The crawler ranges file `lanner bots update` writes and processes watch; None when `off`."""
        if self.bot_ranges == "off":
            return None
        return Path(self.bot_ranges) if self.bot_ranges else self.data_dir / "bots" / "ranges.json"

    @property
    def certbot_path(self) -> Path:
        return Path(self.certbot_dir) if self.certbot_dir else self.data_dir / "certbot"

    @property
    def acme_webroot_path(self) -> Path:
        return Path(self.acme_webroot) if self.acme_webroot else self.data_dir / "acme"

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read every `LANNER_*` variable once; raise ValueError naming the bad one."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = environ.get(setting.env, setting.default)
        if setting.is_secret and not raw and environ.get(setting.env + "_FILE"):
            try:
                raw = Path(environ[setting.env + "_FILE"]).read_text().strip()
            except OSError as exc:
                raise ValueError(f"{setting.env}_FILE cannot be read: {exc.strerror}") from None
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            shown = "(secret)" if setting.is_secret else repr(raw)
            raise ValueError(f"{setting.env}={shown} is invalid: {exc}") from None
    values["data_dir"] = Path(values["data_dir"]).resolve()
    # Resolved once, like the data dir: a process that changes directory keeps the same file.
    if not values["database_url"].startswith(POSTGRES_URLS):
        path = Path(values["database_url"][len(SQLITE_URL) :]) if values["database_url"] else None
        values["database_url"] = SQLITE_URL + str(
            path.resolve() if path else values["data_dir"] / "lanner.db"
        )
    if values["spool_full_answer"] == "fallback" and not values["fallback_url"]:
        raise ValueError("LANNER_SPOOL_FULL_ANSWER=fallback needs LANNER_FALLBACK_URL to send visitors to.")
    if (
        values["geo_editions"]
        and not values["geo_source"]
        and any(is_location_edition(edition) for edition in values["geo_editions"])
    ):
        raise ValueError("LANNER_GEO_EDITIONS names a country/city edition but LANNER_GEO_SOURCE is not set.")
    return Settings(**values)


URL_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^/@\s]+@")


def shown_settings(settings: Settings) -> list[dict[str, str]]:
    """Every setting as `lanner settings` and the panel's status page show it: env name, value, default,
    help; a secret only as set or not, a password inside a URL as ***."""

    def shown(setting: Setting) -> str:
        value = getattr(settings, setting.name)
        if setting.is_secret:
            return "(set)" if value else "(not set)"
        return URL_PASSWORD.sub(r"\1***@", str(value))

    return [{"env": s.env, "value": shown(s), "default": s.default, "help": s.help} for s in SETTINGS]
