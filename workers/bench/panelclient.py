"""The web panel as the bench sees it: the pages and API lists, the users and their fixture, a
logged-in HTTP client, and `PanelLoad`, the side load of the `panel-load` scenario.

`PanelLoad` is one thread per panel user, each logged in with its own session, requesting PANEL_PAGES
round and round, as fast as the answers come, while k6 drives clicks at the web workers. Threads rather
than k6 VUs: five users are little work for a client, the login form and the server-timing header are
a few lines here, and k6's one process stays the clicks' alone, so its latencies are the clicks'.

Below the harness (harness.py runs the side load in its ladder) and below `lanner bench panel-pages`
(panel.py times the same pages with the same client); it imports neither.

The page lists are data: a page another area adds is one line here. `{campaign}`, `{offer}`, `{stream}`,
`{subid}` and `{conversion}` in a path are the busiest campaign, an offer and a stream of it, its newest
click and conversion; `{user}` a buyer; `{lander}`, `{rule}`, `{platform}` ... the objects panelobjects.py
makes (path_ids, make_panel_objects).
"""

from __future__ import annotations

import datetime
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
    # Sorted logs: a top-N sort of what the filters select (docs/panel.md, "Sorted logs"), from the
    # columnar history the bench appends (prepare_panel) as an install's worker would have; DEEP_PAGES
    # times a page far down the same orders.
    "/panel/clicks?campaign={campaign}&period=yesterday&sort=country,-time",
    "/panel/clicks?sort=country,-time",
    "/panel/clicks?period=last_30_days&sort=-campaign,os",
    "/panel/conversions",
    "/panel/conversions?campaign={campaign}",
    "/panel/conversions?period=last_30_days&sort=status,-time",
    "/panel/conversions/{conversion}",
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
    # The zones of a campaign with their labels (the push-to-source button's page), and a label list.
    "/panel/reports?g1=sub_id_1&f.campaign={campaign}&period=last_7_days",
    "/panel/labels.txt?campaign={campaign}&param=sub_id_1&label=blacklist",
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
    "/panel/campaigns/{campaign}/costs",
    "/panel/campaigns/{campaign}/streams/bulk",
    "/panel/campaigns/{campaign}/streams/new",
    "/panel/campaigns/{campaign}/streams/{stream}",
    "/panel/campaigns/{campaign}/simulate",
    # The bench's own lander, source and network (panelobjects.py) are on no campaign a buyer shares.
    "/panel/landers/{lander}",
    "/panel/sources/{source}",
    "/panel/networks/{network}",
    "/panel/domains/{domain}",
    "/panel/platforms/{platform}",
    "/panel/platforms/spend/{spend}",
    "/panel/rules/{rule}",
    "/panel/users/{user}",
)
# A page far down a sorted log: `panel-pages` follows its "Older" link this many times (as the
# admin and as a buyer), then times the page it reached (keyset: it should cost what the first does).
DEEP_PAGES: tuple[tuple[str, int], ...] = (
    ("/panel/clicks?sort=country,-time", 20),
    ("/panel/conversions?period=last_30_days&sort=status,-time", 20),
)
# The logs' CSVs stream every row of their filters: `panel-pages` times each once as the admin, whole,
# with the rows, bytes and the admin worker's peak RSS meanwhile (panelexport.py). `{export_from}` to
# `{export_to}`: the 10 days before yesterday, about a million clicks of the 3.2 M over 30 days.
EXPORTS: tuple[str, ...] = (
    "/panel/clicks.csv?from={export_from}&to={export_to}",
    "/panel/clicks.csv?from={export_from}&to={export_to}&sort=country,-time",
    "/panel/conversions.csv?period=last_30_days",
    "/panel/postback-log.csv",
)
# No session yet (the login); the exports are EXPORTS's, timed whole rather than as pages.
NOT_TIMED = ("/panel/login", *(path.partition("?")[0] for path in EXPORTS))
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
    database_path: Path,
    env: dict[str, str],
    *,
    conversions: float,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> PanelFixture:
    """Conversions for `conversions` of the clicks, the deferred steps done, the columnar history
    appended, the panel users (with a new password each run), the objects the later pages show
    (panelobjects.py) and a read key for the admin; on the database `lanner db migrate` made. `env`:
    the bench's Lanner environment (harness.py `lanner_env`), whose settings say where the history is."""
    from models.accounts.apikeys import create_api_key, list_api_keys, revoke_api_key
    from models.accounts.sharing import campaign_shares, share_campaign
    from models.accounts.users import add_user, find_user, set_password
    from models.admin.services import list_campaigns
    from models.migrations.deferred import run_deferred
    from models.reporting.history import HistoryFiles, append_history
    from models.store.database import open_database
    from settings import load_settings
    from workers.bench.panelobjects import make_panel_objects
    from workers.bench.reports import add_conversions, row_count

    progress = on_progress or (lambda label, done, total: None)
    settings = load_settings(env)
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
        # The worker's minutely append, all at once (the real appender, chunk by chunk): the sorted logs
        # and the reports by sub id read the history an install that ran a while has.
        append_history(
            db,
            HistoryFiles.of(settings),
            on_chunk=lambda copied, position, mark: progress("History", position, mark),
        )
        password = secrets.token_urlsafe(18)
        for name, role, hides_money in PANEL_USERS:
            if find_user(db, name) is None:
                add_user(db, name, role, password, hides_money=hides_money)
            else:
                set_password(db, name, password)
        ids = path_ids(db)
        ids |= make_panel_objects(db, settings, int(ids["campaign"]), find_user(db, "bench-admin").id)
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
SQL_NEWEST_CONVERSION = "SELECT MAX(id) FROM conversion WHERE campaign_id = ?"
SQL_USER = "SELECT id FROM app_user WHERE name = ?"
EXPORT_DAYS = 10


def path_ids(db) -> dict[str, str]:
    """What `{campaign}`, `{offer}`, `{stream}`, `{subid}`, `{conversion}` and `{user}` stand for: the
    campaign with the most of the last 100,000 clicks (the biggest a buyer opens), an offer and a stream
    of it, its newest click and conversion, a buyer; `{export_from}`/`{export_to}`: EXPORTS's days."""
    row = db.execute_sql(SQL_BUSIEST_CAMPAIGN).fetchone()
    if row is None:
        raise BenchError("The database has no clicks to open pages on.")
    subid = db.execute_sql(SQL_NEWEST_SUBID, (row[0],)).fetchone()
    conversion = db.execute_sql(SQL_NEWEST_CONVERSION, (row[0],)).fetchone()
    user = db.execute_sql(SQL_USER, ("bench-buyer",)).fetchone()
    if conversion[0] is None or user is None:
        raise BenchError("The busiest campaign has no conversion, or there is no bench-buyer.")
    today = datetime.datetime.now(datetime.UTC).date()  # The admin and buyers see UTC days.
    return {
        "campaign": str(row[0]),
        "offer": str(row[1]),
        "stream": str(row[2]),
        "subid": subid[0],
        "conversion": str(conversion[0]),
        "user": str(user[0]),
        "export_from": (today - datetime.timedelta(days=EXPORT_DAYS + 1)).isoformat(),
        "export_to": (today - datetime.timedelta(days=2)).isoformat(),
    }


# -- HTTP -------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    server_ms: float | None  # From Server-Timing; None when the answer had none.
    cpu_ms: float | None
    client_ms: float
    size: int
    body: bytes = b""


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
        return self._answer(*self.request("GET", path))

    def post_form(self, path: str, fields: dict[str, str]) -> Answer:
        """A form posted as the panel's pages post it (urlencoded, with the session's cookie)."""
        body = urllib.parse.urlencode(fields).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return self._answer(*self.request("POST", path, body, headers))

    def _answer(self, response, data: bytes, elapsed: float) -> Answer:
        timing = response.getheader("Server-Timing") or ""
        wall, cpu = SERVER_TIMING.search(timing), SERVER_CPU.search(timing)
        return Answer(
            response.status,
            float(wall.group(1)) if wall else None,
            float(cpu.group(1)) if cpu else None,
            elapsed,
            len(data),
            data,
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
