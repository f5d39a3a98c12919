"""One parser and matcher for lists of IPv4/IPv6 addresses and CIDR networks.

Used wherever a setting or a filter names addresses: LANNER_BOT_IPS (models/lookups/bots.py) and
LANNER_TRUSTED_PROXIES (routes/click.py), so a CIDR means the same in both. An entry with bits set
past its prefix length is refused with the network it probably meant.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, Iterable

__all__ = ["IpList", "parse_entry"]


class IpList:
    """IPv4/IPv6 addresses and CIDR networks, for `ip in ip_list` in well under a microsecond.

    PERF: one set of network numbers per prefix length in use, so a check is one shift and one set lookup
    per distinct prefix length, whatever the number of entries. IPv4-mapped IPv6 (::ffff:a.b.c.d) is
    treated as the IPv4 address, in the list and in lookups.
    """

    def __init__(self, entries: Iterable[str] = ()) -> None:
        by_length: dict[int, dict[int, set[int]]] = {4: {}, 6: {}}
        kept: list[str] = []
        for entry in entries:
            network = parse_entry(entry)
            if network is None:
                continue
            kept.append(str(network))
            by_length[network.version].setdefault(network.prefixlen, set()).add(
                int(network.network_address) >> (network.max_prefixlen - network.prefixlen)
            )
        self.entries: tuple[str, ...] = tuple(kept)
        self._v4 = tuple(
            (32 - length, frozenset(numbers)) for length, numbers in sorted(by_length[4].items())
        )
        self._v6 = tuple(
            (128 - length, frozenset(numbers)) for length, numbers in sorted(by_length[6].items())
        )

    def __bool__(self) -> bool:
        return bool(self._v4 or self._v6)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, ip: object) -> bool:
        """Whether `ip` (text) is in the list; False for anything that is not an IP address."""
        if not isinstance(ip, str):
            return False
        try:
            if ":" in ip:
                number = int.from_bytes(socket.inet_pton(socket.AF_INET6, ip), "big")
                if number >> 32 == 0xFFFF:
                    table, number = self._v4, number & 0xFFFFFFFF
                else:
                    table = self._v6
            else:
                number = int.from_bytes(socket.inet_pton(socket.AF_INET, ip), "big")
                table = self._v4
        except (OSError, ValueError, TypeError):  # ValueError: an embedded NUL.
            return False
        for shift, numbers in table:
            if number >> shift in numbers:
                return True
        return False


def parse_entry(entry: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if not isinstance(entry, str):
        raise ValueError(f"IP list entry {entry!r} is not text.")
    text = entry.strip()
    if not text:
        return None  # A blank item, as a trailing comma in a setting leaves.
    try:
        network = ipaddress.ip_network(text)
    except ValueError as error:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(
                f"IP list entry {entry!r} is not an IPv4 or IPv6 address or CIDR network ({error})."
            ) from None
        raise ValueError(
            f"IP list entry {entry!r} has bits set past its prefix length; did you mean {loose}?"
        ) from None
    if network.version == 6 and network.prefixlen >= 96 and network.network_address.ipv4_mapped is not None:
        network = ipaddress.ip_network(f"{network.network_address.ipv4_mapped}/{network.prefixlen - 96}")
    return network
