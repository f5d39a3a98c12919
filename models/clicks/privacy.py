"""The visitor's IP address as Lanner keeps it when LANNER_ANONYMIZE_IP is on.

An IPv4 address loses its last octet (203.0.113.77 -> 203.0.113.0, a /24), an IPv6 address its last
80 bits (2001:db8:85a3:8d3:1319:8a2e:370:7348 -> 2001:db8:85a3::, a /48), as Google Analytics
truncates them. An IPv4-mapped IPv6 address (::ffff:203.0.113.77) is an IPv4 visitor: it keeps
its /24 (::ffff:203.0.113.0), not the /48 that would zero the whole IPv4 part.

The click pipeline truncates after geo, the uniqueness key and the bot check by IP have seen the full
address (models/clicks/tracker.py); everything kept after that holds only the truncated one.
"""

from __future__ import annotations

from models.store.functions import anonymized_ip as anonymized_ip  # The store computes it too.
