"""What the dialects' connections share with the neutral handle (models/store/database.py), which
imports their packages to connect: they import this, never it back."""

from __future__ import annotations

from models.errors import LannerError

# How long a write waits for a lock held by another before it is StoreBusy: SQLite's busy_timeout,
# PostgreSQL's lock_timeout (ms).
BUSY_TIMEOUT_MS = 5000


class PostgresUnreachable(LannerError):
    """A process could not open its first connection to PostgreSQL: said once, in one sentence, at its
    start (models/store/postgres/database.py raises it)."""
