"""The error every account refusal raises (a bad name, a short password, the last admin)."""

from __future__ import annotations

from models.errors import LannerError


class AccountError(LannerError, ValueError):
    """An account change that cannot be made; the message is one sentence for the user."""
