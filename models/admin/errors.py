"""The error every campaign, stream, offer, lander, traffic source and network refusal raises.

Below every admin module, and below the access rules (models/accounts/access.py) that answer
AdminNotFound for what a principal may not see: they raise it without importing the services.
"""

from __future__ import annotations

from models.errors import ConflictError, LannerError, NotFoundError


class AdminError(LannerError, ValueError):
    """A change that cannot be made; the message is one sentence for the user."""


class AdminNotFound(AdminError, NotFoundError):
    """The campaign, stream, offer or user named is not there."""


class AdminConflict(AdminError, ConflictError):
    """The alias asked for is taken."""
