"""The catch-all: log the traceback, answer a generic 500; HTTP errors pass through as they are."""

from __future__ import annotations

import logging
import re

import falcon

logger = logging.getLogger(__name__)

_KEYED_PATH = re.compile(r"^/[^/]+/postback$")


def mask_path(path: str) -> str:
    """The path as it may be logged: the key of `/<key>/postback` masked."""
    return "/…/postback" if _KEYED_PATH.match(path) else path


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict) -> None:
    if isinstance(exc, falcon.HTTPError):
        raise exc
    # The path of `/<key>/postback` is the postback key: never in a log.
    logger.exception("unhandled error on %s %s", req.method, mask_path(req.path))
    raise falcon.HTTPInternalServerError(
        title="Internal error", description="The tracker hit an unexpected error."
    )
