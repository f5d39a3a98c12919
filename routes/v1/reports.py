"""Reports: the grouping, filter and metric language of `lanner report` and /api/report (routes/api.py)."""

from __future__ import annotations

import falcon

from models.admin.services import get_campaign
from models.reporting.history import HistoryFiles
from routes.api import FORMATS, check_report_parameters, report_from_parameters, send_report_csv
from routes.v1.auth import visible_campaigns
from routes.v1.spec import MONEY_FIELDS, Operation, Param, answer, api_resource

REPORT_PARAMS = (
    Param(
        "group",
        "Grouping levels, comma-separated: campaign, stream, offer, lander, country, day, hour, sub_id_1 ...",
    ),
    Param("preset", "today, yesterday, last_7_days, last_30_days, this_week, this_month, last_month ..."),
    Param("from", "Local date or date-time, inclusive (instead of preset)."),
    Param("to", "Local date or date-time, exclusive."),
    Param("timezone", "IANA name (default UTC)."),
    Param("campaign", "Campaign ids or aliases, comma-separated (as f.campaign=)."),
    Param("format", " or ".join(FORMATS)),
)
NAMES = tuple(p.name for p in REPORT_PARAMS)


@api_resource
class ReportResource:
    operations = {
        "GET": Operation(
            "A report; filters as f.<name>=v1,v2 (e.g. f.country=US,GB). Any other parameter is refused.",
            params=(*REPORT_PARAMS, Param("f.<name>", "A filter on a grouping name.")),
            open_query=True,
        )
    }

    def __init__(self, auth, db, report_currency: str, history: HistoryFiles | None = None) -> None:
        self.auth, self.db, self.report_currency = auth, db, report_currency
        self.history = history  # The columnar history's files (None: the rollups and row store only).

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        params = {}
        for name, value in req.params.items():
            if not isinstance(value, str):
                raise falcon.HTTPBadRequest(title="Repeated parameter", description=f"Give {name!r} once.")
            params[name] = value
        check_report_parameters(params, NAMES)
        visible = visible_campaigns(req)
        if visible is not None:
            refs = (params.get("campaign") or params.get("f.campaign") or "").split(",")
            ids = {get_campaign(self.db, ref.strip()).id for ref in refs if ref.strip()}
            if not ids or not ids <= visible:
                raise falcon.HTTPBadRequest(
                    title="Name a campaign", description="Name one of your campaigns."
                )
        report = report_from_parameters(self.db, params, self.report_currency, self.history)
        hides_money = req.context.principal.hides_money
        if params.get("format") == "csv":
            columns = [c for c in report.columns if not (hides_money and c in MONEY_FIELDS)]
            send_report_csv(resp, report, columns)
            return
        answer(req, resp, report.as_json())
