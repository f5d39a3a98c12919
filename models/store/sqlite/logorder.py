"""SQLite's sorted-log spelling: text compares bytewise already (BINARY, the default collation)."""

from __future__ import annotations

from models.store import logorder as base


class LogSpelling(base.LogSpelling):
    __slots__ = ()
    dialect = "sqlite"

    @staticmethod
    def bytewise(expr):
        return expr
