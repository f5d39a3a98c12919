"""The web panel as the bench sees it: the pages and API lists, the users and their fixture, a
logged-in HTTP client, and `PanelLoad`, the side load of the `panel-load` scenario.

`PanelLoad` is one thread per panel user, each logged in with its own session, requesting PANEL_PAGES
round and round, as fast as the answers come, while k6 drives clicks at the web workers. Threads rather
than k6 VUs: five users are little work for a client, the login form and the server-timing header are
a few lines here, and k6's one process stays the clicks' alone, so its latencies are the clicks'.

Below the harness (harness.py runs the side load in its ladder) and below `lanner bench panel-pages`
(panel.py times the same pages with the same client); it imports neither.

The page lists are data: a page another area adds is one line here. `{campaign}`, `{offer}` and
`{subid}` in a path are the busiest campaign, its first offer and the newest click.
"""

from __future__ import annotations

import http.client
import math
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workers.bench.errors import BenchError

PANEL_PAGES: tuple[str, ...] = (
    "/panel",
    "/panel?period=yesterday",
    "/panel?period=last_7_days",
    "/panel?period=last_30_days",
    "/panel/campaigns",
    "/panel/campaigns?period=last_30_days",
    "/panel/campaigns?period=last_30_days&status=all&q=gen",
    "/panel/campaigns?period=last_30_days&sort=-clicks,name",
    "/panel/campaigns.csv?period=last_30_days&sort=-clicks,name",
    "/panel/campaigns/{campaign}",
    "/panel/campaigns/{campaign}?period=last_30_days",
    "/panel/reports?period=last_30_days",
    "/panel/reports?g1=day&period=last_30_days",
    "/panel/reports?g1=country&g2=offer&period=last_30_days",
    "/panel/reports?g1=campaign&period=last_30_days&row={campaign}",
    "/panel/reports.csv?period=last_30_days",
    "/panel/clicks",
    "/panel/clicks?campaign={campaign}",
    "/panel/clicks/{subid}",
    # Sorted logs: a top-N sort of what the filters select (docs/panel.md, "Sorted logs").
    "/panel/clicks?campaign={campaign}&period=yesterday&sort=country,-time",
    "/panel/conversions",
    "/panel/conversions?campaign={campaign}",
    "/panel/conversions?period=last_30_days&sort=status,-time",
    "/panel/offers",
    "/panel/offers?period=last_30_days&sort=-clicks,name",
    "/panel/offers.csv?period=last_30_days&sort=-clicks,name",
    "/panel/offers/{offer}",
    "/panel/sources",
    "/panel/sources?period=last_30_days&sort=-clicks",
    "/panel/sources.csv?period=last_30_days&sort=-clicks",
    "/panel/networks",
    "/panel/networks.csv?period=last_30_days",
    "/panel/landers",
    "/panel/landers.csv?sort=-streams",
    "/panel/postbacks",
    "/panel/rates",
    "/panel/account",
)
# Pages some roles may not open (users, the audit log, imports): timed as the admin, left out for the
# others. tests/test_bench_panel.py fails when a panel page without a path field is in neither list.
ADMIN_PAGES: tuple[str, ...] = (
    "/panel/campaigns/new",
    "/panel/conversions/import",
    "/panel/postback-log",
    "/panel/postback-log?log=deliveries&sort=state,-time",
    "/panel/users",
    "/panel/audit",
    "/panel/audit?period=last_30_days",
    "/panel/audit.csv?period=last_30_days",
    "/panel/status",
    "/panel/domains",
    "/panel/platforms",
    "/panel/rules",
    "/panel/alerts",
    "/panel/offers/bulk",
    "/panel/campaigns/{campaign}/costs/paste",
    "/panel/campaigns/{campaign}/streams/bulk",
)
# No session yet (the login), or no page: the logs' CSVs stream every row of their
# filters (a million rows in about 40 s, its memory flat), an export's time is its size's, not a page's.
NOT_TIMED = (
    "/panel/login",
    "/panel/conversions.csv",
    "/panel/clicks.csv",
    "/panel/postback-log.csv",
    "/panel/labels.txt",
)
# Every GET of /api/v1 that answers a collection (tests/test_bench_panel.py checks none is missing).
API_LISTS: tuple[str, ...] = (
    "/api/v1/campaigns",
    "/api/v1/campaigns/{campaign}/streams",
    "/api/v1/campaigns/{campaign}/domains",
    "/api/v1/campaigns/{campaign}/tags",
    "/api/v1/offers",
    "/api/v1/landers",
    "/api/v1/domains",
    "/api/v1/costs",
    "/api/v1/sources",
    "/api/v1/sources/catalogue",
    "/api/v1/networks",
    "/api/v1/network-templates",
    "/api/v1/postback-targets",
    "/api/v1/status-maps",
    "/api/v1/postbacks",
    "/api/v1/postback-deliveries",
    "/api/v1/conversions",
    "/api/v1/conversions?campaign={campaign}",
    "/api/v1/clicks",
    "/api/v1/clicks?campaign={campaign}",
    "/api/v1/clicks?campaign={campaign}&country=DE",
    "/api/v1/reports?group=campaign&preset=last_30_days",
    "/api/v1/reports/series?group=campaign&preset=last_30_days&row={campaign}",
    "/api/v1/status",
    "/api/v1/currency/rates",
    "/api/v1/currency/rates?history=1",
    "/api/v1/streams/{stream}/split-test",
    "/api/v1/labels",
    "/api/v1/column-sets",
    "/api/v1/rules",
    "/api/v1/rule-actions",
    "/api/v1/platform-connections",
    "/api/v1/spend-connections",
    "/api/v1/alert-channels",
    "/api/v1/alerts",
    "/api/v1/ops-checks",
)
# Collections under an object the bench's database has none of (a rule, a platform connection, a
# label): a rule's dry run is an evaluation, timed by scripts/bench_rules.py, not a list.
API_NOT_TIMED: tuple[str, ...] = (
    "/api/v1/rules/{rule}/run",
    "/api/v1/platform-connections/{connection}/log",
    "/api/v1/spend-connections/{connection}/log",
    "/api/v1/labels/export",
)
CONVERSION_SHARE = 0.02
TIMEOUT = 60.0

# The panel's users: (name, role, hides money). Buyers see the campaigns shared with them.
PANEL_USERS: tuple[tuple[str, str, bool], ...] = (
    ("bench-admin", "admin", False),
    ("bench-buyer", "buyer", False),
    ("bench-buyer2", "buyer", False),
    ("bench-viewer", "viewer", False),
    ("bench-frugal", "buyer", True),
)
API_KEY_LABEL = "lanner bench panel-pages"
SERVER_TIMING = re.compile(r"\bapp;dur=([0-9.]+)")
SERVER_CPU = re.compile(r"\bcpu;dur=([0-9.]+)")


@dataclass
class PanelFixture:
    """What the clients need: the users' password, the admin's API key, the ids the paths name."""

    password: str
    api_key: str
    ids: dict[str, str]
    users: tuple[str, ...] = tuple(name for name, _, _ in PANEL_USERS)

    def path(self, template: str) -> str:
        return template.format(**self.ids)


def prepare_panel(
    database_path: Path, *, conversions: float, on_progress: Callable[[str, int, int], None] | None = None
) -> PanelFixture:
    """Conversions for `conversions` of the clicks, the deferred steps done, the panel users (with a
    new password each run) and a read key for the admin; on the database `lanner db migrate` made."""
    from models.accounts.apikeys import create_api_key, list_api_keys, revoke_api_key
    from models.accounts.sharing import campaign_shares, share_campaign
    from models.accounts.users import add_user, find_user, set_password
    from models.admin.services import list_campaigns
    from models.migrations.deferred import run_deferred
    from models.store.database import open_database
    from workers.bench.reports import add_conversions, row_count

    progress = on_progress or (lambda label, done, total: None)
    db = open_database(database_path, autocheckpoint=True)
    try:
        # The rollup backfill of a database generated just now: reports read rollups, not raw clicks.
        run_deferred(db, on_progress=lambda s: progress(s.name, s.done_units, s.total_units), pause=0)
        clicks = row_count(db, "click")
        wanted = max(int(clicks * conversions) - row_count(db, "conversion"), 0)
        done = [0]

        def converted(count: int) -> None:
            done[0] += count
            progress("Conversions", done[0], wanted)

        add_conversions(db, conversions, on_progress=converted)
        password = secrets.token_urlsafe(18)
        for name, role, hides_money in PANEL_USERS:
            if find_user(db, name) is None:
                add_user(db, name, role, password, hides_money=hides_money)
            else:
                set_password(db, name, password)
        ids = path_ids(db)
        campaigns = [campaign.id for campaign in list_campaigns(db, include_archived=True)]
        # bench-buyer sees every other campaign (and may edit them), the others every third; all of
        # them the one the paths name, so that every user's pages open it.
        busiest = int(ids["campaign"])
        for name, chosen, may_edit in (
            ("bench-buyer", campaigns[::2], True),
            ("bench-buyer2", campaigns[1::3], False),
            ("bench-frugal", campaigns[::3], False),
            ("bench-viewer", campaigns[::3], False),
        ):
            for campaign_id in {*chosen, busiest}:
                if name not in {user for user, _ in campaign_shares(db, campaign_id)}:
                    share_campaign(db, campaign_id, name, may_edit=may_edit)
        for old in list_api_keys(db):  # Only the hash is kept: last run's key is of no use now.
            if old.label == API_KEY_LABEL and not old.is_revoked:
                revoke_api_key(db, old.id)
        _, api_key = create_api_key(db, "bench-admin", "read", label=API_KEY_LABEL)
    finally:
        db.close()
    return PanelFixture(password, api_key, ids)


SQL_BUSIEST_CAMPAIGN = (
    "SELECT campaign_id, offer_id, stream_id FROM click WHERE id > (SELECT MAX(id) FROM click) - 100000 "
    "GROUP BY campaign_id ORDER BY COUNT(*) DESC LIMIT 1"
)
SQL_NEWEST_SUBID = "SELECT subid FROM click WHERE campaign_id = ? ORDER BY id DESC LIMIT 1"


def path_ids(db) -> dict[str, str]:
    """What `{campaign}`, `{offer}`, `{stream}` and `{subid}` stand for: the campaign with the most of
    the last 100,000 clicks (the biggest a buyer opens), an offer and a stream of it, its newest click."""
    row = db.execute_sql(SQL_BUSIEST_CAMPAIGN).fetchone()
    if row is None:
        raise BenchError("The database has no clicks to open pages on.")
    subid = db.execute_sql(SQL_NEWEST_SUBID, (row[0],)).fetchone()
    return {"campaign": str(row[0]), "offer": str(row[1]), "stream": str(row[2]), "subid": subid[0]}


# -- HTTP -------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    server_ms: float | None  # From Server-Timing; None when the answer had none.
    cpu_ms: float | None
    client_ms: float
    size: int


class PanelClient:
    """One user's HTTP/1.1 connection to the admin worker, with their session cookie or API key."""

    def __init__(self, port: int, *, api_key: str = "") -> None:
        self.port = port
        self.headers = {"X-Api-Key": api_key} if api_key else {}
        self.connection: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        for attempt in (1, 2):  # Once more on a fresh connection: the idle worker may have closed it.
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
            started = time.perf_counter()
            try:
                self.connection.request(method, path, body=body, headers={**self.headers, **(headers or {})})
                response = self.connection.getresponse()
                data = response.read()
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt == 2:
                    raise
                continue
            elapsed = (time.perf_counter() - started) * 1000
            if (response.getheader("Connection") or "").lower() == "close":
                self.close()
            return response, data, elapsed
        raise AssertionError("unreachable")

    def log_in(self, name: str, password: str) -> None:
        """The login form, as a browser posts it; keeps the session cookie for every later request."""
        form = urllib.parse.urlencode({"name": name, "password": password}).encode()
        response, _, _ = self.request(
            "POST", "/panel/login", form, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        cookie = (response.getheader("Set-Cookie") or "").split(";")[0]
        if response.status != 303 or not cookie:
            raise BenchError(f"Logging in as {name} answered {response.status}, not 303 with a cookie.")
        self.headers["Cookie"] = cookie

    def get(self, path: str) -> Answer:
        response, data, elapsed = self.request("GET", path)
        timing = response.getheader("Server-Timing") or ""
        wall, cpu = SERVER_TIMING.search(timing), SERVER_CPU.search(timing)
        return Answer(
            response.status,
            float(wall.group(1)) if wall else None,
            float(cpu.group(1)) if cpu else None,
            elapsed,
            len(data),
        )

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def pages_of(
    user: str, pages: tuple[str, ...] = PANEL_PAGES, admin_pages: tuple[str, ...] = ADMIN_PAGES
) -> tuple[str, ...]:
    """The pages `user` (one of PANEL_USERS) may open: the admin pages too for an admin."""
    is_admin = any(name == user and role == "admin" for name, role, _ in PANEL_USERS)
    return pages + admin_pages if is_admin else pages


# -- panel-load ---------------------------------------------------------------------------------


class PanelLoad:
    """One thread per panel user cycling through the pages they may open (pages_of) with their own
    session while a step runs."""

    def __init__(self, admin_port: int, fixture: PanelFixture, *, users: int = 5) -> None:
        self.admin_port, self.fixture = admin_port, fixture
        self.names = [fixture.users[n % len(fixture.users)] for n in range(users)]
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.client_ms: list[float] = []
        self.server_ms: list[float] = []
        self.errors: dict[str, int] = {}
        self.threads = [
            threading.Thread(target=self._run, args=(name, n), name=f"panel-user-{n}", daemon=True)
            for n, name in enumerate(self.names)
        ]

    def __enter__(self) -> PanelLoad:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=TIMEOUT + 5)

    def _error(self, kind: str) -> None:
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def _run(self, name: str, offset: int) -> None:
        paths = [self.fixture.path(page) for page in pages_of(name)]
        client = PanelClient(self.admin_port)
        try:
            while not self.stop_event.is_set():
                try:
                    client.log_in(name, self.fixture.password)
                    break
                except (BenchError, OSError, http.client.HTTPException):
                    self._error("login")
                    self.stop_event.wait(0.5)
            index = offset  # Users start at different pages, as people do.
            while not self.stop_event.is_set():
                path = paths[index % len(paths)]
                index += 1
                try:
                    answer = client.get(path)
                except (OSError, http.client.HTTPException):
                    self._error("network")
                    self.stop_event.wait(0.5)
                    continue
                if answer.status != 200:
                    self._error(str(answer.status))
                    continue
                with self.lock:
                    self.client_ms.append(answer.client_ms)
                    if answer.server_ms is not None:
                        self.server_ms.append(answer.server_ms)
        finally:
            client.close()

    def summary(self) -> dict:
        with self.lock:
            client, server, errors = list(self.client_ms), list(self.server_ms), dict(self.errors)
        return {
            "panel_users": len(self.names),
            "panel_pages": len(client),
            "panel_errors": sum(errors.values()),
            "panel_errors_by_kind": errors,
            "panel_p50_ms": _quantile(client, 0.5),
            "panel_p99_ms": _quantile(client, 0.99),
            "panel_server_p50_ms": _quantile(server, 0.5),
            "panel_server_p99_ms": _quantile(server, 0.99),
        }


def _quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank quantile (what a p99 of a few hundred answers can honestly say)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))], 1)
