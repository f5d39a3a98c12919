"""The error the bench stops with: below the harness and every scenario, so each raises it without
importing another."""

from __future__ import annotations

from models.errors import LannerError


class BenchError(LannerError, RuntimeError):
    """The bench cannot go on; the message says why (and where the logs are)."""
