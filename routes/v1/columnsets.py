"""Column sets (models/reporting/columnsets.py), as the panel's pages keep them: a user's named columns
of a page, in order, with a sort and (the report builder) its grouping. A set is the key's user's: the
install key has none, and another user's set is a 404 as a missing one."""

from __future__ import annotations

import falcon

from models.reporting.columnpages import PAGES, ColumnPage
from models.reporting.columnsets import (
    SavedSet,
    delete_set,
    get_set,
    list_sets,
    make_default,
    page_of_set,
    save_set,
)
from models.tables.columnset import ColumnSet
from routes.v1.spec import Field, Operation, Param, answer, api_resource, read_body

SET_FIELDS = (
    Field("page", "string", f"The page: {', '.join(PAGES)}.", required=True),
    Field(
        "name",
        "string",
        "Its name (at most 60 characters); a set of the same name is replaced.",
        required=True,
    ),
    Field(
        "columns", "strings", "The columns in the order shown (the page's first column apart).", required=True
    ),
    Field("sort", "string", "Up to two keys, a - before one for descending: -profit,clicks."),
    Field("groups", "strings", "The report builder's grouping levels (reports only)."),
    Field("is_default", "boolean", "The page opens with it (another default of the page stops being one)."),
)
DEFAULT_FIELDS = (
    Field("is_default", "boolean", "Make it the page's default, or stop it being one.", required=True),
)


def as_json(saved: SavedSet) -> dict:
    return {
        "id": saved.id,
        "ref": saved.ref,
        "page": saved.page,
        "name": saved.name,
        "columns": list(saved.columns),
        "sort": saved.sort,
        "groups": list(saved.groups),
        "is_default": saved.is_default,
        "is_preset": saved.is_preset,
    }


def user_of(req: falcon.Request) -> int:
    user_id = req.context.principal.user_id
    if user_id is None:
        raise falcon.HTTPBadRequest(
            title="Not a user", description="Column sets belong to a user; use a user's API key."
        )
    return user_id


def page_named(name: str) -> ColumnPage:
    if name not in PAGES:
        raise falcon.HTTPBadRequest(
            title="Unknown page", description=f"The page is one of {', '.join(PAGES)}."
        )
    return PAGES[name]


@api_resource
class ColumnSetListResource:
    operations = {
        "GET": Operation(
            "The key's user's column sets: of one page with its built-in presets first, or of every page.",
            params=(Param("page", f"One of {', '.join(PAGES)} (none: every page's saved sets)."),),
        ),
        "POST": Operation("Save a column set (201).", body=SET_FIELDS, answers={201: "The set saved."}),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        user_id, hides_money = user_of(req), req.context.principal.hides_money
        name = req.get_param("page")
        if name is not None:
            items = list_sets(self.db, user_id, page_named(name), hides_money)
        else:
            rows = (
                ColumnSet.select(ColumnSet.id, ColumnSet.page)
                .where(ColumnSet.user_id == user_id)
                .order_by(ColumnSet.page, ColumnSet.name)
            )
            items = [
                get_set(self.db, user_id, PAGES[row.page], str(row.id), hides_money)
                for row in rows
                if row.page in PAGES
            ]
        answer(req, resp, {"items": [as_json(item) for item in items]})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, SET_FIELDS)
        user_id, principal = user_of(req), req.context.principal
        page = page_named(body["page"])
        saved = save_set(
            self.db,
            user_id,
            page,
            body["name"],
            body["columns"],
            hides_money=principal.hides_money,
            sort=body.get("sort", ""),
            groups=tuple(body.get("groups", ())),
            is_default=body.get("is_default", False),
        )
        answer(req, resp, as_json(saved), falcon.HTTP_201)


@api_resource
class ColumnSetResource:
    operations = {
        "GET": Operation("One of the key's user's column sets."),
        "PATCH": Operation("Make the set its page's default, or stop it being one.", body=DEFAULT_FIELDS),
        "DELETE": Operation("Delete the set."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def found(self, req: falcon.Request, set_id: int) -> SavedSet:
        user_id = user_of(req)
        page = PAGES[page_of_set(self.db, user_id, set_id)]
        return get_set(self.db, user_id, page, str(set_id), req.context.principal.hides_money)

    def on_get(self, req: falcon.Request, resp: falcon.Response, set_id: int) -> None:
        answer(req, resp, as_json(self.found(req, set_id)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, set_id: int) -> None:
        body = read_body(req, DEFAULT_FIELDS)
        saved = self.found(req, set_id)
        page = PAGES[saved.page]
        if body["is_default"]:
            make_default(self.db, user_of(req), page, set_id)
        elif saved.is_default:
            make_default(self.db, user_of(req), page, None)
        answer(req, resp, as_json(self.found(req, set_id)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, set_id: int) -> None:
        saved = self.found(req, set_id)
        delete_set(self.db, user_of(req), PAGES[saved.page], set_id)
        answer(req, resp, {"deleted": set_id})
