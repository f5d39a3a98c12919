"""Affiliate networks and the bundled catalogue of their postback templates, over
models/conversions/networks.py. Everyone sees networks (offers name them); only an admin changes one,
as only an admin changes status maps, which a network's are."""

from __future__ import annotations

import falcon

from models.admin.views import network_fields
from models.choices import NETWORK_REBILLS, NETWORK_STATUS_CHANGES, NETWORK_STATUSES
from models.conversions import networks
from routes.v1.auth import require_admin
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, answer, api_resource, read_body

MACROS = (
    Field("subid_macro", "string", "The network's macro for the subid it was sent, e.g. {sub1}."),
    Field("payout_macro", "string", "Its macro for the payout, e.g. {sum}; empty for none."),
    Field("status_macro", "string", "Its macro for the status word; empty for none."),
    Field("tid_macro", "string", "Its macro for the transaction id; empty for none."),
    Field("currency_macro", "string", "Its macro for the payout's currency; empty for none."),
    Field("offer_params", "string", "What its offer URLs add to send the subid, e.g. sub1={subid}."),
    Field("notes", "string"),
    Field(
        "status_changes",
        "string",
        f"{' or '.join(NETWORK_STATUS_CHANGES)}: which status changes its postbacks may make (any: "
        "rejected → approved and back too).",
    ),
    Field(
        "rebills",
        "string",
        f"{' or '.join(NETWORK_REBILLS)}: a rebill status with its own tid, or a click's second "
        "approved postback (a new tid) is a rebill.",
    ),
)
NETWORK_CREATE = (
    Field("name", "string", required=True),
    Field("alias", "string", "Its from= in postbacks, fixed once made (default: the name in lowercase)."),
    Field("template", "string", "A catalogue key (GET /network-templates): its macros and status words."),
    *MACROS,
)
NETWORK_UPDATE = (
    Field("name", "string"),
    Field("status", "string", ", ".join(NETWORK_STATUSES)),
    *MACROS,
)


def network_answer(db, network) -> dict:
    """A network with its status maps and its postback URL's query (the key is shown to nobody here)."""
    return network_fields(network) | {
        "postback_query": networks.postback_url(network, "", "").split("?", 1)[1],
        "status_maps": [
            {"word": m["raw_status"], "status": m["status"]}
            for m in networks.network_status_maps(db, network)
        ],
    }


@api_resource
class NetworkListResource:
    operations = {
        "GET": Operation(
            "Affiliate networks, by id (archived ones too).", params=PAGE_PARAMS, paginated=True
        ),
        "POST": Operation(
            "Create a network, from a catalogue template or with its subid macro (admins).",
            body=NETWORK_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        items, following = page(req, networks.list_networks(self.db), lambda n: [n.id])
        answer(req, resp, {"items": [network_fields(n) for n in items], "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, NETWORK_CREATE)
        require_admin(req, "networks")
        created = networks.create_network(
            self.db,
            body.pop("name"),
            alias=body.pop("alias", None),
            from_template=body.pop("template", None),
            actor=req.context.principal,
            **body,
        )
        answer(req, resp, network_answer(self.db, created), falcon.HTTP_201)


@api_resource
class NetworkResource:
    operations = {
        "GET": Operation("A network (by id or alias) with its status maps."),
        "PATCH": Operation(
            "Change a network (admins); its alias stays. Archive: status archived.", body=NETWORK_UPDATE
        ),
        "DELETE": Operation("Delete a network no offer belongs to (admins; 409 naming them otherwise)."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        answer(req, resp, network_answer(self.db, networks.get_network(self.db, ref)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, NETWORK_UPDATE)
        networks.get_network(self.db, ref)
        require_admin(req, "networks")
        changed = networks.update_network(self.db, ref, actor=req.context.principal, **body)
        answer(req, resp, network_answer(self.db, changed))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        network = networks.get_network(self.db, ref)
        require_admin(req, "networks")
        networks.delete_network(self.db, network.id, actor=req.context.principal)
        answer(req, resp, {"deleted": network.id, "alias": network.alias})


@api_resource
class TemplateListResource:
    operations = {"GET": Operation("The bundled catalogue of network templates: a starting point to check.")}

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        from dataclasses import asdict

        items = [asdict(entry) for entry in networks.catalogue().values()]
        answer(req, resp, {"items": items, "about": networks.catalogue_note()})
