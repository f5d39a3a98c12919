"""deliveries: SQLite's statements (models/store/sqlite/deliveries.py) mean the same on PostgreSQL."""

from __future__ import annotations

from models.store.sqlite import deliveries as sqlite


class DeliveryStore(sqlite.DeliveryStore):
    __slots__ = ()
    dialect = "postgres"
