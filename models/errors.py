"""The one base of every error a user can act on.

Each refusal in the domain (a bad filter, an unknown campaign, a range before a prune, a backup that
cannot be written ...) raises a subclass of LannerError whose message is one sentence saying what
to do; the CLI turns any of them into that sentence and exit status 1 in one place (cli/__init__.py,
LannerGroup), the API into a 4xx (by type: NotFoundError 404, ConflictError 409, routes/v1/spec.py).
They also keep their older bases (ValueError, RuntimeError), so code that caught those still does.
"""

from __future__ import annotations


class LannerError(Exception):
    """An operation refused, or failed for a reason the user can act on; the message says which."""


class NotFoundError(LannerError):
    """The thing the operation names is not there (the API answers 404). Each domain's own error class has
    a subclass that is also this one, so callers catching the domain's class still catch it."""


class ConflictError(LannerError):
    """The thing the operation would create is there already (the API answers 409)."""
