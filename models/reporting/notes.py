"""A report's notes that name money: who hides money never reads them."""

from __future__ import annotations

from collections.abc import Iterable


class MoneyNote(str):
    """A note that names payouts, costs or their currencies. It is a str (JSON, CSV headers and the CLI
    print it unchanged); the mark lets an answer for a principal who hides money leave it out."""

    __slots__ = ()


def without_money_notes(notes: Iterable[str]) -> list[str]:
    """The notes that name no money (the history's fallback, grouping names ...)."""
    return [note for note in notes if not isinstance(note, MoneyNote)]
