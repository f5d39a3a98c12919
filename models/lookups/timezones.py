"""The IANA timezone names this machine's tz database holds: read once per process, when first asked.

`zoneinfo.available_timezones()` walks the whole tz directory (~10 ms, 600 files) on every call, and
every campaign, offer and user saved checks its timezone against it. A zone the tz package adds while a
process runs is known to that process after its next restart (a reload, as after any upgrade).
"""

from __future__ import annotations

import functools
from zoneinfo import available_timezones


@functools.cache
def timezone_set() -> frozenset[str]:
    return frozenset(available_timezones() | {"UTC"})


@functools.cache
def timezone_names() -> tuple[str, ...]:
    """Every name, sorted: the timezone fields' suggestions."""
    return tuple(sorted(timezone_set()))
