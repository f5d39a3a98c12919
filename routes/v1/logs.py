"""The query parameters the log listings share (click, conversion, postback and delivery logs).

Each log names the parameters it takes; any other is refused, naming the valid ones, since a
misspelt filter silently ignored answers rows for everything.
"""

from __future__ import annotations

from typing import Any

import falcon

from models.admin.services import get_campaign
from routes.v1.auth import require_campaign, visible_campaigns
from routes.v1.pagination import id_cursor, page_limit
from routes.v1.spec import PAGE_PARAMS, Param

RANGE_PARAMS = (
    Param("from", "YYYY-MM-DD or YYYY-MM-DDTHH:MM in `timezone`, inclusive."),
    Param("to", "YYYY-MM-DD (the whole day) or YYYY-MM-DDTHH:MM, exclusive."),
    Param("timezone", "IANA name for from/to and the times shown (default UTC)."),
)
CAMPAIGN_PARAM = Param("campaign", "Campaign id or alias.")


def check_params(req: falcon.Request, params: tuple[Param, ...]) -> dict[str, str]:
    """The query parameters, one value each; 400 for one the route does not take."""
    names = [p.name for p in params]
    given = {}
    for name, value in req.params.items():
        if name not in names:
            raise falcon.HTTPBadRequest(
                title="Unknown parameter",
                description=f"Unknown parameter {name[:40]!r}; use {', '.join(names)}.",
            )
        if not isinstance(value, str):
            raise falcon.HTTPBadRequest(title="Repeated parameter", description=f"Give {name!r} once.")
        given[name] = value
    return given


def campaign_id(req: falcon.Request, given: dict[str, str]) -> int | None:
    """The `campaign` parameter's id; a principal who sees only some campaigns must name one."""
    ref = given.pop("campaign", None)
    if ref is None:
        if visible_campaigns(req) is not None:
            raise falcon.HTTPBadRequest(title="Name a campaign", description="Name one of your campaigns.")
        return None
    campaign = get_campaign(ref)
    require_campaign(req, campaign.id)
    return campaign.id


def log_options(req: falcon.Request, given: dict[str, str]) -> dict[str, Any]:
    """LogFilter/ClickFilter fields common to every log: the range, the page (one row more than asked)."""
    options: dict[str, Any] = {
        "since": given.pop("from", None),
        "until": given.pop("to", None),
        "timezone": given.pop("timezone", "UTC"),
        "limit": page_limit(req) + 1,
        "before_id": id_cursor(req),
    }
    given.pop("limit", None)
    given.pop("cursor", None)
    return options


LOG_PARAMS = (*RANGE_PARAMS, *PAGE_PARAMS)
