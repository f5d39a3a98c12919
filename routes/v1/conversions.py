"""Conversions: the log, a manual import from CSV, the correction of one (models/conversions/manual.py)."""

from __future__ import annotations

import falcon

from models.choices import CONVERSION_STATUSES
from models.conversions.manual import (
    IMPORT_COLUMNS,
    correct_conversion,
    get_conversion,
    import_conversions,
    verdict_counts,
)
from models.reporting.conversionlog import LogFilter, list_conversions
from routes.v1.auth import require_campaign, visible_campaigns
from routes.v1.logs import CAMPAIGN_PARAM, LOG_PARAMS, campaign_id, log_options
from routes.v1.pagination import log_page
from routes.v1.spec import Field, Operation, Param, answer, api_resource, check_params, read_body, read_raw

CONVERSION_LOG_PARAMS = (
    CAMPAIGN_PARAM,
    Param("subid"),
    Param("status", "lead, sale, rejected, rebill, trash, or an unmapped word."),
    *LOG_PARAMS,
)
CORRECTION = (
    Field("status", "string", ", ".join(CONVERSION_STATUSES) + "."),
    Field("payout", "number"),
    Field("currency", "string", "The payout's currency."),
)


@api_resource
class ConversionListResource:
    operations = {
        "GET": Operation(
            "Conversions, newest first (by when they were first recorded).",
            params=CONVERSION_LOG_PARAMS,
            paginated=True,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = check_params(req, CONVERSION_LOG_PARAMS)
        chosen = campaign_id(self.db, req, given)
        options = log_options(req, given)
        query = LogFilter(campaign_id=chosen, subid=given.get("subid"), status=given.get("status"), **options)
        items, following = log_page(list_conversions(self.db, query), options["limit"] - 1)
        answer(req, resp, {"items": items, "next": following})


@api_resource
class ConversionImportResource:
    operations = {
        "POST": Operation(
            "Import conversions from CSV (text/csv), applied as postbacks are: a header naming some of "
            + ", ".join(IMPORT_COLUMNS)
            + " (subid required), then one conversion a line. Each line's verdict is answered.",
            body_type="csv",
        )
    }

    def __init__(self, auth, db, recorder) -> None:
        self.auth, self.db, self.recorder = auth, db, recorder

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        if (req.content_type or "").split(";")[0].strip().lower() != "text/csv":
            raise falcon.HTTPUnsupportedMediaType(title="Not CSV", description="Send the file as text/csv.")
        try:
            text = read_raw(req).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise falcon.HTTPBadRequest(title="Bad CSV", description="The CSV is not UTF-8 text.") from None
        if visible_campaigns(req) is not None:  # A row's campaign is known only once it is applied.
            raise falcon.HTTPForbidden(
                title="Admins only", description="Importing conversions is for admins."
            )
        rows = import_conversions(
            self.recorder, text, remote_ip=req.remote_addr or "", actor=req.context.principal
        )
        answer(req, resp, {"rows": [row.as_dict() for row in rows], "verdicts": verdict_counts(rows)})


@api_resource
class ConversionResource:
    operations = {
        "PATCH": Operation(
            "Correct one conversion: its status (any may replace any) and/or its payout; costs, rollups and "
            "outbound postbacks follow.",
            body=CORRECTION,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_patch(self, req: falcon.Request, resp: falcon.Response, conversion_id: int) -> None:
        body = read_body(req, CORRECTION)
        require_campaign(req, get_conversion(conversion_id).campaign_id)
        if req.context.principal.hides_money and ({"payout", "currency"} & set(body)):
            # As the panel: a payout this user is not shown is not theirs to set either.
            raise falcon.HTTPForbidden(title="Money hidden", description="This user does not set payouts.")
        conversion = correct_conversion(self.db, conversion_id, actor=req.context.principal, **body)
        answer(req, resp, {name: getattr(conversion, name) for name in CONVERSION_FIELDS})


CONVERSION_FIELDS = (
    "id",
    "subid",
    "tid",
    "status",
    "original_status",
    "previous_status",
    "raw_status",
    "payout",
    "currency",
    "report_payout",
    "cost",
    "campaign_id",
    "stream_id",
    "offer_id",
    "network",
)
