"""The click log: stored clicks with filters, newest first, by cursor (models/reporting/clicklog.py)."""

from __future__ import annotations

import falcon

from models.clicks.record import MAX_ID
from models.reporting.clicklog import ClickFilter, list_clicks, stored_click
from models.reporting.historyclicks import click_history
from routes.v1.auth import require_campaign
from routes.v1.logs import CAMPAIGN_PARAM, LOG_PARAMS, campaign_id, log_options
from routes.v1.pagination import log_page
from routes.v1.spec import Operation, Param, answer, api_resource, check_params

CLICK_LOG_PARAMS = (
    CAMPAIGN_PARAM,
    Param("stream", "Stream id.", "integer"),
    Param("offer", "Offer id.", "integer"),
    Param("country", "ISO code, or `unknown`."),
    Param("bots", "true: only bots; false: only humans (default both).", "boolean"),
    *LOG_PARAMS,
)


@api_resource
class ClickLogResource:
    operations = {
        "GET": Operation(
            "Stored clicks, newest first, each with its decision path in words (`path`).",
            params=CLICK_LOG_PARAMS,
            paginated=True,
        )
    }

    def __init__(self, auth, db, settings=None) -> None:
        # Clicks LANNER_RAW_RETENTION took from the row store come from the history.
        self.history = click_history(settings) if settings is not None else None
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = check_params(req, CLICK_LOG_PARAMS)
        chosen = campaign_id(self.db, req, given)
        options = log_options(req, given)
        query = ClickFilter(
            campaign_id=chosen,
            stream_id=req.get_param_as_int("stream", min_value=0, max_value=MAX_ID),
            offer_id=req.get_param_as_int("offer", min_value=0, max_value=MAX_ID),
            country=given.get("country"),
            is_bot=req.get_param_as_bool("bots"),
            **options,
        )
        items, following = log_page(list_clicks(self.db, query, self.history), options["limit"] - 1)
        answer(req, resp, {"items": items, "next": following})


@api_resource
class ClickResource:
    operations = {
        "GET": Operation(
            "A stored click with its decision path as it happened (`path`, in words) and, beside it,"
            " each stream's filters as they are today re-evaluated on the stored values (`streams`)."
        )
    }

    def __init__(self, auth, db, settings) -> None:
        self.auth, self.db, self.settings = auth, db, settings

    def on_get(self, req: falcon.Request, resp: falcon.Response, subid: str) -> None:
        data = stored_click(
            self.db,
            subid,
            geo_path=self.settings.geo_path,
            geo_network_paths=self.settings.geo_network_paths,
            history=click_history(self.settings),
        )
        require_campaign(req, data["click"]["campaign_id"])
        answer(req, resp, data)
