"""Load that runs beside the click ladder of `lanner bench clicks`: heavy reports, concurrent postbacks.

`ReportLoad` requests heavy reports from the admin worker back to back for the whole step (the
"report-load" scenario: click latency must not suffer). `PostbackLoad` fires batches of 4, 16 and
32 concurrent identical postbacks (one subid, one tid) at clicks that have landed, during the
step; afterwards `check` counts the conversions per (subid, tid): exactly one each, or it says
how many are missing or duplicated. Both talk to 127.0.0.1 only, with timeouts.
"""

from __future__ import annotations

import http.client
import sqlite3
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from models.store.meta import MetaStore

HEAVY_REPORTS = (
    "/api/report?group=campaign,offer,country,device,os&preset=all_time",
    "/api/report?group=day,campaign&preset=last_30_days",
    "/api/report?group=campaign&preset=last_30_days&timezone=Europe/Berlin",
    # What only the columnar history answers (issue 28): a source parameter, a referrer, two levels.
    "/api/report?group=sub_id_1&preset=all_time",
    "/api/report?group=referrer_domain&preset=all_time",
    "/api/report?group=country,sub_id_2&preset=last_30_days",
)
BATCH_SIZES = (4, 16, 32)
TIMEOUT = 60.0


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def read_meta(database_path: Path, key: str) -> str:
    connection = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True)
    try:
        return MetaStore(connection).get(key) or ""
    finally:
        connection.close()


class ReportLoad:
    """One client requesting heavy reports back to back while a step runs."""

    def __init__(self, admin_port: int, api_key: str) -> None:
        self.admin_port, self.api_key = admin_port, api_key
        self.stop_event = threading.Event()
        self.elapsed_ms: list[float] = []
        self.errors = 0
        self.thread = threading.Thread(target=self._run, name="report-load", daemon=True)

    def __enter__(self) -> ReportLoad:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(timeout=TIMEOUT + 5)

    def _run(self) -> None:
        index = 0
        while not self.stop_event.is_set():
            path = HEAVY_REPORTS[index % len(HEAVY_REPORTS)]
            index += 1
            started = time.perf_counter()
            try:
                status = _get(self.admin_port, path, {"X-Api-Key": self.api_key})
            except OSError:
                status = 0
            if status == 200:
                self.elapsed_ms.append((time.perf_counter() - started) * 1000)
            else:
                self.errors += 1
                self.stop_event.wait(0.5)

    def summary(self) -> dict:
        done = self.elapsed_ms
        return {
            "reports": len(done),
            "report_errors": self.errors,
            "report_p50_ms": round(statistics.median(done), 1) if done else None,
            "report_max_ms": round(max(done), 1) if done else None,
        }


class PostbackLoad:
    """Batches of concurrent identical postbacks at landed clicks, once a second during a step."""

    def __init__(self, port: int, postback_key: str, database_path: Path) -> None:
        self.port, self.key, self.database_path = port, postback_key, database_path
        self.stop_event = threading.Event()
        self.sent: list[tuple[str, str]] = []  # (subid, tid) of each batch
        self.answers: dict[int, int] = {}
        self.thread = threading.Thread(target=self._run, name="postback-load", daemon=True)
        self.pool = ThreadPoolExecutor(max(BATCH_SIZES))

    def __enter__(self) -> PostbackLoad:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(timeout=TIMEOUT + 5)
        self.pool.shutdown(wait=True)

    def _landed_subids(self, count: int, after_id: int) -> list[tuple[int, str]]:
        with sqlite3.connect(f"file:{self.database_path}?mode=ro", uri=True, timeout=5) as connection:
            return connection.execute(
                "SELECT id, subid FROM click WHERE id > ? ORDER BY id LIMIT ?", (after_id, count)
            ).fetchall()

    def _run(self) -> None:
        with sqlite3.connect(f"file:{self.database_path}?mode=ro", uri=True, timeout=5) as connection:
            after_id = connection.execute("SELECT COALESCE(MAX(id), 0) FROM click").fetchone()[0]
        batch = 0
        while not self.stop_event.wait(1.0):
            size = BATCH_SIZES[batch % len(BATCH_SIZES)]
            landed = self._landed_subids(1, after_id)
            if not landed:
                continue
            after_id, subid = landed[0]
            tid = f"bench-{batch}"
            batch += 1
            path = f"/{self.key}/postback?subid={subid}&tid={tid}&status=sale&payout=3"
            statuses = list(self.pool.map(lambda _, path=path: self._post(path), range(size)))
            self.sent.append((subid, tid))
            for status in statuses:
                self.answers[status] = self.answers.get(status, 0) + 1

    def _post(self, path: str) -> int:
        try:
            return _get(self.port, path)
        except OSError:
            return 0

    def check(self) -> dict:
        """Conversions per (subid, tid) sent: each must be exactly one."""
        missing = duplicated = 0
        with sqlite3.connect(f"file:{self.database_path}?mode=ro", uri=True, timeout=5) as connection:
            for subid, tid in self.sent:
                count = connection.execute(
                    "SELECT COUNT(*) FROM conversion WHERE subid = ? AND tid = ?", (subid, tid)
                ).fetchone()[0]
                missing += count == 0
                duplicated += max(count - 1, 0)
        return {
            "postback_batches": len(self.sent),
            "postbacks": sum(self.answers.values()),
            "postbacks_not_200": sum(n for status, n in self.answers.items() if status != 200),
            "conversions_missing": missing,
            "conversions_duplicated": duplicated,
        }
