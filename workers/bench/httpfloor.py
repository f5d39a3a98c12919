"""A web worker's CPU per request, floor by floor (issue 28's CPU a click): one bjoern worker serving
(a) `wsgi`, a bare WSGI callable's 302; (b) `falcon`, a bare Falcon app's 302 from one resource;
(c) `lanner`, Lanner's web app (app.py `load_worker_app`, behind the worker wrapper `lanner serve`
puts around it) answering a campaign URL, every click recorded in the spool as in production.

Each server is a forked process running bjoern on a socket bound to port 0; a client in this process
(its CPU is not counted) sends keep-alive GETs over --connections connections, one request in flight
on each, every request a new visitor (X-Real-IP from a trusted 127.0.0.1 and a User-Agent never sent
before, as `lanner bench clicks`' `unique` workload). The figure is the server process's CPU (the sum of
its threads' /proc schedstat run time: user and system, in ns) over the measured requests, after a
warm-up. Variants alternate within each round, so a busy box's drift reaches them alike; the median of
the rounds is printed, with the share of it spent in the kernel (from the clock ticks of
/proc/<pid>/stat: rough). The differences between the floors are what Falcon costs a request (b - a) and
what Lanner adds on top (c - b: its route, the tracker, the metrics and the worker's wrappers).

No flusher runs: the spool only grows (~300 bytes a click), and the visitor probe reads an empty
table. `lanner bench clicks` measures the whole path; this resolves a few µs where it cannot.

    .venv/bin/python scripts/http_floor.py [--requests 20000] [--rounds 5] [--variants wsgi,falcon,lanner]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

VARIANTS = ("wsgi", "falcon", "lanner")
ALIAS = "floor"
OFFER_URL = "https://offer.example/?click={subid}"
WARM_UP = 1000
WARM_UP_SECONDS = 4.0  # Past the default debounce (2 s) + 1 s of a new worker's database look for repeats.
USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 "
    "Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.5 Mobile/15E148 Safari/604.1",
)
_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)


def bare_wsgi(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
    location = ("Location", "https://offer.example/?click=x")
    start_response("302 Found", [location, ("Cache-Control", "no-store"), ("Content-Length", "0")])
    return []


def bare_falcon():
    import falcon

    class Redirect:
        def on_get(self, req: falcon.Request, resp: falcon.Response, alias: str) -> None:
            resp.set_header("Cache-Control", "no-store")
            resp.status = falcon.HTTP_302
            resp.set_header("Location", "https://offer.example/?click=x")

    app = falcon.App()
    app.add_route("/{alias}", Redirect())
    return app


def lanner_settings(data_dir: Path):
    """Settings of a Lanner data directory as the bench's: trusted 127.0.0.1 and X-Real-IP."""
    from settings import load_settings

    return load_settings(
        {
            "LANNER_DATA_DIR": str(data_dir),
            "LANNER_TRUSTED_PROXIES": "127.0.0.1,::1",
            "LANNER_REAL_IP_HEADER": "X-Real-IP",
            "LANNER_LOG_LEVEL": "WARNING",
        }
    )


def prepare_lanner(data_dir: Path) -> None:
    """A migrated database with one campaign (one stream, one offer) and a country database."""
    from models.admin.services import create_campaign
    from models.lookups.geo import build_country_database
    from models.migrations.runner import migrate
    from models.store.database import db, open_database

    settings = lanner_settings(data_dir)
    open_database(settings.database_location)
    migrate(db)
    create_campaign(db, "Floor", ALIAS, offer_url=OFFER_URL)
    db.close()
    build_country_database(settings.geo_path)


def lanner_worker(data_dir: Path):
    """Lanner's web app as a `lanner serve` worker runs it: load_worker_app inside the worker wrapper."""
    from app import load_worker_app
    from workers.runtime.server import _Worker

    settings = lanner_settings(data_dir)
    loaded = load_worker_app(settings)
    read_end, write_end = os.pipe()
    os.close(read_end)  # Nothing reads the worker's status messages here; it writes none before serve().
    return _Worker(settings, loaded.app, write_end, os.getppid(), max_body_bytes=loaded.max_body_bytes)


def serve(variant: str, data_dir: Path) -> tuple[int, int]:
    """Fork a server for `variant`; (its pid, its port). It runs until killed."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    listening.listen(1024)
    listening.setblocking(False)
    port = listening.getsockname()[1]
    pid = os.fork()
    if pid:
        listening.close()
        return pid, port
    try:  # The child: never returns.
        from workers.runtime import _bjoern

        if variant == "wsgi":
            app: Any = bare_wsgi
        elif variant == "falcon":
            app = bare_falcon()
        else:
            app = lanner_worker(data_dir)
        _bjoern.server_run(listening, app, 1 << 20)
    finally:
        os._exit(0)


def requests(count: int, port: int, rng: random.Random) -> list[bytes]:
    """`count` GETs of the campaign URL, each from a new visitor (address and User-Agent)."""
    made = []
    for n in range(count):
        ip = f"{rng.choice((23, 81, 151, 185))}.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
        agent = f"{USER_AGENTS[n % 2]} lb/{rng.getrandbits(40):x}"
        made.append(
            f"GET /{ALIAS} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: {agent}\r\n"
            f"X-Real-IP: {ip}\r\n\r\n".encode()
        )
    return made


def drive(port: int, batch: list[bytes], connections: int, timeout: float) -> None:
    """Send every request of `batch`, one at a time on each connection; each answer must be a 302."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=timeout) for _ in range(connections)]
    pending = [b""] * connections
    try:
        for start in range(0, len(batch), connections):
            sent = batch[start : start + connections]
            for conn, request in zip(sockets, sent, strict=False):
                conn.sendall(request)
            for index in range(len(sent)):
                pending[index] = _answer(sockets[index], pending[index])
    finally:
        for conn in sockets:
            conn.close()


def _answer(conn: socket.socket, buffered: bytes) -> bytes:
    """Read one response from `conn` (bytes already read first); check its status; the bytes after it."""
    data = buffered
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 302"):
        raise RuntimeError(f"expected a 302, got {head[:200]!r}")
    found = _LENGTH.search(head)
    length = int(found.group(1)) if found else 0
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        rest += chunk
    return rest[length:]


def user_system_ticks(pid: int) -> tuple[int, int]:
    """(user, system) clock ticks of `pid`, all threads (/proc/<pid>/stat's utime and stime)."""
    from workers.runtime.procfs import stat_fields

    fields = stat_fields(pid) or ["0"] * 13
    return int(fields[11]), int(fields[12])


def cpu_ns(pid: int) -> int:
    """The run time of all of `pid`'s threads, in ns (/proc/<pid>/task/*/schedstat's first field)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as file:
                total += int(file.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def wait_listening(port: int, deadline: float) -> None:
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no server on port {port}") from None
            time.sleep(0.05)


def measure(
    variant: str, data_dir: Path, count: int, connections: int, rng: random.Random
) -> tuple[float, float]:
    """(µs of the server's CPU per request, the share of it in the kernel) for `count` requests after a
    warm-up. The share is read from clock ticks (10 ms): rough for a short run."""
    pid, port = serve(variant, data_dir)
    try:
        wait_listening(port, time.monotonic() + 60)
        started_at = time.monotonic()
        batch = requests(WARM_UP + count, port, rng)
        drive(port, batch[:WARM_UP], connections, timeout=30)
        # A new worker also asks the database for a repeat until its memory holds every click of the
        # debounce window (models/clicks/tracker.py `_memory_complete_ms`): measured after that.
        time.sleep(max(0.0, started_at + WARM_UP_SECONDS - time.monotonic()))
        started, ticks = cpu_ns(pid), user_system_ticks(pid)
        drive(port, batch[WARM_UP:], connections, timeout=30)
        spent, after = cpu_ns(pid) - started, user_system_ticks(pid)
        user, system = after[0] - ticks[0], after[1] - ticks[1]
        return spent / count / 1000, system / max(user + system, 1)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="Measured per variant and round.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    rng = random.Random(1)
    results: dict[str, list[float]] = {name: [] for name in variants}
    kernel: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="lanner-http-floor-") as directory:
        data_dir = Path(directory)
        if "lanner" in variants:
            prepare_lanner(data_dir)
        for _ in range(args.rounds):
            for name in variants:
                spent, share = measure(name, data_dir, args.requests, args.connections, rng)
                results[name].append(spent)
                kernel[name].append(share)
    load = os.getloadavg()
    print(
        f"server CPU µs per request, {args.requests} requests x {args.rounds} rounds, "
        f"{args.connections} keep-alive connections, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}:"
    )
    for name, values in results.items():
        rounds = ", ".join(f"{value:.1f}" for value in values)
        median, share = statistics.median(values), statistics.median(kernel[name])
        print(f"  {name:<7} median {median:7.1f}   kernel {share:4.0%}   (rounds: {rounds})")
