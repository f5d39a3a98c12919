"""The Python functions the store's statements compute with: SQLite registers them on its connection
(models/store/sqlite/database.py), PostgreSQL's stores call them beside their statements.

They live here, below the domain that defines what they mean (models/clicks/record.py names the
visitor key, models/clicks/privacy.py the truncated address, and both re-export them), so that the
store imports no domain module.
"""

from __future__ import annotations

import socket
import struct
from hashlib import blake2b

_INT64 = struct.Struct(">q").unpack
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


def visitor_key(ip: str, ua_hash: int) -> int:
    """The visitor (IP + UA hash) as one signed 64-bit integer: the key of the uniqueness index.

    An IPv4 visitor's key is exact: the address's 32 bits, then the UA hash's. Keys sort by address
    like the old (ip, ua_hash) index did, so a NAT address's clicks share index pages. An IPv6
    visitor's is 64 bits of BLAKE2b over both (a 32-bit checksum would make a few hundred
    strangers with a popular phone "seen before" per million addresses).
    """
    if ":" not in ip:
        try:
            return _INT64(socket.inet_pton(socket.AF_INET, ip) + ua_hash.to_bytes(4, "big"))[0]
        except OSError:  # Not an address (the edge only passes valid ones): hashed like IPv6.
            pass
    return _INT64(blake2b(f"{ip}\t{ua_hash}".encode("utf-8", "surrogatepass"), digest_size=8).digest())[0]
