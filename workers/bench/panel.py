"""`lanner bench panel-pages`: the web panel and the admin API on a big database.

`panel-pages` prepares a data dir (clicks over 30 days topped up with `lanner generate clicks`, a
share of them converted through the postback path, the panel's users, an API key), starts a real
`lanner serve` with its admin worker, logs in through the login form and requests every path of
PANEL_PAGES (with the session cookie) and API_LISTS (with the API key) `repeat` times each. The
time reported is the admin app's own, from the `Server-Timing` header its middleware sets (app.py,
`ServerTiming`): routing, the queries and the rendered body, without the socket or the client.
The client's time is kept beside it.

The pages, the users, the client and the `panel-load` side load are panelclient.py's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.bench.errors import BenchError
from workers.bench.panelclient import (
    API_LISTS,
    CONVERSION_SHARE,
    PANEL_PAGES,
    PanelClient,
    PanelFixture,
    pages_of,
    prepare_panel,
)

TARGET_MS = 150.0  # Issue 16: every panel page and API list, median of 7, server side.
TARGETS_MS = {"/panel?period=last_30_days": 100.0}  # The dashboard for 30 days.
REPEAT = 7
PREFILL = 3_200_000
TIMED_USERS = ("bench-admin", "bench-buyer")  # Whose sessions `panel-pages` times the pages with.


def target_ms(path: str) -> float:
    return TARGETS_MS.get(path, TARGET_MS)


SQL_FACTS = (
    "SELECT (SELECT COUNT(*) FROM click), (SELECT COUNT(*) FROM click WHERE created_at >= ?), "
    "(SELECT COUNT(*) FROM conversion), (SELECT COUNT(*) FROM campaign), (SELECT COUNT(*) FROM offer), "
    "(SELECT COUNT(*) FROM app_user)"
)


def database_facts(database_path: Path) -> dict:
    """Rows the pages read, for the report's heading (read-only, like the harness's other counts)."""
    from workers.bench.harness import connect_read_only

    since = int((time.time() - 30 * 86_400) * 1000)
    connection = connect_read_only(database_path)
    try:
        row = connection.execute(SQL_FACTS, (since,)).fetchone()
    finally:
        connection.close()
    names = ("clicks", "clicks_last_30_days", "conversions", "campaigns", "offers", "users")
    return dict(zip(names, row, strict=True)) | {"size_mb": round(database_path.stat().st_size / 1e6, 1)}


# -- panel-pages --------------------------------------------------------------------------------


@dataclass
class PageTiming:
    path: str  # As listed (the template).
    kind: str  # "panel" or "api"
    user: str
    target_ms: float
    median_ms: float | None = None  # Server side (Server-Timing), over the timed runs.
    max_ms: float | None = None
    first_ms: float | None = None  # The untimed first request (cold caches).
    cpu_median_ms: float | None = None  # The admin worker's CPU time (Server-Timing `cpu`).
    client_median_ms: float | None = None
    runs: int = 0
    status: int = 0  # The last answer's.
    size: int = 0
    is_met: bool = False


@dataclass
class PanelPagesReport:
    settings: dict = field(default_factory=dict)
    database: dict = field(default_factory=dict)
    pages: list[PageTiming] = field(default_factory=list)
    is_complete: bool = False

    def to_json(self) -> dict:
        return {
            "settings": self.settings,
            "database": self.database,
            "pages": [asdict(page) for page in self.pages],
            "is_complete": self.is_complete,
        }


def time_path(client: PanelClient, path: str, template: str, kind: str, user: str, repeat: int) -> PageTiming:
    """One untimed request, then `repeat` timed ones; every answer must be a 200 with Server-Timing."""
    timing = PageTiming(template, kind, user, target_ms(template))
    server, cpu, wall = [], [], []
    for run in range(repeat + 1):
        answer = client.get(path)
        if answer.status != 200 or answer.server_ms is None:
            raise BenchError(
                f"GET {path} as {user} answered {answer.status}"
                + ("" if answer.server_ms is not None else " without Server-Timing")
                + "; every page of the bench must answer 200."
            )
        timing.status, timing.size = answer.status, answer.size
        if run == 0:
            timing.first_ms = round(answer.server_ms, 2)
            continue
        server.append(answer.server_ms)
        cpu.append(answer.cpu_ms or 0.0)
        wall.append(answer.client_ms)
    timing.runs = len(server)
    timing.median_ms = round(statistics.median(server), 2)
    timing.max_ms = round(max(server), 2)
    timing.cpu_median_ms = round(statistics.median(cpu), 2)
    timing.client_median_ms = round(statistics.median(wall), 2)
    timing.is_met = timing.median_ms <= timing.target_ms
    return timing


def time_pages(
    port: int,
    fixture: PanelFixture,
    repeat: int,
    *,
    pages: tuple[str, ...] = PANEL_PAGES,
    api_lists: tuple[str, ...] = API_LISTS,
    users: tuple[str, ...] = TIMED_USERS,
    on_page: Callable[[PageTiming], None] | None = None,
) -> list[PageTiming]:
    """Every panel page as each of `users` (ADMIN_PAGES as admins), then every API list with the
    admin's key."""
    timings = []
    for user in users:
        client = PanelClient(port)
        try:
            client.log_in(user, fixture.password)
            for template in pages_of(user, pages):
                timings.append(time_path(client, fixture.path(template), template, "panel", user, repeat))
                if on_page:
                    on_page(timings[-1])
        finally:
            client.close()
    client = PanelClient(port, api_key=fixture.api_key)
    try:
        for template in api_lists:
            timings.append(time_path(client, fixture.path(template), template, "api", "bench-admin", repeat))
            if on_page:
                on_page(timings[-1])
    finally:
        client.close()
    return timings


def run_panel_pages(
    data_dir: Path,
    report: PanelPagesReport,
    reporter,
    *,
    clicks: int = PREFILL,
    conversions: float = CONVERSION_SHARE,
    repeat: int = REPEAT,
    workers: int = 2,
    keep: bool = False,
) -> PanelPagesReport:
    """Prepare the data dir, start `lanner serve`, time every page; fills `report` as it goes."""
    from workers.bench.harness import (
        LannerStack,
        lanner_env,
        prepare_database,
        run_work_dir,
        sigterm_as_interrupt,
    )

    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = lanner_env(data_dir)
    database_path = data_dir / "lanner.db"
    with sigterm_as_interrupt(), run_work_dir("lanner-panel-", keep, reporter) as work_dir:
        prepare_database(env, database_path, clicks, "unique", reporter)
        reporter.message("Preparing conversions, users and an API key ...")
        fixture = prepare_panel(database_path, conversions=conversions, on_progress=reporter.progress)
        report.database = database_facts(database_path)
        report.settings = {
            "repeat": repeat,
            "timed_users": list(TIMED_USERS),
            "server_time": "Server-Timing header of the admin app (app.py ServerTiming)",
            "workers": workers,
            "data_dir": str(data_dir),
            "ids": fixture.ids,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        with LannerStack(env, work_dir, workers, with_worker=False) as stack:
            pages = sum(len(pages_of(user)) for user in TIMED_USERS)
            reporter.message(
                f"Timing {pages} pages of {len(TIMED_USERS)} users and {len(API_LISTS)} "
                f"API lists, {repeat} times each ..."
            )

            def timed(page: PageTiming) -> None:
                report.pages.append(page)
                reporter.message(f"  {page.kind} {page.user} {page.path}: {page.median_ms} ms")

            time_pages(stack.admin_port, fixture, repeat, on_page=timed)
        report.is_complete = True
    return report


def format_pages(report: PanelPagesReport) -> list[str]:
    from workers.bench.harness import _aligned, _cell

    header = [
        "kind",
        "user",
        "path",
        "median ms",
        "max ms",
        "first ms",
        "cpu ms",
        "client ms",
        "KB",
        "target",
        "",
    ]
    rows = [
        [
            page.kind,
            page.user.removeprefix("bench-"),
            page.path,
            _cell(page.median_ms),
            _cell(page.max_ms),
            _cell(page.first_ms),
            _cell(page.cpu_median_ms),
            _cell(page.client_median_ms),
            f"{page.size / 1024:.1f}",
            f"<= {page.target_ms:g}",
            "met" if page.is_met else "MISS",
        ]
        for page in report.pages
    ]
    lines = list(_aligned(header, rows))
    facts = report.database
    if facts:
        lines.append("")
        lines.append(
            f"{facts.get('clicks', 0):,} clicks "
            f"({facts.get('clicks_last_30_days', 0):,} in the last 30 days), "
            f"{facts.get('conversions', 0):,} conversions, {facts.get('campaigns', 0)} campaigns; "
            "server time from Server-Timing (cpu: the admin worker's CPU time), "
            f"median of {report.settings.get('repeat')} after one untimed request."
        )
    return lines
