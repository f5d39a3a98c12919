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

import html
import math
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workers.bench.errors import BenchError
from workers.bench.panelclient import (
    API_LISTS,
    CONVERSION_SHARE,
    DEEP_PAGES,
    EXPORTS,
    PANEL_PAGES,
    PanelClient,
    PanelFixture,
    pages_of,
    prepare_panel,
)
from workers.bench.panelexport import ExportTiming, time_export

TARGET_MS = 150.0  # Issue 16: every panel page and API list, median of 7, server side.
TARGETS_MS = {"/panel?period=last_30_days": 100.0}  # The dashboard for 30 days.
P95_TARGET_MS = 300.0  # Issue 29: every panel page's p95, server side.
# An export held whole would grow the worker by its size (a million clicks' CSV: ~200 MB); a stream by
# one chunk of rows (10,000 sorted: a few MB).
EXPORT_GROWTH_MB = 64.0
# The zone cost paste's preview (a POST: nothing is set): `{campaign}`'s zones, PASTE_LINES of them.
PASTE_PATH = "/panel/campaigns/{campaign}/costs/paste"
PASTE_LINES = 200
CSRF = re.compile(rb'name="csrf_token" value="([^"]+)"')
NEXT_PAGE = re.compile(rb'<a href="\?([^"]+)" rel="next">')
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
    p95_ms: float | None = None  # Nearest rank: of 7 runs, the highest but none (the 7th of 7).
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
    exports: list[ExportTiming] = field(default_factory=list)
    is_complete: bool = False

    def to_json(self) -> dict:
        return {
            "settings": self.settings,
            "database": self.database,
            "pages": [asdict(page) for page in self.pages],
            "exports": [asdict(export) for export in self.exports],
            "is_complete": self.is_complete,
        }


def time_path(
    client: PanelClient,
    path: str,
    template: str,
    kind: str,
    user: str,
    repeat: int,
    form: dict[str, str] | None = None,
) -> PageTiming:
    """One untimed request, then `repeat` timed ones (a POST of `form` if given); every answer must be
    a 200 with Server-Timing."""
    timing = PageTiming(template, kind, user, target_ms(template))
    server, cpu, wall = [], [], []
    for run in range(repeat + 1):
        answer = client.get(path) if form is None else client.post_form(path, form)
        if answer.status != 200 or answer.server_ms is None:
            raise BenchError(
                f"{'GET' if form is None else 'POST'} {path} as {user} answered {answer.status}"
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
    timing.p95_ms = round(sorted(server)[max(0, math.ceil(0.95 * len(server)) - 1)], 2)
    timing.max_ms = round(max(server), 2)
    timing.cpu_median_ms = round(statistics.median(cpu), 2)
    timing.client_median_ms = round(statistics.median(wall), 2)
    timing.is_met = timing.median_ms <= timing.target_ms
    return timing


def deep_path(client: PanelClient, path: str, pages: int) -> tuple[str, int]:
    """The path of the page `pages` "Older" links after `path` (fewer if the log ends first), and its
    number (1: `path` itself)."""
    base, number = path.partition("?")[0], 1
    for _ in range(pages):
        answer = client.get(path)
        found = NEXT_PAGE.search(answer.body)
        if answer.status != 200 or found is None:
            break
        path, number = f"{base}?{html.unescape(found.group(1).decode())}", number + 1
    return path, number


def paste_form(client: PanelClient, fixture: PanelFixture) -> dict[str, str]:
    """A preview of PASTE_LINES zones' costs over the last 7 days, with the page's CSRF token."""
    answer = client.get(fixture.path(PASTE_PATH))
    token = CSRF.search(answer.body)
    if answer.status != 200 or token is None:
        raise BenchError(f"The cost paste page answered {answer.status} without a form to post.")
    today = time.gmtime()
    since = time.gmtime(time.time() - 6 * 86_400)
    return {
        "csrf_token": token.group(1).decode(),
        "action": "preview",
        "parameter": "sub_id_1",
        "from": time.strftime("%Y-%m-%d", since),
        "to": time.strftime("%Y-%m-%d", today),
        "currency": "",
        "paste": "\n".join(f"{1000 + n}\t{(n % 17) + 0.5:.2f}" for n in range(PASTE_LINES)),
    }


def time_pages(
    port: int,
    fixture: PanelFixture,
    repeat: int,
    *,
    pages: tuple[str, ...] = PANEL_PAGES,
    api_lists: tuple[str, ...] = API_LISTS,
    deep_pages: tuple[tuple[str, int], ...] = DEEP_PAGES,
    users: tuple[str, ...] = TIMED_USERS,
    on_page: Callable[[PageTiming], None] | None = None,
) -> list[PageTiming]:
    """Every panel page as each of `users` (ADMIN_PAGES as admins) and a page deep down each sorted log
    of DEEP_PAGES, the cost paste's preview as admins, then every API list with the admin's key."""
    timings = []

    def timed(timing: PageTiming) -> None:
        timings.append(timing)
        if on_page:
            on_page(timing)

    for user in users:
        client = PanelClient(port)
        try:
            client.log_in(user, fixture.password)
            for template in pages_of(user, pages):
                timed(time_path(client, fixture.path(template), template, "panel", user, repeat))
            for template, depth in deep_pages:
                path, number = deep_path(client, fixture.path(template), depth)
                timed(time_path(client, path, f"{template} (page {number})", "panel", user, repeat))
            if pages_of(user, (), (PASTE_PATH,)):
                form = paste_form(client, fixture)
                path = fixture.path(PASTE_PATH)
                timed(time_path(client, path, f"POST {PASTE_PATH} (preview)", "panel", user, repeat, form))
        finally:
            client.close()
    client = PanelClient(port, api_key=fixture.api_key)
    try:
        for template in api_lists:
            timed(time_path(client, fixture.path(template), template, "api", "bench-admin", repeat))
    finally:
        client.close()
    return timings


def time_exports(
    port: int,
    serve_pid: int,
    fixture: PanelFixture,
    *,
    exports: tuple[str, ...] = EXPORTS,
    user: str = TIMED_USERS[0],
    on_export: Callable[[ExportTiming], None] | None = None,
) -> list[ExportTiming]:
    """Each export of `exports` once, whole, as `user` (an admin: every campaign's rows)."""
    timings = []
    client = PanelClient(port)
    try:
        client.log_in(user, fixture.password)
        for template in exports:
            timings.append(time_export(client, serve_pid, port, fixture.path(template), template, user))
            if on_export:
                on_export(timings[-1])
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
    exports: tuple[str, ...] = EXPORTS,
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
        fixture = prepare_panel(database_path, env, conversions=conversions, on_progress=reporter.progress)
        report.database = database_facts(database_path)
        report.settings = {
            "repeat": repeat,
            "timed_users": list(TIMED_USERS),
            "server_time": "Server-Timing header of the admin app (app.py ServerTiming)",
            "workers": workers,
            "data_dir": str(data_dir),
            "ids": fixture.ids,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average_at_start": [round(load, 2) for load in os.getloadavg()],
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
            reporter.message(f"Streaming {len(exports)} exports whole ...")

            def exported(export: ExportTiming) -> None:
                report.exports.append(export)
                reporter.message(
                    f"  {export.path}: {export.rows:,} rows in {export.total_s} s, the admin worker "
                    f"{export.rss_before_mb} MB before, {export.rss_peak_mb} MB at most"
                )

            assert stack.serve is not None
            time_exports(
                stack.admin_port, stack.serve.process.pid, fixture, exports=exports, on_export=exported
            )
        report.settings["load_average_at_end"] = [round(load, 2) for load in os.getloadavg()]
        report.is_complete = True
    return report


def format_pages(report: PanelPagesReport) -> list[str]:
    from workers.bench.harness import _aligned, _cell

    header = [
        "kind",
        "user",
        "path",
        "median ms",
        "p95 ms",
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
            _cell(page.p95_ms),
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
            f"median and p95 of {report.settings.get('repeat')} after one untimed request; load average "
            f"{report.settings.get('load_average_at_start')} at the start, "
            f"{report.settings.get('load_average_at_end')} at the end."
        )
    if report.exports:
        lines.append("")
        header = [
            "export",
            "rows",
            "MB",
            "first byte ms",
            "total s",
            "rows/s",
            "RSS before MB",
            "RSS peak MB",
        ]
        rows = [
            [
                export.path,
                f"{export.rows:,}",
                f"{export.bytes / 1e6:.1f}",
                _cell(export.first_byte_ms),
                _cell(export.total_s),
                f"{export.rows_per_s:,.0f}",
                _cell(export.rss_before_mb),
                _cell(export.rss_peak_mb),
            ]
            for export in report.exports
        ]
        lines.extend(_aligned(header, rows))
    return lines
