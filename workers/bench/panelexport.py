"""A streamed export as `lanner bench panel-pages` times it: one GET read to its end in blocks (the client
never holds it either), its rows and bytes, the time to the first byte and to the last, and the admin
worker's resident memory meanwhile, sampled from /proc, beside its resident memory before (a stream
holds one chunk of rows; an export held whole would grow it by the export's size).

The admin worker is the process holding the server end of the client's connection: found through
/proc/net/tcp and the file descriptors of the serve process's descendants (Linux only, as the bench).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from workers.bench.errors import BenchError
from workers.bench.panelclient import PanelClient

BLOCK = 256 * 1024
SAMPLE_SECONDS = 0.05
ESTABLISHED = "01"


@dataclass
class ExportTiming:
    path: str  # As listed (the template).
    user: str
    status: int = 0
    rows: int = 0  # Lines after the header.
    bytes: int = 0
    first_byte_ms: float = 0.0
    total_s: float = 0.0
    rows_per_s: float = 0.0
    rss_before_mb: float = 0.0  # The admin worker's, just before the request.
    rss_peak_mb: float = 0.0  # The most it held while the export streamed (sampled every 50 ms).
    worker_pid: int = 0


def descendants(pid: int) -> list[int]:
    """`pid`'s children, theirs, and so on (from /proc/<pid>/task/*/children)."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    queue.append(child)
    return found


def _socket_inode(server_port: int, client_port: int) -> str:
    """The inode of the server end of the connection from `client_port` to `server_port`."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if (
                state == ESTABLISHED
                and int(local.rsplit(":", 1)[1], 16) == server_port
                and int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                return inode
    raise BenchError(f"No connection from port {client_port} to {server_port} in /proc/net/tcp.")


def worker_pid(serve_pid: int, server_port: int, client: PanelClient) -> int:
    """The pid of the `lanner serve` descendant that answers `client`'s connection (it must be open)."""
    if client.connection is None or client.connection.sock is None:
        raise BenchError("The client has no open connection to find its worker by.")
    target = f"socket:[{_socket_inode(server_port, client.connection.sock.getsockname()[1])}]"
    for pid in descendants(serve_pid):
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    raise BenchError(f"No process under pid {serve_pid} holds the admin connection.")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class RssSampler:
    """The highest VmRSS of `pid` seen while the `with` block runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return
            if self.stopped.wait(SAMPLE_SECONDS):
                return

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join()
        try:
            self.peak = max(self.peak, rss_mb(self.pid))
        except OSError:
            pass


def time_export(
    client: PanelClient, serve_pid: int, server_port: int, path: str, template: str, user: str
) -> ExportTiming:
    """Stream `path` to its end; 200 or BenchError."""
    timing = ExportTiming(template, user)
    client.get("/panel/account")  # An open connection, served by the worker that will stream the export.
    pid = worker_pid(serve_pid, server_port, client)
    timing.worker_pid, timing.rss_before_mb = pid, round(rss_mb(pid), 1)
    assert client.connection is not None
    with RssSampler(pid) as sampler:
        started = time.perf_counter()
        client.connection.request("GET", path, headers=client.headers)
        response = client.connection.getresponse()
        timing.first_byte_ms = round((time.perf_counter() - started) * 1000, 1)
        lines = 0
        while block := response.read(BLOCK):
            timing.bytes += len(block)
            lines += block.count(b"\n")
        timing.total_s = round(time.perf_counter() - started, 2)
    if (response.getheader("Connection") or "").lower() == "close":
        client.close()
    timing.status = response.status
    if response.status != 200:
        raise BenchError(f"GET {path} as {user} answered {response.status}; every export must answer 200.")
    timing.rows = max(lines - 1, 0)
    timing.rows_per_s = round(timing.rows / timing.total_s) if timing.total_s else 0.0
    timing.rss_peak_mb = round(sampler.peak, 1)
    return timing
