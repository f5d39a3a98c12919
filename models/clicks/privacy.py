"""The visitor's IP address as Lanner keeps it when LANNER_ANONYMIZE_IP is on.

An IPv4 address loses its last octet (203.0.113.77 -> 203.0.113.0, a /24), an IPv6 address its last
80 bits (2001:db8:85a3:8d3:1319:8a2e:370:7348 -> 2001:db8:85a3::, a /48), as Google Analytics
truncates them. An IPv4-mapped IPv6 address (::ffff:203.0.113.77) is an IPv4 visitor: it keeps
its /24 (::ffff:203.0.113.0), not the /48 that would zero the whole IPv4 part.

The click pipeline truncates after geo, the uniqueness key and the bot check by IP have seen the full
address (models/clicks/tracker.py); everything kept after that holds only the truncated one.
"""

from __future__ import annotations

import socket

_MAPPED_PREFIX = b"\0" * 10 + b"\xff\xff"  # ::ffff:0:0/96
_IPV6_ZEROS = b"\0" * 10  # The last 80 bits.


def anonymized_ip(ip: str) -> str:
    """`ip` with its last octet (IPv4, IPv4-mapped IPv6) or its last 80 bits (IPv6) zeroed.

    Text that is not an address is returned as it is (the edge passes only addresses; the flusher
    refuses a line whose IP is not one).
    """
    try:
        if ":" not in ip:
            return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, ip)[:3] + b"\0")
        packed = socket.inet_pton(socket.AF_INET6, ip)
    except (OSError, ValueError):
        return ip
    if packed[:12] == _MAPPED_PREFIX:
        return socket.inet_ntop(socket.AF_INET6, packed[:15] + b"\0")
    return socket.inet_ntop(socket.AF_INET6, packed[:6] + _IPV6_ZEROS)
