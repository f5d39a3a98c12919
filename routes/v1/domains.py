"""Domains: the host names campaigns are served on, a campaign parked at a root, HTTPS (admins only),
over models/admin/domains.py. A domain added or changed here gets its certificate from `lanner worker`
(the `get_certificate` task: certbot may take a minute), not from the request."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import falcon

from models.admin import domains
from models.choices import DOMAIN_STATUSES
from routes.v1.auth import require_admin
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, read_body

logger = logging.getLogger(__name__)

DOMAIN_FIELDS = (
    Field("campaign", "string", "The campaign (alias or id) `GET /` on the domain runs; '' for none."),
    Field("https", "boolean", "Get a certificate and serve HTTPS (default true)."),
    Field("redirect_http", "boolean", "Plain HTTP answers 301 to HTTPS."),
)
DOMAIN_CREATE = (
    Field("name", "string", "The host name, e.g. track.example.com.", required=True),
    *DOMAIN_FIELDS,
)
DOMAIN_UPDATE = (*DOMAIN_FIELDS, Field("status", "string", ", ".join(DOMAIN_STATUSES)))
CAMPAIGN_DOMAINS = (
    Field("domains", "strings", "The domains it is served on, its URL's first; [] for every domain.", True),
)


def certificate_queue(settings) -> Callable[[int], None]:
    """Queue a domain's `get_certificate` task; Huey is loaded at the first use (app.py's delivery_queue)."""

    @functools.cache
    def queue():
        from workers.runtime.tasks import create_huey

        return create_huey(settings)

    def enqueue(domain_id: int) -> None:
        try:
            queue().get_certificate(domain_id)
        except Exception:  # The domain is stored; `lanner domain cert` gets its certificate.
            logger.warning("could not queue the certificate of domain %s", domain_id, exc_info=True)

    return enqueue


def _changes(body: dict[str, Any]) -> dict[str, Any]:
    changes = {"campaign": body.get("campaign"), "redirect_http": body.get("redirect_http")}
    changes["is_https"] = body.get("https")
    if "status" in body:
        changes["status"] = body["status"]
    return changes


@api_resource
class DomainListResource:
    operations = {
        "GET": Operation(
            "Domains, by name, with each certificate's state and expiry (admins only).",
            params=(Param("all", "true: archived ones too.", "boolean"), *PAGE_PARAMS),
            paginated=True,
        ),
        "POST": Operation(
            "Add a domain (admins only); its certificate is got by the worker.",
            body=DOMAIN_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db, enqueue_certificate: Callable[[int], None]) -> None:
        self.auth, self.db, self.enqueue_certificate = auth, db, enqueue_certificate

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req, "or see domains")
        found = domains.list_domains(self.db, include_archived=req.get_param_as_bool("all", default=False))
        aliases = domains.campaign_aliases(self.db)
        items, following = page(req, found, lambda d: [d.id])
        answer(req, resp, {"items": [domains.domain_fields(d, aliases) for d in items], "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, DOMAIN_CREATE)
        require_admin(req, "domains")
        changes = _changes(body)
        domain = domains.create_domain(
            self.db,
            body["name"],
            campaign=changes["campaign"],
            is_https=True if changes["is_https"] is None else changes["is_https"],
            redirect_http=bool(changes["redirect_http"]),
            actor=req.context.principal,
        )
        self.enqueue_certificate(domain.id)
        answer(req, resp, domains.domain_fields(domain), falcon.HTTP_201)


@api_resource
class DomainResource:
    operations = {
        "GET": Operation("A domain (by name or id; admins only)."),
        "PATCH": Operation("Change a domain; fields left out stay (admins only).", body=DOMAIN_UPDATE),
        "DELETE": Operation("Remove a domain and the campaigns' links to it (admins only)."),
    }

    def __init__(self, auth, db, enqueue_certificate: Callable[[int], None]) -> None:
        self.auth, self.db, self.enqueue_certificate = auth, db, enqueue_certificate

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "or see domains")
        answer(req, resp, domains.domain_fields(domains.get_domain(self.db, ref)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, DOMAIN_UPDATE)
        require_admin(req, "domains")
        domain = domains.update_domain(self.db, ref, actor=req.context.principal, **_changes(body))
        if {"https", "redirect_http", "status"} & body.keys():
            self.enqueue_certificate(domain.id)  # The site rendered again, a certificate got if now wanted.
        answer(req, resp, domains.domain_fields(domain))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "domains")
        removed = domains.remove_domain(self.db, ref, actor=req.context.principal)
        answer(req, resp, {"removed": removed.name})


@api_resource
class CampaignDomainsResource:
    operations = {
        "GET": Operation("The domains a campaign is served on ([]: every domain; admins only)."),
        "PUT": Operation("Serve a campaign only on these domains (admins only).", body=CAMPAIGN_DOMAINS),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        from models.admin.services import get_campaign

        require_admin(req, "or see a campaign's domains")
        served = domains.campaign_domains(get_campaign(self.db, ref).id)
        answer(req, resp, {"domains": [d.name for d in served]})

    def on_put(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, CAMPAIGN_DOMAINS)
        require_admin(req, "a campaign's domains")
        served = domains.set_campaign_domains(self.db, ref, body["domains"], actor=req.context.principal)
        answer(req, resp, {"domains": [d.name for d in served]})
