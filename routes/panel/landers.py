"""The landers pages (/panel/landers): the list with the streams sending to each, a new lander (remote:
its URL; local: a zip uploaded with the form) and a lander's page (its fields, a new zip, a preview,
delete), over the services `lanner lander` and `/api/v1/landers` call
(models/admin/landers.py). Who sees and changes which is models/accounts/access.py's.

The forms are multipart (a file rides with them): read here within the zip's bound plus room for the
text fields, 413 past it before any of it is read; the CSRF token is a field as in every form.
"""

from __future__ import annotations

from typing import Any

import falcon

from models.accounts.access import (
    creates_campaigns,
    edits_lander,
    visible_campaign_ids,
    visible_lander,
    visible_lander_ids,
)
from models.admin.landers import (
    LANDER_STATUSES,
    LanderFiles,
    create_lander,
    delete_lander,
    lander_fields,
    lander_uses,
    list_landers,
    update_lander,
)
from models.admin.services import AdminError
from models.reporting.columnpages import LANDERS_PAGE
from routes.panel.columnsets import ListSets
from routes.panel.common import FormError, ListFilter, PanelContext, PanelResource
from routes.panel.listtable import Column, ListTable, ListView, chooser_context, send_csv
from routes.panel.session import read_form

PATH = "/panel/landers"
FIELDS = ("name", "kind", "url", "notes", "status", "do", "csrf_token")
FORM_ROOM = 64 * 1024  # The text fields and the multipart framing around the zip.
BLANK_FORM = {"name": "", "kind": "remote", "url": "", "notes": "", "status": "active"}
DONE = {"created": "Lander created.", "saved": "Saved.", "uploaded": "New zip in place."}


def read_lander_form(req: falcon.Request, max_bytes: int) -> tuple[dict[str, str], bytes | None]:
    """The form's text fields and its zip (None when no file was chosen), multipart or urlencoded."""
    if req.content_length is None:
        raise falcon.HTTPLengthRequired(title="Length required", description="Send the form with its length.")
    if req.content_length > max_bytes + FORM_ROOM:
        raise falcon.HTTPContentTooLarge(
            title="Zip too large",
            description=f"A lander's zip may be at most {max_bytes:,} bytes (LANNER_LANDER_MAX_BYTES).",
        )
    if (req.content_type or "").split(";")[0].strip().lower() != falcon.MEDIA_MULTIPART:
        return {name: str(value) for name, value in read_form(req).items() if name in FIELDS}, None
    fields: dict[str, str] = {}
    data = None
    try:
        for part in req.get_media():
            if part.name == "zip" and data is None:
                data = part.stream.read()  # Bounded: the whole body is.
                if not part.filename and not data:
                    data = None  # No file chosen: the browser sends an empty part.
            elif part.name in FIELDS and part.name not in fields:
                fields[part.name] = part.stream.read(FORM_ROOM).decode("utf-8")
            else:
                part.stream.read()
    except UnicodeDecodeError:
        raise falcon.HTTPBadRequest(title="Bad form", description="A field is not UTF-8 text.") from None
    except falcon.MediaMalformedError:
        raise falcon.HTTPBadRequest(title="Bad form", description="The form could not be read.") from None
    return fields, data


class LanderPages(PanelResource):
    def __init__(self, panel: PanelContext) -> None:
        super().__init__(panel.sessions, panel.render)
        self.db = panel.db
        self.files = LanderFiles.from_settings(panel.settings)

    @staticmethod
    def preview(req, fields: dict) -> str:
        """Where this browser sees a local lander: its path on the host the panel came from (nginx, the
        web workers or the admin worker: each serves /landers/ the same way, sandboxed)."""
        return fields["path"]

    def read(self, req, session) -> tuple[dict[str, str], bytes | None]:
        values, data = read_lander_form(req, self.files.max_bytes)
        self.sessions.check_write(req, session, values)
        return {name: values.get(name, "").strip() for name in (*BLANK_FORM, "do")}, data


# The list's columns: "Used by" names the streams of the campaigns the user sees (alias #stream).
LANDER_TABLE = ListTable(
    (
        Column("name", "Lander", lambda row: row["name"], "text"),
        Column("address", "URL or path", lambda row: row["url"] or row["path"], "text", is_csv_only=True),
        Column("kind", "Kind", lambda row: row["kind"], "text"),
        Column("status", "Status", lambda row: row["status"], "text"),
        Column("streams", "Streams", lambda row: row["streams"]),
        Column("uses", "Used by", lambda row: used_by(row["uses"]), "text"),
    )
)


def used_by(uses: list[dict]) -> str:
    return ", ".join(f"{use['campaign']} #{use['stream_id']} ({use['weight']})" for use in uses)


class LanderListResource(LanderPages):
    @property
    def sets(self) -> ListSets:
        return ListSets(self.db, LANDERS_PAGE)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.sets.redirect_for_controls(req, session.principal)
        self.show(req, resp, session)

    def listing(self, req: falcon.Request, principal) -> ListView:
        """The list as the page shows it (and its CSV): the filters and sort of the query."""
        listing = ListFilter(req, LANDER_STATUSES)
        visible = visible_lander_ids(self.db, principal)
        uses = lander_uses(self.db, visible_campaign_ids(self.db, principal))
        rows = []
        for lander in list_landers(self.db, include_archived=True):
            if visible is None or lander.id in visible:
                fields = lander_fields(lander, uses.get(lander.id, []))
                if listing.keeps(lander.status, lander.name, fields["url"] or "", fields["path"] or ""):
                    rows.append({**fields, "preview": self.preview(req, fields)})
        state = {"status": listing.status, "q": listing.search}
        return LANDER_TABLE.view(req, principal, rows, state, self.sets.choice(req, principal))

    def show(self, req, resp, session, *, code=200, form=None, message="") -> None:
        view = self.listing(req, session.principal)
        self.page(
            req,
            resp,
            "landers.html",
            session,
            code,
            view=view,
            rows=view.rows,
            **chooser_context(LANDER_TABLE, self.sets, session.principal, view),
            status=view.state["status"],
            list_statuses=("current", *LANDER_STATUSES, "all"),
            search=view.state["q"],
            sort_text=view.sort.text,
            form=form or BLANK_FORM,
            message=message,
            may_create=creates_campaigns(session.principal),
            max_mb=self.files.max_bytes / 2**20,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        values, data = self.read(req, session)
        principal = session.principal
        if not creates_campaigns(principal):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not create landers."
            )
        try:
            if values["kind"] == "local":
                if data is None:
                    raise FormError("Choose the lander's zip (index.html at its root).")
                options: dict[str, Any] = {"zip_data": data}
            else:
                options = {"url": values["url"]}
            lander = create_lander(
                self.db, values["name"], files=self.files, notes=values["notes"], actor=principal, **options
            )
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, code=400, form=values, message=str(exc))
            return
        raise falcon.HTTPSeeOther(f"{PATH}/{lander.id}?done=created")


class LanderCsvResource(LanderListResource):
    """`GET /panel/landers.csv`: the list as shown (search, status and sort)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        send_csv(resp, self.listing(req, session.principal), "lanner-landers.csv")


class LanderResource(LanderPages):
    def lander(self, principal, lander_id: int):
        try:
            return visible_lander(self.db, principal, lander_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, lander_id: int) -> None:
        session = self.sessions.require(req)
        lander = self.lander(session.principal, lander_id)
        form = {name: getattr(lander, name) for name in BLANK_FORM}
        self.show(req, resp, session, lander, form, done=DONE.get(req.get_param("done") or "", ""))

    def show(self, req, resp, session, lander, form, *, code=200, message="", done="") -> None:
        uses = lander_uses(self.db, visible_campaign_ids(self.db, session.principal))
        fields = lander_fields(lander, uses.get(lander.id, []))
        self.page(
            req,
            resp,
            "lander.html",
            session,
            code,
            lander=fields,
            form=form,
            message=message,
            done=done,
            preview=self.preview(req, fields),
            may_edit=edits_lander(session.principal, lander),
            statuses=LANDER_STATUSES,
            max_mb=self.files.max_bytes / 2**20,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, lander_id: int) -> None:
        session = self.sessions.require(req)
        values, data = self.read(req, session)
        principal = session.principal
        lander = self.lander(principal, lander_id)
        if not edits_lander(principal, lander):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not change lander {lander.name!r}."
            )
        try:
            if values["do"] == "delete":
                delete_lander(self.db, lander.id, files=self.files, actor=principal)
                raise falcon.HTTPSeeOther(PATH)
            changes: dict[str, Any] = {
                "name": values["name"],
                "notes": values["notes"],
                "status": values["status"] or None,
            }
            if data is not None:
                changes["zip_data"] = data
            elif values["kind"] == "remote" and (lander.kind == "remote" or values["url"]):
                changes["url"] = values["url"]
            update_lander(self.db, lander.id, files=self.files, actor=principal, **changes)
        except AdminError as exc:
            form = {**{name: getattr(lander, name) for name in BLANK_FORM}, **values}
            self.show(req, resp, session, lander, form, code=400, message=str(exc))
            return
        done = "uploaded" if data is not None else "saved"
        raise falcon.HTTPSeeOther(f"{PATH}/{lander.id}?done={done}")


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route(PATH, LanderListResource(panel))
    app.add_route(PATH + ".csv", LanderCsvResource(panel))
    app.add_route(PATH + "/{lander_id:int(min=1, max=9223372036854775807)}", LanderResource(panel))
