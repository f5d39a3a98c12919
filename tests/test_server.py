"""The bjoern process manager (workers/runtime/server.py): real master processes, real sockets, no mocks.

The master runs `serve()` in a subprocess with the tiny apps of tests/wsgi_apps.py, whose answers
carry the serving worker's pid.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ClientThreads, UnixHTTPConnection, wait_until

from workers.runtime.server import parse_bind

ROOT = Path(__file__).resolve().parent.parent
MASTER_CODE = (
    "import logging; "
    "logging.basicConfig(level='INFO', format='%(process)d %(levelname)s %(name)s: %(message)s'); "
    "from workers.runtime.server import serve; from settings import load_settings; "
    "from tests.wsgi_apps import {loader}; "
    "serve(load_settings(), {loader}, admin_loader={admin_loader})"
)
CLIENT_ERRORS = (OSError, http.client.HTTPException)


def get(address: tuple[str, int] | str, path: str = "/", timeout: float = 5.0) -> tuple[int, bytes]:
    """One request on a new connection, closed after the answer (`Connection: close`)."""
    if isinstance(address, str):
        connection = UnixHTTPConnection(address, timeout)
    else:
        connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Connection": "close"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat_line.rpartition(")")[2].split()  # after "pid (comm)": state, ppid, ...
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@dataclass
class Master:
    process: subprocess.Popen
    log_path: Path
    address: tuple[str, int] | str

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def workers(self) -> set[int]:
        return children_of(self.pid)

    def wait_for_workers(self, count: int, timeout: float = 10) -> set[int]:
        return wait_until(lambda: len(pids := self.workers()) == count and pids, timeout, f"{count} workers")

    def wait_until_serving(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"master exited with {self.process.returncode}:\n{self.log}")
            try:
                if get(self.address, timeout=1)[0] == 200:
                    return
            except CLIENT_ERRORS:
                pass
            time.sleep(0.05)
        raise AssertionError(f"master not serving within {timeout} s:\n{self.log}")

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM and wait; SIGKILL the master and any worker left if that does not work."""
        workers = self.workers() if self.process.poll() is None else set()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in workers:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
        return self.process.returncode


@pytest.fixture
def start_master(env, tmp_path):
    """Start `serve()` in a subprocess (2 workers on a free port unless overridden); stopped at teardown."""
    started: list[Master] = []

    def start(
        loader: str = "hello_loader", wait: bool = True, admin_loader: str = "None", **overrides: str
    ) -> Master:
        environ = {
            **env,
            "LANNER_BIND": "127.0.0.1:0",  # the kernel picks a free port; read back from the log
            "LANNER_WORKERS": "2",
            "LANNER_GRACEFUL_TIMEOUT": "5",
            **overrides,
        }
        where = parse_bind(environ["LANNER_BIND"])
        address = where[1] if where[0] == "unix" else (where[1], where[2])
        log_path = tmp_path / f"master-{len(started)}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", MASTER_CODE.format(loader=loader, admin_loader=admin_loader)],
                cwd=ROOT,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        master = Master(process, log_path, address)
        started.append(master)
        if address == ("127.0.0.1", 0):
            found = wait_until(
                lambda: re.search(r"web: listening on 127\.0\.0\.1:(\d+) ", master.log), 10, "the bound port"
            )
            master.address = ("127.0.0.1", int(found.group(1)))
        if wait:
            master.wait_until_serving()
        return master

    yield start
    for master in started:
        master.stop()
        print(f"--- master {master.pid} log ---\n{master.log}")  # shown when the test failed


class Traffic(ClientThreads):
    """Client threads sending requests, each on a new connection, recording every outcome."""

    def __init__(self, address, threads: int = 4, paths: tuple[str, ...] = ("/",)):
        super().__init__(threads)
        self.address = address
        self.paths = paths
        self.results: list[tuple[float, float, int | None]] = []  # (started, finished, pid or None)

    def _run(self, index: int) -> None:
        path = self.paths[index % len(self.paths)]
        while not self.is_stopped.is_set():
            started = time.monotonic()
            pid = None
            try:
                status, body = get(self.address, path)
                if status == 200:
                    pid = int(body)
            except CLIENT_ERRORS:
                pass
            self.results.append((started, time.monotonic(), pid))

    @property
    def failures(self) -> list[tuple[float, float, None]]:
        return [result for result in self.results if result[2] is None]

    def pids(self, since: float = 0.0) -> set[int]:
        return {pid for started, _, pid in self.results if pid is not None and started >= since}


def test_parse_bind_accepts_host_port_and_unix_paths_and_rejects_the_rest():
    assert parse_bind("127.0.0.1:8080") == ("tcp", "127.0.0.1", 8080)
    assert parse_bind("127.0.0.1:0") == ("tcp", "127.0.0.1", 0)  # any free port
    assert parse_bind("localhost:80") == ("tcp", "localhost", 80)
    assert parse_bind("unix:/run/lanner/lanner.sock") == ("unix", "/run/lanner/lanner.sock")
    for bad in ("8080", ":8080", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000", "[::1]:8080", "unix:"):
        with pytest.raises(ValueError, match="bind"):
            parse_bind(bad)
    with pytest.raises(ValueError, match="107 bytes"):
        parse_bind("unix:/" + "x" * 200)


def test_serves_from_every_worker_pid_on_one_port_and_the_master_idles(start_master):
    master = start_master(LANNER_WORKERS="3")
    workers = master.wait_for_workers(3)
    with Traffic(master.address, threads=6) as traffic:
        wait_until(lambda: traffic.pids() == workers, 10, "every worker to answer")
    assert traffic.failures == []
    status, body = get(master.address, "/stream")  # a streamed body, sent in two chunks
    assert status == 200 and int(body) in workers

    before = cpu_seconds(master.pid)
    time.sleep(1.0)
    assert cpu_seconds(master.pid) - before < 0.05, "the master must not busy-loop when idle"


def test_killed_worker_is_replaced_and_only_its_own_requests_fail(start_master):
    master = start_master()
    before = master.wait_for_workers(2)
    client_threads = 6
    with Traffic(master.address, threads=client_threads) as traffic:
        time.sleep(1.2)  # let the workers get past the "died while starting" window
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: traffic.pids(since=killed_at) - before, 10, "a replacement worker to answer")
        replaced_at = min(
            finished for _, finished, pid in traffic.results if pid is not None and pid not in before
        )
        time.sleep(0.8)

    after = master.wait_for_workers(2)
    assert victim not in after and len(after - before) == 1
    assert len(traffic.results) > 200, "the clients must really have hammered the server"
    assert len(traffic.failures) <= client_threads
    # A failure can only be a request the victim had already accepted when it was killed.
    assert all(started < killed_at for started, _, _ in traffic.failures), traffic.failures
    assert [r for r in traffic.results if r[0] >= replaced_at and r[2] is None] == []
    assert f"worker {victim} was killed by SIGKILL" in master.log


def test_sighup_replaces_every_worker_under_traffic_without_failing_a_request(start_master):
    master = start_master()
    before = master.wait_for_workers(2)
    with Traffic(master.address, threads=6, paths=("/", "/slow?seconds=0.2")) as traffic:
        time.sleep(0.5)
        reloaded_at = time.monotonic()
        os.kill(master.pid, signal.SIGHUP)
        after = wait_until(
            lambda: len(pids := master.workers()) == 2 and not pids & before and pids, 10, "a new generation"
        )
        switched_at = time.monotonic()
        time.sleep(0.5)

    assert traffic.failures == []
    assert traffic.pids(since=reloaded_at) >= after
    assert traffic.pids(since=switched_at) <= after
    assert not any(is_alive(pid) for pid in before)
    assert "WARNING" not in master.log


def test_max_requests_recycles_workers_without_failing_a_request(start_master):
    master = start_master(LANNER_MAX_REQUESTS="50")
    master.wait_for_workers(2)
    results: list[tuple[int, bytes] | Exception] = []

    def client() -> None:
        for _ in range(75):
            try:
                results.append(get(master.address))
            except CLIENT_ERRORS as exc:
                results.append(exc)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 300
    assert [r for r in results if not isinstance(r, tuple) or r[0] != 200] == []
    assert len({body for _, body in results}) > 2
    assert "reached max_requests; recycling it" in master.log
    assert "WARNING" not in master.log, "a recycle is not a crash"


def test_sigterm_finishes_the_request_in_flight_then_exits_0_leaving_no_worker(start_master):
    graceful_timeout = 5
    master = start_master(LANNER_GRACEFUL_TIMEOUT=str(graceful_timeout))
    workers = master.wait_for_workers(2)
    outcome: dict[str, object] = {}

    def slow_request() -> None:
        try:
            outcome["answer"] = get(master.address, "/slow?seconds=1", timeout=10)
        except CLIENT_ERRORS as exc:
            outcome["answer"] = exc

    client = threading.Thread(target=slow_request)
    client.start()
    time.sleep(0.3)
    sent_at = time.monotonic()
    master.process.send_signal(signal.SIGTERM)
    code = master.process.wait(timeout=graceful_timeout + 3)
    elapsed = time.monotonic() - sent_at
    client.join(timeout=5)

    assert code == 0
    status, body = outcome["answer"]
    assert status == 200 and int(body) in workers
    assert elapsed < graceful_timeout, "idle workers must not wait for the whole graceful_timeout"
    assert not any(is_alive(pid) for pid in workers)


def test_unix_socket_replaces_a_stale_file_serves_and_is_removed_on_stop(start_master):
    with tempfile.TemporaryDirectory(prefix="lanner-") as directory:
        path = os.path.join(directory, "lanner.sock")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)  # a socket file left behind by a crashed server
        stale.close()

        master = start_master(LANNER_BIND=f"unix:{path}")
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o666
        status, body = get(path)
        assert status == 200 and int(body) in master.workers()

        assert master.stop() == 0
        assert not os.path.exists(path)


def test_an_on_demand_pool_starts_at_its_first_connection_and_stops_when_idle(start_master, tmp_path):
    admin = str(tmp_path / "admin.sock")
    master = start_master(
        admin_loader="hello_loader", LANNER_ADMIN_BIND=f"unix:{admin}", LANNER_ADMIN_IDLE_SECONDS="1"
    )
    web = master.wait_for_workers(2)
    assert (
        f"admin: listening on unix:{admin} with 1 workers started on demand, stopped after 1 s idle"
        in master.log
    )
    # A pool started with the others would have been forked in the same round as the web workers.
    assert master.workers() == web

    answers: list[tuple[int, bytes] | Exception] = []

    def ask() -> None:
        try:
            answers.append(get(admin))
        except CLIENT_ERRORS as exc:
            answers.append(exc)

    clients = [threading.Thread(target=ask) for _ in range(8)]
    for client in clients:  # all while no admin worker exists: they wait in the backlog
        client.start()
    for client in clients:
        client.join(timeout=15)
    assert [answer[0] for answer in answers] == [200] * 8, answers
    (first,) = {int(body) for _, body in answers}
    assert master.workers() == web | {first}

    wait_until(lambda: master.workers() == web, 10, "the idle admin worker to stop", lambda: master.log)
    assert f"admin worker {first} idle for 1 s; stopping it until the next request" in master.log
    assert get(master.address)[0] == 200  # the web pool is untouched

    os.kill(master.pid, signal.SIGHUP)  # a reload does not wait for a pool nobody asked for
    reloaded = wait_until(
        lambda: len(pids := master.workers()) == 2 and not pids & web and pids, 10, "the reload to finish"
    )
    status, body = get(admin)
    assert status == 200 and int(body) not in (first, *web, *reloaded)
    assert master.stop() == 0
    assert not os.path.exists(admin)


def test_an_idle_priority_admin_worker_is_a_session_and_scheduling_group_of_its_own(start_master, tmp_path):
    # SCHED_IDLE yields only within the task's scheduling group; with autogroup a session is one, and
    # the master's holds the web workers, whose weight the admin worker then ran on against nginx's.
    admin = str(tmp_path / "admin.sock")
    master = start_master(
        admin_loader="hello_loader",
        LANNER_ADMIN_BIND=f"unix:{admin}",
        LANNER_ADMIN_IDLE_SECONDS="0",
        LANNER_ADMIN_IDLE_PRIORITY="on",
    )
    status, body = get(admin)
    assert status == 200
    worker = int(body)
    web = master.wait_for_workers(3) - {worker}
    assert os.getsid(worker) == os.getpgid(worker) == worker
    assert os.sched_getscheduler(worker) == os.SCHED_IDLE
    for pid in web:
        assert os.getsid(pid) == os.getsid(master.pid) and os.getpgid(pid) == pid
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER
    autogroup = Path(f"/proc/{worker}/autogroup")
    if autogroup.exists():  # Linux with CONFIG_SCHED_AUTOGROUP
        line = autogroup.read_text()
        # A session in the default (root) autogroup, as under a CI runner that never called setsid,
        # reads an empty file: its group is then "none", still not the admin worker's.
        master_group = Path(f"/proc/{master.pid}/autogroup").read_text().split()[:1]
        assert line.split()[:1] != master_group, line
        assert line.split()[-2:] == ["nice", "19"], line
    assert master.stop() == 0
    assert not is_alive(worker)  # Out of the master's session, it still stops with it.


def test_workers_failing_to_load_are_retried_after_a_pause_not_in_a_loop(start_master):
    master = start_master(loader="broken_loader", wait=False)
    time.sleep(2.5)
    assert master.process.poll() is None, master.log
    attempts = master.log.count("RuntimeError: this app cannot be loaded")
    assert 2 <= attempts <= 10, f"{attempts} attempts in 2.5 s"
    assert "while starting; retrying in 1 s" in master.log
    assert master.stop() == 0


def test_an_idle_keep_alive_connection_does_not_hold_up_a_stop(start_master):
    # bjoern has no keep-alive timeout: after SIGINT its loop runs as long as a client keeps a
    # connection open, so the worker must notice on its own that nothing is in progress.
    master = start_master(LANNER_GRACEFUL_TIMEOUT="5")
    workers = master.wait_for_workers(2)
    with socket.create_connection(master.address, timeout=5) as idle:
        idle.sendall(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")  # HTTP/1.1: keep-alive
        assert idle.recv(4096).startswith(b"HTTP/1.1 200")
        sent_at = time.monotonic()
        master.process.send_signal(signal.SIGTERM)
        assert master.process.wait(timeout=8) == 0
        assert time.monotonic() - sent_at < 2.0
        assert idle.recv(4096) == b""  # the worker went away and closed it
    assert not any(is_alive(pid) for pid in workers)


def test_workers_exit_on_their_own_when_the_master_is_killed(start_master):
    master = start_master()
    workers = master.wait_for_workers(2)
    master.process.kill()
    master.process.wait()
    wait_until(lambda: not any(is_alive(pid) for pid in workers), 5, "orphaned workers to exit")


def test_sighup_keeps_the_old_workers_serving_while_the_new_code_fails_to_load(start_master, data_dir):
    master = start_master(loader="fragile_loader")
    before = master.wait_for_workers(2)
    (data_dir / "broken").touch()
    os.kill(master.pid, signal.SIGHUP)
    wait_until(lambda: "while starting; retrying in 1 s" in master.log, 5, "the new generation to fail")
    with Traffic(master.address, threads=2) as traffic:
        time.sleep(0.5)
    assert traffic.failures == []
    assert traffic.pids() == before

    (data_dir / "broken").unlink()
    after = wait_until(
        lambda: len(pids := master.workers()) == 2 and not pids & before and pids, 10, "the reload to finish"
    )
    status, body = get(master.address)
    assert status == 200 and int(body) in after


def test_a_client_ignoring_connection_close_is_cut_between_two_answers_at_graceful_timeout(start_master):
    master = start_master(LANNER_GRACEFUL_TIMEOUT="2", LANNER_WORKERS="1")
    master.wait_for_workers(1)
    answers, closing, buffer = 0, 0, b""
    with socket.create_connection(master.address, timeout=20) as client:
        while True:  # request after request on the same connection, whatever the answers say
            try:
                client.sendall(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            except OSError:
                break
            while b"\r\n\r\n" not in buffer:
                try:
                    chunk = client.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    break
                buffer += chunk
            if b"\r\n\r\n" not in buffer:
                break
            head, _, rest = buffer.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(rest) < length:
                chunk = client.recv(65536)
                assert chunk, f"an answer was cut off after {len(rest)} of {length} bytes"
                rest += chunk
            buffer = rest[length:]
            answers += 1
            closing += b"connection: close" in head.lower()
            if answers == 1:  # the worker has accepted the connection: drain it now
                master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=10) == 0
    assert buffer == b"", "nothing but whole answers"
    assert answers > 10 and closing > 0
    assert "still serving after graceful_timeout" in master.log
    assert "killing it" not in master.log


# -- request bodies and pipelining: Lanner's bjoern (workers/runtime/bjoern-3.2.2) ------------------------

MB = 1 << 20
ATTACK_BYTES = 300 * MB  # what each attacking connection announces, and sends until it is cut off


def vm_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def read_answer(reader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP answer from a connection's buffered reader (status, lower-case headers, body)."""
    status_line = reader.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    headers = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = reader.read(int(headers["content-length"]))
    return int(status_line.split()[1]), headers, body


def push_body(address, head: bytes, is_chunked: bool) -> bytes:
    """Announce a body of ATTACK_BYTES (or send it chunked) and send it 1 MB at a time until the server
    cuts the connection off; return what it answered (b"" if nothing before the reset)."""
    piece = b"x" * MB
    if is_chunked:
        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
    with socket.create_connection(address, timeout=30) as client:
        try:
            client.sendall(head)
            for _ in range(ATTACK_BYTES // MB):
                client.sendall(piece)
        except OSError:
            pass  # cut off: what the server answered before is still there to read
        answer = b""
        try:
            while chunk := client.recv(65536):
                answer += chunk
        except OSError:
            pass
        return answer


def test_the_patch_is_every_change_from_bjoern_3_2_2(tmp_path):
    # lanner.patch undone leaves none of Lanner's changes, each marked `lanner:` (the README says how the
    # patch is written again after a change).
    source = ROOT / "workers/runtime/bjoern-3.2.2"
    tree = tmp_path / "bjoern-3.2.2"
    for part in ("bjoern", "http-parser"):
        shutil.copytree(source / part, tree / part)
    undone = subprocess.run(
        ["git", "apply", "-R", str(source / "lanner.patch")], cwd=tree, capture_output=True, text=True
    )
    assert undone.returncode == 0, undone.stderr
    marked = subprocess.run(["grep", "-rl", "lanner", "."], cwd=tree, capture_output=True, text=True)
    assert marked.stdout == ""


@pytest.mark.parametrize("is_chunked", [False, True], ids=["content-length", "chunked"])
def test_four_300_mb_bodies_get_a_413_and_no_worker_holds_them(start_master, is_chunked):
    master = start_master()
    workers = master.wait_for_workers(2)
    before = {pid: vm_rss_kb(pid) for pid in workers}
    framing = b"Transfer-Encoding: chunked" if is_chunked else b"Content-Length: %d" % ATTACK_BYTES
    head = b"POST /body HTTP/1.1\r\nHost: test\r\n%s\r\n\r\n" % framing
    answers = []
    threads = [
        threading.Thread(target=lambda: answers.append(push_body(master.address, head, is_chunked)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(answers) == 4
    for answer in answers:  # Linux keeps the answer readable after the reset that cuts the sender off
        assert answer.startswith(b"HTTP/1.1 413 Payload Too Large\r\n"), answer[:200]
        assert answer.endswith(b"The request body is larger than 65536 bytes, the most this server reads.\n")
    assert master.workers() == workers  # none died
    growth = {pid: vm_rss_kb(pid) - before[pid] for pid in workers}
    assert max(growth.values()) < 5 * 1024, growth  # kB: stock bjoern held every byte it was sent
    assert get(master.address, "/body")[0] == 200


def test_a_body_past_the_limit_is_refused_before_it_is_read_one_within_it_arrives_whole(start_master):
    from wsgi_apps import MAX_BODY_BYTES

    master = start_master(LANNER_WORKERS="1")
    [worker] = master.wait_for_workers(1)
    with socket.create_connection(master.address, timeout=30) as client:
        client.sendall(b"POST /body HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\nsome" % ATTACK_BYTES)
        reader = client.makefile("rb")
        status, headers, body = read_answer(reader)
        assert (status, headers["connection"]) == (413, "close")
        assert body == b"The request body is larger than 65536 bytes, the most this server reads.\n"
        assert reader.read() == b""  # closed
    for size, is_chunked in ((MAX_BODY_BYTES, False), (MAX_BODY_BYTES, True), (MAX_BODY_BYTES + 1, True)):
        with socket.create_connection(master.address, timeout=30) as client:
            if is_chunked:  # in three chunks
                thirds = (size // 3, size // 3, size - 2 * (size // 3))
                body = b"".join(b"%x\r\n%s\r\n" % (n, b"y" * n) for n in thirds) + b"0\r\n\r\n"
                framing = b"Transfer-Encoding: chunked"
            else:
                body, framing = b"y" * size, b"Content-Length: %d" % size
            client.sendall(b"POST /body HTTP/1.1\r\nHost: test\r\n%s\r\n\r\n%s" % (framing, body))
            status, _, answer = read_answer(client.makefile("rb"))
            if size <= MAX_BODY_BYTES:
                assert (status, answer) == (200, b"%d /body %d" % (worker, size)), (size, is_chunked)
            else:
                assert status == 413, (size, is_chunked)


def test_pipelined_requests_are_each_answered_in_order(start_master):
    # Stock bjoern parsed everything one read brought into one environ: only the last request was
    # answered, and one cut in half by the read reached the app without a method.
    master = start_master(LANNER_WORKERS="1")
    [worker] = master.wait_for_workers(1)
    get_request = b"GET /body/%d HTTP/1.1\r\nHost: test\r\n\r\n"
    with socket.create_connection(master.address, timeout=30) as client:
        reader = client.makefile("rb")
        client.sendall(b"".join(get_request % n for n in (1, 2, 3)))  # one write
        assert [read_answer(reader)[2] for _ in range(3)] == [
            b"%d /body/%d 0" % (worker, n) for n in (1, 2, 3)
        ]
        # A body, then a request cut in two, on the same connection.
        client.sendall(b"POST /body/4 HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello" + b"GET /bo")
        assert read_answer(reader)[2] == b"%d /body/4 5" % worker
        client.sendall(b"dy/5 HTTP/1.1\r\nHost: test\r\n\r\n")
        assert read_answer(reader)[2] == b"%d /body/5 0" % worker
        # A request asking to close ends the connection: what was pipelined after it goes unanswered.
        client.sendall(
            get_request % 6
            + b"GET /body/7 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
            + get_request % 8
        )
        assert read_answer(reader)[2] == b"%d /body/6 0" % worker
        status, headers, body = read_answer(reader)
        assert (body, headers["connection"]) == (b"%d /body/7 0" % worker, "close")
        assert reader.read() == b""
    with socket.create_connection(master.address, timeout=30) as client:
        # An answer the app closes (a draining worker's): the requests after it are not served but
        # closed unanswered, so that a client sends them again elsewhere (never twice).
        reader = client.makefile("rb")
        client.sendall(get_request % 9 + b"GET /body/close HTTP/1.1\r\nHost: test\r\n\r\n" + get_request % 10)
        assert read_answer(reader)[2] == b"%d /body/9 0" % worker
        assert read_answer(reader)[2] == b"%d /body/close 0" % worker
        assert reader.read() == b""


def read_chunked(reader) -> tuple[int, bytes]:
    """One chunked HTTP answer from a connection's buffered reader (status, body)."""
    status_line = reader.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    while (line := reader.readline()) not in (b"\r\n", b""):
        assert not line.lower().startswith(b"content-length:"), line
    body = b""
    while size := int(reader.readline().strip(), 16):
        body += reader.read(size)
        assert reader.read(2) == b"\r\n"
    assert reader.read(2) == b"\r\n"
    return int(status_line.split()[1]), body


def test_answers_the_socket_cannot_take_at_once_arrive_whole_and_the_connection_reads_on(start_master):
    # bjoern writes a loop turn's answers before it next waits and keeps the connections' read watchers
    # (lanner.patch's third change); an answer the socket does not take in one write, or a streamed one,
    # goes on through a write watcher, and the connection reads its next request after it.
    from wsgi_apps import BIG_BODY_BYTES

    master = start_master(LANNER_WORKERS="1")
    [worker] = master.wait_for_workers(1)
    pid = str(worker).encode()
    with socket.create_connection(master.address, timeout=30) as client:
        reader = client.makefile("rb")  # 16 MB: more than both sockets' buffers hold, a partial write.
        client.sendall(b"GET /big HTTP/1.1\r\nHost: test\r\n\r\n")
        status, headers, body = read_answer(reader)
        assert (status, len(body), body[: len(pid)], body[-1:]) == (200, BIG_BODY_BYTES, pid, b".")
        client.sendall(b"GET /stream HTTP/1.1\r\nHost: test\r\n\r\n")
        assert read_chunked(reader) == (200, pid)
        # Pipelined behind a big answer and a streamed one: each answered, in order.
        client.sendall(
            b"GET /big HTTP/1.1\r\nHost: test\r\n\r\n"
            b"GET /stream HTTP/1.1\r\nHost: test\r\n\r\n"
            b"GET /body/1 HTTP/1.1\r\nHost: test\r\n\r\n"
        )
        assert len(read_answer(reader)[2]) == BIG_BODY_BYTES
        assert read_chunked(reader) == (200, pid)
        assert read_answer(reader)[2] == b"%d /body/1 0" % worker
        client.sendall(b"GET /body/2 HTTP/1.1\r\nHost: test\r\n\r\n")
        assert read_answer(reader)[2] == b"%d /body/2 0" % worker
    assert master.workers() == {worker}
