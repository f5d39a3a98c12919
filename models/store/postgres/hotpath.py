"""hotpath: the web worker's visitor probes (models/store/sqlite/hotpath.py) without `INDEXED BY`.

SQLite pins the visitor index because its planner may pick a worse one from stale statistics;
PostgreSQL has no such hint and picks click_visitor_key (the covering index of the schema) by itself.
Its schema was born after migration 0005, so only the by-key probes are ever used; the (ip, ua_hash)
ones are spelled here only so that the class answers what SQLite's does.
"""

from __future__ import annotations

from models.store.sqlite import hotpath as sqlite


class VisitorProbe(sqlite.VisitorProbe):
    __slots__ = ()
    BY_KEY = ("click", "visitor_key = ?1", 2)
    BY_IP_UA = ("click", "ip = ?1 AND ua_hash = ?2", 3)
