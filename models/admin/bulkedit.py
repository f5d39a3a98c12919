"""One change made to many offers or streams at once: a status, a stream weight, or a find-and-replace in
their URLs (an offer's URL, a redirect stream's target), previewed before it is applied.

Each item is changed through the same service a single edit calls (update_offer, update_stream), so it
is checked and audited as one. A preview runs the very same changes in a transaction it then rolls back,
so what it shows for each item (before → after, or why it is refused) is what applying would do; applying
runs them in one transaction, so either every item changes or, if one is refused, none does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from peewee import Database

from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminError
from models.choices import OFFER_STATUSES
from models.store.database import write_tx

MAX_ITEMS = 500  # One page of checked rows; each is an audited change.
MAX_TEXT = 2000  # A find or replace text: a URL's length.
STREAM_BULK_STATUSES = ("active", "disabled")  # Removing streams stays one by one, in the editor.


class BulkError(AdminError):
    """A bulk change that cannot be made as asked; one sentence for the user."""


@dataclass(frozen=True)
class BulkChange:
    """What to change on every item: None (or "" for `find`) leaves that part as it is."""

    status: str | None = None
    weight: int | None = None
    find: str = ""
    replace: str = ""

    def check(self, statuses: tuple[str, ...], *, has_weight: bool) -> None:
        if self.status is not None and self.status not in statuses:
            raise BulkError(f"The status is one of {', '.join(statuses)}.")
        if self.weight is not None and (not has_weight or not 0 <= self.weight <= 1_000_000):
            raise BulkError("A stream weight is a whole number from 0 to 1,000,000.")
        if len(self.find) > MAX_TEXT or len(self.replace) > MAX_TEXT:
            raise BulkError(f"Find and replace are at most {MAX_TEXT:,} characters each.")
        if self.replace and not self.find:
            raise BulkError("Say what to find in the URLs before what replaces it.")
        if self.status is None and self.weight is None and not self.find:
            raise BulkError("Choose a status, a weight or a text to find in the URLs.")


@dataclass(frozen=True)
class BulkItem:
    """One item's change: `before` and `after` of each field that would change (none: nothing to do),
    or `error`, why its service refuses it."""

    kind: str
    id: int
    name: str
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def changes(self) -> bool:
        return bool(self.after) and not self.error


def _checked_count(ids: list[int]) -> None:
    if not ids:
        raise BulkError("Tick the rows to change first.")
    if len(ids) > MAX_ITEMS:
        raise BulkError(f"Change at most {MAX_ITEMS} at a time.")


def offer_items(offers: Iterable, change: BulkChange) -> list[BulkItem]:
    """Each offer's fields before and after `change`."""
    items = []
    for offer in offers:
        before: dict[str, Any] = {}
        after: dict[str, Any] = {}
        if change.status is not None and change.status != offer.status:
            before["status"], after["status"] = offer.status, change.status
        if change.find and change.find in offer.url:
            before["url"], after["url"] = offer.url, offer.url.replace(change.find, change.replace)
        items.append(BulkItem("offer", offer.id, offer.name, before, after))
    return items


def stream_items(streams: Iterable, change: BulkChange) -> list[BulkItem]:
    """Each stream's fields before and after `change` (a URL only in a redirect stream's target)."""
    items = []
    for stream in streams:
        before: dict[str, Any] = {}
        after: dict[str, Any] = {}
        if change.status is not None and change.status != stream.status:
            before["status"], after["status"] = stream.status, change.status
        if change.weight is not None and change.weight != stream.weight:
            before["weight"], after["weight"] = stream.weight, change.weight
        if change.find and stream.action == "redirect" and change.find in stream.action_payload:
            target = stream.action_payload.replace(change.find, change.replace)
            before["url"], after["url"] = stream.action_payload, target
        items.append(BulkItem("stream", stream.id, stream.name or f"Stream {stream.id}", before, after))
    return items


def plan_offer_edits(db: Database, offers: list, change: BulkChange, *, actor: Principal = CLI):
    """The preview of `change` on `offers` (rows the caller may change): each item as applying would
    leave it, or refused with the reason; nothing is saved."""
    change.check(OFFER_STATUSES, has_weight=False)
    _checked_count([offer.id for offer in offers])
    return _dry_run(db, offer_items(offers, change), _offer_writer(db, actor))


def plan_stream_edits(db: Database, streams: list, change: BulkChange, *, actor: Principal = CLI):
    """As plan_offer_edits, for streams (of campaigns the caller may change)."""
    change.check(STREAM_BULK_STATUSES, has_weight=True)
    _checked_count([stream.id for stream in streams])
    return _dry_run(db, stream_items(streams, change), _stream_writer(db, actor))


def apply_offer_edits(db: Database, offers: list, change: BulkChange, *, actor: Principal = CLI):
    """Make `change` on every offer, in one transaction; BulkError naming the first refused (none saved)."""
    change.check(OFFER_STATUSES, has_weight=False)
    _checked_count([offer.id for offer in offers])
    return _apply(db, offer_items(offers, change), _offer_writer(db, actor))


def apply_stream_edits(db: Database, streams: list, change: BulkChange, *, actor: Principal = CLI):
    """As apply_offer_edits, for streams."""
    change.check(STREAM_BULK_STATUSES, has_weight=True)
    _checked_count([stream.id for stream in streams])
    return _apply(db, stream_items(streams, change), _stream_writer(db, actor))


Writer = Callable[[BulkItem], None]


def _offer_writer(db: Database, actor: Principal) -> Writer:
    from models.admin.services import update_offer

    def write(item: BulkItem) -> None:
        update_offer(db, item.id, actor=actor, **item.after)

    return write


def _stream_writer(db: Database, actor: Principal) -> Writer:
    from models.admin.services import update_stream

    def write(item: BulkItem) -> None:
        fields = dict(item.after)
        if "url" in fields:
            fields["payload"] = fields.pop("url")
        update_stream(db, item.id, actor=actor, **fields)

    return write


class _DryRun(Exception):
    """Raised to roll a preview's transaction back."""


def _dry_run(db: Database, items: list[BulkItem], write: Writer) -> list[BulkItem]:
    checked: list[BulkItem] = []
    try:
        with write_tx(db):
            for item in items:
                if not item.after:
                    checked.append(item)
                    continue
                try:
                    with write_tx(db):  # A savepoint: a refused item leaves the others' changes.
                        write(item)
                except AdminError as exc:
                    checked.append(replace(item, error=str(exc)))
                else:
                    checked.append(item)
            raise _DryRun
    except _DryRun:
        pass
    return checked


def _apply(db: Database, items: list[BulkItem], write: Writer) -> list[BulkItem]:
    with write_tx(db):
        for item in items:
            if not item.after:
                continue
            try:
                write(item)
            except AdminError as exc:
                raise BulkError(
                    f"{item.kind.title()} {item.name!r} cannot change: {exc} Nothing was changed."
                ) from None
    return items
