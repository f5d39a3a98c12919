"""The domains page (admins only): every domain with its parked campaign and its certificate's state
and expiry, the add form, and each domain's edit form, over the services `lanner domain` and
`/api/v1/domains` call (models/admin/domains.py). A certificate is got by `lanner worker` (the
`get_certificate` task), as for the API: certbot may take a minute."""

from __future__ import annotations

import falcon

from models.admin.domains import (
    campaign_aliases,
    create_domain,
    domain_fields,
    get_domain,
    list_domains,
    remove_domain,
    update_domain,
)
from models.admin.services import AdminError, list_campaigns
from models.choices import DOMAIN_STATUSES
from routes.panel.common import PanelContext, PanelResource
from routes.panel.session import read_form
from routes.panel.system import require_admin
from routes.v1.domains import certificate_queue

BLANK_FORM = {"name": "", "campaign": "", "https": "1", "redirect_http": "", "status": "active"}


def submitted(req) -> dict:
    form = read_form(req)
    values = {name: str(form.get(name, "")).strip() for name in BLANK_FORM}
    values["csrf_token"] = str(form.get("csrf_token", ""))
    values["remove"] = str(form.get("remove", ""))
    return values


class DomainPages(PanelResource):
    def __init__(self, panel: PanelContext) -> None:
        super().__init__(panel.sessions, panel.render)
        self.enqueue_certificate = certificate_queue(panel.settings)

    def show_list(self, req, resp, session, *, code=200, form=None, message="") -> None:
        aliases = campaign_aliases(self.sessions.db)
        rows = [domain_fields(d, aliases) for d in list_domains(self.sessions.db, include_archived=True)]
        campaigns = [c.alias for c in list_campaigns(self.sessions.db)]
        self.page(
            req,
            resp,
            "domains.html",
            session,
            code,
            rows=rows,
            form=form or BLANK_FORM,
            message=message,
            campaigns=campaigns,
        )


class DomainListResource(DomainPages):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = require_admin(self.sessions, req, "domains")
        self.show_list(req, resp, session)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = require_admin(self.sessions, req, "domains")
        values = submitted(req)
        self.sessions.check_write(req, session, values)
        try:
            domain = create_domain(
                self.sessions.db,
                values["name"],
                campaign=values["campaign"] or None,
                is_https=bool(values["https"]),
                redirect_http=bool(values["redirect_http"]),
                actor=session.principal,
            )
        except AdminError as exc:
            self.show_list(req, resp, session, code=400, form=values, message=str(exc))
            return
        self.enqueue_certificate(domain.id)
        raise falcon.HTTPSeeOther(f"/panel/domains/{domain.id}?created=1")


class DomainResource(DomainPages):
    def domain(self, domain_id: int):
        try:
            return get_domain(self.sessions.db, domain_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, domain_id: int) -> None:
        session = require_admin(self.sessions, req, "domains")
        domain = self.domain(domain_id)
        fields = domain_fields(domain)
        form = {
            "name": domain.name,
            "campaign": fields["root_campaign"] or "",
            "https": "1" if domain.is_https else "",
            "redirect_http": "1" if domain.redirect_http else "",
            "status": domain.status,
        }
        saved = (
            "Added: the worker gets its certificate."
            if req.get_param("created")
            else ("Saved." if req.get_param("saved") else "")
        )
        self.show(req, resp, session, fields, form, saved=saved)

    def show(self, req, resp, session, fields, form, *, code=200, message="", saved="") -> None:
        campaigns = [c.alias for c in list_campaigns(self.sessions.db)]
        self.page(
            req,
            resp,
            "domain.html",
            session,
            code,
            domain=fields,
            form=form,
            message=message,
            saved=saved,
            statuses=DOMAIN_STATUSES,
            campaigns=campaigns,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, domain_id: int) -> None:
        session = require_admin(self.sessions, req, "domains")
        values = submitted(req)
        self.sessions.check_write(req, session, values)
        domain = self.domain(domain_id)
        if values["remove"]:
            remove_domain(self.sessions.db, domain.id, actor=session.principal)
            raise falcon.HTTPSeeOther("/panel/domains")
        try:
            update_domain(
                self.sessions.db,
                domain.id,
                campaign=values["campaign"],
                is_https=bool(values["https"]),
                redirect_http=bool(values["redirect_http"]),
                status=values["status"],
                actor=session.principal,
            )
        except AdminError as exc:
            self.show(req, resp, session, domain_fields(domain), values, code=400, message=str(exc))
            return
        self.enqueue_certificate(domain.id)
        raise falcon.HTTPSeeOther(f"/panel/domains/{domain.id}?saved=1")


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/domains", DomainListResource(panel))
    app.add_route("/panel/domains/{domain_id:int(min=1, max=9223372036854775807)}", DomainResource(panel))
