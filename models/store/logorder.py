"""How a dialect spells a sorted log's text order (models/reporting/logorder.py builds the order): byte
order, the order of SQLite's BINARY collation, of DuckDB's history and of Python's `str`, so a page merged
from the row store and the history is in one order and a keyset cursor means the same on both dialects."""

from __future__ import annotations

from abc import abstractmethod

from models.store.rows import Dialectal


class LogSpelling(Dialectal):
    __slots__ = ()

    @staticmethod
    @abstractmethod
    def bytewise(expr):
        """A text expression compared and sorted byte by byte."""


def spelling_for(conn) -> type[LogSpelling]:
    """The spelling of the dialect `conn` (a raw connection) speaks."""
    return LogSpelling.sibling_for(conn)
