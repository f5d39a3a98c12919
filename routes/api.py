"""`GET /api/report`: the report as JSON or CSV, for dashboards and scripts; API-key protected.

Parameters: `group=campaign,country` (nested levels), `preset=` or `from=`/`to=` (local dates or
date-times), `timezone=`, filters as `f.<name>=v1,v2` (e.g. `f.country=US,GB`), `format=json|csv`.
The key comes in the `X-Api-Key` header (or `api_key=`), compared in constant time.
"""

from __future__ import annotations

import csv
import io

import falcon

from models.postbacks import keys_match, read_secret
from models.reports import PrunedRangeError, ReportError, ReportQuery, parse_filters, run_report
from models.timerange import TimeRangeError


class ReportApiResource:
    def __init__(self, db) -> None:
        self.db = db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        given = req.get_header("X-Api-Key") or req.get_param("api_key") or ""
        if not keys_match(given, read_secret(self.db, "api_key")):
            raise falcon.HTTPForbidden(title="Wrong API key", description="Send the key in X-Api-Key.")
        params = {name: value if isinstance(value, str) else value[0] for name, value in req.params.items()}
        try:
            filters = parse_filters(
                tuple(f"{name[2:]}={value}" for name, value in params.items() if name.startswith("f."))
            )
            query = ReportQuery(
                group_by=tuple(g.strip() for g in params.get("group", "campaign").split(",") if g.strip()),
                filters=filters,
                preset=params.get("preset")
                or (None if ("from" in params or "to" in params) else "last_30_days"),
                since=params.get("from"),
                until=params.get("to"),
                timezone=params.get("timezone", "UTC"),
            )
            report = run_report(self.db, query)
        except PrunedRangeError as exc:  # A fine query over data that is gone: not a bad request.
            raise falcon.HTTPUnprocessableEntity(title="Clicks pruned", description=str(exc)) from None
        except (ReportError, TimeRangeError) as exc:
            raise falcon.HTTPBadRequest(title="Bad report query", description=str(exc)) from None
        if params.get("format") == "csv":
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=report.columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(report.rows)
            resp.content_type = "text/csv"
            resp.text = out.getvalue()
            return
        resp.media = {"rows": report.rows, "total": report.total, "sources": report.sources,
                      "start_ms": report.start_ms, "end_ms": report.end_ms}  # fmt: skip
