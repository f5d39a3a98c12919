"""The query parameters the log listings share (click, conversion, postback and delivery logs)."""

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


def campaign_id(db, req: falcon.Request, given: dict[str, str]) -> int | None:
    """The `campaign` parameter's id; a principal who sees only some campaigns must name one."""
    ref = given.pop("campaign", None)
    if ref is None:
        if visible_campaigns(req) is not None:
            raise falcon.HTTPBadRequest(title="Name a campaign", description="Name one of your campaigns.")
        return None
    campaign = get_campaign(db, ref)
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
