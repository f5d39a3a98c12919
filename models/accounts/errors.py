"""The error every account refusal raises (a bad name, a short password, the last admin)."""

from __future__ import annotations

from models.errors import ConflictError, LannerError, NotFoundError


class AccountError(LannerError, ValueError):
    """An account change that cannot be made; the message is one sentence for the user."""


class AccountNotFound(AccountError, NotFoundError):
    """The user or API key named is not there."""


class AccountConflict(AccountError, ConflictError):
    """The user name asked for is taken."""
