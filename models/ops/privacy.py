"""`lanner privacy anonymize-stored`: truncate the addresses of clicks stored with their full one.

LANNER_ANONYMIZE_IP truncates new clicks only (models/clicks/privacy.py); this does the same to the
ones stored before, in short chunks by id while the tracker serves. Their visitor keys stay as they
are (the full address's), so uniqueness and debounce do not change; geo was looked up when they
were tracked. Running it again changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from peewee import Database

from models.errors import LannerError
from models.store.database import write_tx
from models.store.privacy import PrivacyStore

CHUNK = 5000
PAUSE = 0.02  # Between chunks: the spool flusher takes the write lock in between.


class PrivacyError(LannerError, RuntimeError):
    """Stored clicks that cannot be anonymised now; the message says what to do."""


def anonymize_stored_clicks(db: Database, *, on_progress: Callable[[int, int], None] | None = None) -> int:
    """Truncate the address of every stored click that still has its full one; return how many changed."""
    store = PrivacyStore(db.connection())
    if not store.is_keyed():
        raise PrivacyError(
            "Migration 0005's visitor keys are not all built yet (`lanner db status`): run `lanner db "
            "run-deferred` first, or their uniqueness would be keyed by the truncated address."
        )
    low, high = store.id_range()
    total = high - low + 1 if high else 0
    changed = 0
    for start in range(low, high + 1, CHUNK) if high else ():
        with write_tx(db):
            changed += store.anonymize(start, start + CHUNK)
        if on_progress:
            on_progress(min(start + CHUNK, high + 1) - low, total)
        time.sleep(PAUSE)
    return changed
