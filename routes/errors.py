"""The catch-all: log the traceback, answer a generic 500; HTTP errors pass through as they are."""

from __future__ import annotations

import logging

import falcon

logger = logging.getLogger(__name__)


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict) -> None:
    if isinstance(exc, falcon.HTTPError):
        raise exc
    logger.exception("unhandled error on %s %s", req.method, req.path)
    raise falcon.HTTPInternalServerError(
        title="Internal error", description="The tracker hit an unexpected error."
    )
