"""Exchange rates, /panel/rates: each currency's latest rate into the report currency and every day's
rate stored, for everyone; an admin sets a rate by hand for a day, or has the configured feed read now
(as `lanner currency rate set --day` and `lanner currency rate fetch` do; the rates are the install's,
as the status maps are)."""

from __future__ import annotations

import falcon

from models.reporting.currency import (
    CurrencyError,
    list_rates,
    parse_day,
    refresh_rates,
    report_currency,
    set_rates,
)
from routes.panel.common import PanelContext, PanelResource
from routes.panel.session import read_form

PATH = "/panel/rates"
HISTORY_ROWS = 400  # The newest; `lanner currency rate list --history` has them all.


class RatesResource(PanelResource):
    def __init__(self, panel: PanelContext) -> None:
        super().__init__(panel.sessions, panel.render)
        self.db, self.feed_url = panel.db, panel.settings.exchange_rate_url

    def show(self, req, resp, session, *, code=200, form=None, message="", notice="") -> None:
        history = list_rates(self.db, history=True)
        history.sort(key=lambda row: (row["valid_from"], row["currency"]), reverse=True)
        self.page(
            req,
            resp,
            "rates.html",
            session,
            code,
            report_currency=report_currency(self.db.connection()),
            latest=list_rates(self.db),
            history=history[:HISTORY_ROWS],
            more=max(0, len(history) - HISTORY_ROWS),
            feed_url=self.feed_url,
            is_admin=session.principal.is_admin,
            form=form or {"currency": "", "rate": "", "day": ""},
            message=message,
            notice=notice,
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.show(req, resp, self.sessions.require(req))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        if not session.principal.is_admin:
            raise falcon.HTTPForbidden(
                title="Not allowed", description="Only an admin may change exchange rates."
            )
        action = form.get("do")
        if action == "set":
            entered = {name: str(form.get(name, "")).strip() for name in ("currency", "rate", "day")}
            try:
                day = parse_day(entered["day"]) if entered["day"] else None
                (change,) = set_rates(
                    self.db, {entered["currency"]: entered["rate"]}, source="panel", day=day
                )
            except CurrencyError as exc:
                self.show(req, resp, session, code=400, form=entered, message=str(exc))
                return
            self.show(req, resp, session, notice=change.summary(report_currency(self.db.connection())))
            return
        if action == "fetch":
            if not self.feed_url:
                self.show(
                    req,
                    resp,
                    session,
                    code=409,
                    message="LANNER_EXCHANGE_RATE_URL is empty: set rates by hand.",
                )
                return
            try:
                result = refresh_rates(self.db, self.feed_url)
            except CurrencyError as exc:  # The feed's failure, in one sentence; the stored rates stay.
                self.show(req, resp, session, code=502, message=str(exc))
                return
            self.show(req, resp, session, notice=result.summary())
            return
        raise falcon.HTTPBadRequest(title="Bad form", description="This form asks for nothing the page does.")


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route(PATH, RatesResource(panel))
