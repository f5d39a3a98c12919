"""A stream's split test (its offers or landers side by side, with a verdict that peeking cannot fool)
and, for a stream in a bandit rotation, the shares its clicks go by: over models/reporting/splittest.py
and models/reporting/bandits.py."""

from __future__ import annotations

import falcon

from models.admin import services
from models.choices import SPLIT_TEST_METRICS
from models.reporting.bandits import stream_shares
from models.reporting.history import HistoryFiles
from models.reporting.splittest import ARM_KINDS, split_test
from routes.v1.auth import require_campaign
from routes.v1.spec import Operation, Param, answer, api_resource

SPLIT_TEST_PARAMS = (
    Param("arms", f"{' or '.join(ARM_KINDS)} (default offer): what the test compares."),
    Param(
        "metric",
        f"{' or '.join(SPLIT_TEST_METRICS)}: the rate the verdict judges (default: an offer's cr, a "
        "lander's lp_ctr, LP clicks / lander views; lp_ctr only for landers).",
    ),
    Param("from", "Local date or date-time, inclusive (default: the stream's first click)."),
    Param("to", "Local date or date-time, exclusive."),
    Param("timezone", "IANA name (default UTC)."),
)


@api_resource
class SplitTestResource:
    operations = {
        "GET": Operation(
            "The stream's split test: each arm's clicks, conversions and CR (a lander's also lp_views, "
            "lp_clicks and lp_ctr), the verdict (winner or no_winner_yet) on `metric` of a sequential "
            "test valid however often it is read, and a bandit rotation's current shares.",
            params=SPLIT_TEST_PARAMS,
        )
    }

    def __init__(self, auth, db, history: HistoryFiles | None = None) -> None:
        self.auth, self.db = auth, db
        self.history = history  # The columnar history's files (a lander test reads it).

    def on_get(self, req: falcon.Request, resp: falcon.Response, stream_id: int) -> None:
        stream = services.get_stream(self.db, stream_id)
        require_campaign(req, stream.campaign_id)
        arm_kind = req.get_param("arms") or "offer"
        test = split_test(
            self.db,
            stream_id,
            arm_kind=arm_kind,
            metric=req.get_param("metric"),
            since=req.get_param("from"),
            until=req.get_param("to"),
            timezone=req.get_param("timezone") or "UTC",
            history=self.history,
        )
        bandit = stream_shares(self.db, stream_id, arm_kind)
        if req.context.principal.hides_money:
            bandit = [{key: value for key, value in row.items() if key != "revenue"} for row in bandit]
        answer(
            req,
            resp,
            {
                **test.as_json(),
                "offer_rotation": stream.offer_rotation,
                "lander_rotation": stream.lander_rotation,
                "bandit": bandit,
            },
        )
