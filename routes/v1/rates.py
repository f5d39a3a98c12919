"""Exchange rates: each currency's rate into the report currency by day (models/reporting/currency.py),
read by every principal; set by hand, or fetched from the configured feed now, by an admin (the rates
are the install's, as the status maps are)."""

from __future__ import annotations

import falcon

from models.reporting.currency import list_rates, parse_day, refresh_rates, report_currency, set_rates
from routes.v1.auth import require_admin
from routes.v1.spec import Field, Operation, Param, answer, api_resource, read_body

RATES_SET = (
    Field(
        "rates",
        "numbers",
        'What one unit of each currency is worth in the report currency: {"EUR": 1.08}.',
        required=True,
    ),
    Field("day", "string", "YYYY-MM-DD (UTC) it applies from; default today. No fetch replaces it."),
)


def _rates(db, history: bool) -> dict:
    return {"currency": report_currency(db.connection()), "items": list_rates(db, history=history)}


@api_resource
class RateListResource:
    operations = {
        "GET": Operation(
            "The latest rate of each currency into the report currency (`history`: every day's).",
            params=(Param("history", "true: every rate stored, by currency and day.", "boolean"),),
        ),
        "PUT": Operation(
            "Set rates by hand (admin) for a day and the days after it up to the next stored rate; that "
            "day's conversions are converted again at them.",
            body=RATES_SET,
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer(req, resp, _rates(self.db, req.get_param_as_bool("history", default=False)))

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, RATES_SET)
        require_admin(req, "exchange rates")
        if not body["rates"]:
            raise falcon.HTTPBadRequest(title="Refused", description="Give at least one rate.")
        day = parse_day(body["day"]) if "day" in body else None
        changes = set_rates(self.db, body["rates"], source="api", day=day)
        answer(
            req,
            resp,
            {
                "currency": report_currency(self.db.connection()),
                "set": [
                    {"currency": c.currency, "rate": c.rate, "day": c.day, "converted": c.converted}
                    for c in changes
                ],
            },
        )


@api_resource
class RateFetchResource:
    operations = {
        "POST": Operation(
            "Read the configured rate feed (LANNER_EXCHANGE_RATE_URL) now and store its new or changed "
            "rates (admin); rates set by hand stay. 400 with the reason if the feed cannot be read.",
        ),
    }

    def __init__(self, auth, db, url: str) -> None:
        self.auth, self.db, self.url = auth, db, url

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req, "exchange rates")
        if not self.url:
            raise falcon.HTTPConflict(
                title="No feed", description="LANNER_EXCHANGE_RATE_URL is empty: rates are set by hand here."
            )
        result = refresh_rates(self.db, self.url)
        stored = [
            {"currency": c.currency, "rate": c.rate, "day": c.day, "converted": c.converted}
            for c in result.stored
        ]
        answer(req, resp, {"days": result.days, "stored": stored, "kept_manual": result.kept_manual})
