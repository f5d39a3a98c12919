"""A bjoern worker's client connections, seen from its watch thread: how many, how idle, and ending one.

bjoern 3.2.2 has no keep-alive or read timeout and no hook per connection, and nothing in Python can
pause its accept watcher: when accept() fails with EMFILE, libev's level-triggered watcher fires
again at once, so a worker out of file descriptors spins at 100 % CPU serving nobody. What Python
can do is look: every accepted socket is in /proc/self/fd, and the kernel keeps each TCP
connection's idle time (TCP_INFO: milliseconds since data last came in and last went out).

An idle connection is ended with shutdown(2), not close(2): bjoern's watcher then reads EOF and
closes the connection itself, so libev never keeps a watcher on a descriptor number that the next
accept() reuses. The client sees a FIN, exactly as from a server's keep-alive timeout.

Unix-socket connections have no TCP_INFO; they come from nginx, which closes its own idle upstream
connections (`keepalive_timeout` in the upstream block of nginx/lanner-site.conf).
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import struct

_TCP_ESTABLISHED = 1
_TCP_INFO_SIZE = 104  # up to tcpi_rcv_space, in every kernel since 2.6
_TCP_INFO_TIMES = struct.Struct("=I4xI")  # tcpi_last_data_sent, (tcpi_last_ack_sent), tcpi_last_data_recv
_TCP_INFO_TIMES_OFFSET = 44


def raise_descriptor_limit() -> int:
    """Lift this process's soft RLIMIT_NOFILE to the hard limit (systemd's LimitNOFILE); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


def descriptor_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_descriptors() -> tuple[list[int], bool]:
    """This process's open file descriptors, and whether it has run out of them.

    Listing /proc/self/fd takes a descriptor itself: when that fails with EMFILE, every number below
    the limit is in use (the kernel hands out the lowest free one), so that range is the answer.
    Nothing else here opens one: readlink, getsockopt and shutdown work on numbers.
    """
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")], False
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        return list(range(descriptor_limit())), True


def idle_tcp_connections(listening: socket.socket, fds: list[int]) -> list[tuple[float, int]]:
    """(seconds idle, fd) of the established TCP connections among `fds` accepted on `listening`,
    most idle first."""
    if listening.family != socket.AF_INET:
        return []
    port = listening.getsockname()[1]
    found = []
    for fd in fds:
        if fd == listening.fileno():
            continue
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            idle = _idle_seconds(fd, port)
        except OSError:
            continue  # closed meanwhile by bjoern, or not a TCP socket
        if idle is not None:
            found.append((idle, fd))
    found.sort(reverse=True)
    return found


def _idle_seconds(fd: int, port: int) -> float | None:
    sock = socket.socket(fileno=fd)  # no dup: detached below, so it never closes bjoern's descriptor
    try:
        if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM or sock.getsockname()[1] != port:
            return None
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    finally:
        sock.detach()
    if info[0] != _TCP_ESTABLISHED:
        return None  # the client has closed it already; bjoern is about to
    last_sent_ms, last_received_ms = _TCP_INFO_TIMES.unpack_from(info, _TCP_INFO_TIMES_OFFSET)
    return min(last_sent_ms, last_received_ms) / 1000


def shut_down_if_idle(fd: int, listening: socket.socket, min_idle: float) -> bool:
    """End one connection if it is still idle for `min_idle` s; bjoern reads EOF and closes it.

    Checked again right before: bjoern may have closed the descriptor since the scan, and accepted a
    new connection under the same number.
    """
    try:
        idle = _idle_seconds(fd, listening.getsockname()[1])
        if idle is None or idle < min_idle:
            return False
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False  # already gone
    finally:
        sock.detach()
