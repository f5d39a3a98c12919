"""PostgreSQL's sorted-log spelling: the database's collation may be a language's (`en_US`: case and
spaces weigh less), so text is compared and sorted `COLLATE "C"`, byte order, as SQLite and DuckDB do."""

from __future__ import annotations

from models.store import logorder as base


class LogSpelling(base.LogSpelling):
    __slots__ = ()
    dialect = "postgres"

    @staticmethod
    def bytewise(expr):
        return expr.collate('"C"')
