"""Column sets in the panel (models/reporting/columnsets.py): what a page with chosen columns shares.

A page's columns ride in its URL (`col=`, in order); without any it shows the user's default set, or
the page's own columns. `?set=` (a saved set's id or preset:<name>) and the chooser's buttons (`move=
up:KEY`, `down:KEY`, `drop:KEY`, `add` with `add=KEY`) answer a redirect to the page with the
columns they make, so the chooser works without a script. `POST /panel/column-sets` saves the shown
columns and sort (and the builder's grouping) under a name; `POST /panel/column-sets/{id}` makes one
the default, stops it being one, or deletes it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

import falcon

from models.reporting.columnpages import PAGES, ColumnPage
from models.reporting.columnsets import (
    ColumnSetError,
    ColumnSetNotFound,
    SavedSet,
    default_set,
    delete_set,
    get_set,
    list_sets,
    make_default,
    save_set,
)
from routes.panel.common import PanelContext, PanelResource
from routes.panel.session import read_form_lists

MAX_FORM_BYTES = 64 * 1024  # A set's form is a few hundred bytes; anything near this is not one.
CONTROLS = ("set", "move", "add")  # The chooser's parameters: a redirect, never a page's state.
MOVES = ("up", "down", "drop")


def not_found(exc: ColumnSetNotFound) -> falcon.HTTPNotFound:
    return falcon.HTTPNotFound(title="No such column set", description=str(exc))


def bad_set(exc: ColumnSetError) -> falcon.HTTPError:
    if isinstance(exc, ColumnSetNotFound):
        return not_found(exc)
    return falcon.HTTPBadRequest(title="Bad column set", description=str(exc))


def moved(columns: tuple[str, ...], move: str, added: str, choosable: tuple[str, ...]) -> tuple[str, ...]:
    """`columns` after one chooser button (400 for a button naming no column shown or choosable)."""
    order = list(columns)
    if move in ("add", "") and added:
        if added not in choosable:
            raise falcon.HTTPBadRequest(
                title="Bad column",
                description=f"{added[:40]!r} is no column here; choose from {', '.join(choosable)}.",
            )
        return tuple(dict.fromkeys([*order, added]))
    action, _, key = move.partition(":")
    if action not in MOVES or key not in order:
        raise falcon.HTTPBadRequest(
            title="Bad column move", description="Move a column shown: up:, down: or drop: and its name."
        )
    index = order.index(key)
    if action == "drop":
        if len(order) > 1:
            order.pop(index)
    else:
        other = index - 1 if action == "up" else index + 1
        if 0 <= other < len(order):
            order[index], order[other] = order[other], order[index]
    return tuple(order)


def sort_keys(text: str) -> list[tuple[str, bool]]:
    """A set's sort as (key, is_descending) pairs."""
    return [(part.removeprefix("-"), part.startswith("-")) for part in text.split(",") if part]


@dataclass(frozen=True)
class Chooser:
    """What a page's column chooser and set picker show (templates/_columns.html)."""

    page: ColumnPage
    labels: dict[str, str]
    choosable: tuple[str, ...]
    columns: tuple[str, ...]  # Shown, in order.
    sort: str  # The shown sort as a set keeps it.
    groups: tuple[str, ...]
    sets: list[SavedSet]
    back: str  # This page's URL: where the set forms come back to.

    @property
    def current(self) -> SavedSet | None:
        """The set showing: the first whose columns are the shown ones (a saved one before a preset)."""
        matches = [s for s in self.sets if s.columns == self.columns]
        return next((s for s in matches if not s.is_preset), matches[0] if matches else None)

    @property
    def default(self) -> SavedSet | None:
        return next((s for s in self.sets if s.is_default), None)

    @property
    def saved(self) -> list[SavedSet]:
        return [s for s in self.sets if not s.is_preset]

    @property
    def addable(self) -> tuple[str, ...]:
        return tuple(c for c in self.choosable if c not in self.columns)


class ColumnSets:
    """A page's sets for one user: its default columns, a `?set=` or chooser button's columns."""

    def __init__(self, db, page: ColumnPage) -> None:
        self.db = db
        self.page = page

    def default(self, principal) -> SavedSet | None:
        if principal.user_id is None:
            return None
        return default_set(self.db, principal.user_id, self.page, principal.hides_money)

    def base_columns(self, principal) -> tuple[str, ...]:
        """The columns the page shows without `col=`: the user's default set's, else the page's own."""
        chosen = self.default(principal)
        columns = chosen.columns if chosen is not None else ()
        return columns or self.page.shown(self.page.defaults, principal.hides_money)

    def picked(self, principal, ref: str) -> SavedSet:
        try:
            return get_set(self.db, principal.user_id or 0, self.page, ref, principal.hides_money)
        except ColumnSetNotFound as exc:
            raise not_found(exc) from None

    def chooser(
        self, principal, labels: dict[str, str], columns, sort: str, back: str, groups: tuple[str, ...] = ()
    ) -> Chooser:
        sets = list_sets(self.db, principal.user_id or 0, self.page, principal.hides_money)
        return Chooser(
            self.page,
            labels,
            self.page.choosable(principal.hides_money),
            tuple(columns),
            sort,
            groups,
            sets,
            back,
        )


@dataclass(frozen=True)
class ColumnChoice:
    """The columns a list shows, in order (its first apart), those it shows without `col=` (`base`),
    and the sort without `sort=` (the default set's; None: the list's own order)."""

    columns: tuple[str, ...]
    base: tuple[str, ...]
    sort: str | None = None


def requested_columns(
    req: falcon.Request, choosable: tuple[str, ...], base: tuple[str, ...]
) -> tuple[str, ...]:
    """The columns `?col=` names in order (repeated or comma-separated), else `base`; 400 for one the
    user may not choose."""
    pairs = urllib.parse.parse_qsl(req.query_string, keep_blank_values=True)
    named = [part for name, value in pairs if name == "col" for part in value.split(",") if part]
    for name in named:
        if name not in choosable:
            raise falcon.HTTPBadRequest(
                title="Bad column",
                description=f"{name[:40]!r} is no column here; choose from {', '.join(choosable)}.",
            )
    return tuple(dict.fromkeys(named)) or base


class ListSets(ColumnSets):
    """A list page's sets (the lists of routes/panel/listtable.py): its columns, its chooser's redirects."""

    def choice(self, req: falcon.Request, principal) -> ColumnChoice:
        default = self.default(principal)
        base = self.base_columns(principal)
        columns = requested_columns(req, self.page.choosable(principal.hides_money), base)
        return ColumnChoice(columns, base, default.sort if default is not None and columns == base else None)

    def redirect_for_controls(self, req: falcon.Request, principal) -> None:
        """`?set=` and the chooser's buttons: a redirect to the list with the columns (and the set's
        sort) they make, its filters kept."""
        pairs = urllib.parse.parse_qsl(req.query_string, keep_blank_values=True)
        controls = {name: value for name, value in pairs if name in CONTROLS}
        if not (controls.get("set") or controls.get("move") or controls.get("add")):
            return
        shown = self.choice(req, principal)
        kept = [(n, v) for n, v in pairs if n not in (*CONTROLS, "col", "sort", "without") and v]
        if controls.get("set"):
            picked = self.picked(principal, controls["set"])
            columns, sort = picked.columns or shown.columns, picked.sort
        else:
            choosable = self.page.choosable(principal.hides_money)
            columns = moved(shown.columns, controls.get("move", ""), controls.get("add", ""), choosable)
            given = [part for part in (req.get_param("sort") or shown.sort or "").split(",") if part]
            sort = ",".join(p for p in given if p.removeprefix("-") in (self.page.first, *columns))
        extra = [("col", ",".join(columns))] + ([("sort", sort)] if sort else [])
        raise falcon.HTTPSeeOther(
            f"/panel/{self.page.name}?" + urllib.parse.urlencode(kept + extra, safe=",")
        )


def form_text(form: dict[str, list[str]], name: str) -> str:
    values = form.get(name) or [""]
    return str(values[0]).strip()


def page_from(form: dict[str, list[str]]) -> ColumnPage:
    name = form_text(form, "page")
    if name not in PAGES:
        raise falcon.HTTPBadRequest(
            title="Bad column set", description=f"The page is one of {', '.join(PAGES)}."
        )
    return PAGES[name]


def back_to(form: dict[str, list[str]], page: ColumnPage) -> str:
    """The page to return to: the form's `back` if it is this page's URL, else the page itself."""
    path = f"/panel/{page.name}"
    back = form_text(form, "back")
    if (
        (back == path or back.startswith(path + "?"))
        and back.isprintable()
        and not any(c in back for c in " \\")
    ):
        return back
    return path


class PanelSetResource(PanelResource):
    def read(self, req: falcon.Request):
        session = self.sessions.require(req)
        if req.content_length is not None and req.content_length > MAX_FORM_BYTES:
            raise falcon.HTTPContentTooLarge(
                title="Too large", description=f"A column set's form is at most {MAX_FORM_BYTES} bytes."
            )
        form = read_form_lists(req)
        self.sessions.check_write(req, session, {"csrf_token": form_text(form, "csrf_token")})
        if session.principal.user_id is None:  # Every panel session is a user's; kept for the type.
            raise falcon.HTTPForbidden(title="Not a user", description="Column sets belong to a user.")
        return session, form


class ColumnSetsResource(PanelSetResource):
    """`POST /panel/column-sets`: save the columns (`col`, in order), `sort` and `groups` as `name`."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session, form = self.read(req)
        page = page_from(form)
        principal = session.principal
        columns = [part for value in form.get("col", []) for part in str(value).split(",") if part]
        groups = tuple(g for g in form_text(form, "groups").split(",") if g)
        try:
            saved = save_set(
                self.sessions.db,
                principal.user_id,
                page,
                form_text(form, "name"),
                columns,
                hides_money=principal.hides_money,
                sort=form_text(form, "sort"),
                groups=groups if page.has_groups else (),
                is_default=form_text(form, "default") in ("1", "on"),
            )
        except ColumnSetError as exc:
            raise bad_set(exc) from None
        back = back_to(form, page)
        query = urllib.parse.urlsplit(back).query
        pairs = [
            (n, v) for n, v in urllib.parse.parse_qsl(query, keep_blank_values=True) if n not in CONTROLS
        ]
        raise falcon.HTTPSeeOther(
            f"/panel/{page.name}?" + urllib.parse.urlencode([*pairs, ("set", saved.ref)])
        )


class ColumnSetResource(PanelSetResource):
    """`POST /panel/column-sets/{id}`: `action` default, undefault or delete."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, set_id: int) -> None:
        session, form = self.read(req)
        page = page_from(form)
        user_id = session.principal.user_id
        action = form_text(form, "action")
        try:
            if action == "default":
                make_default(self.sessions.db, user_id, page, set_id)
            elif action == "undefault":
                get_set(self.sessions.db, user_id, page, str(set_id), False)
                make_default(self.sessions.db, user_id, page, None)
            elif action == "delete":
                delete_set(self.sessions.db, user_id, page, set_id)
            else:
                raise falcon.HTTPBadRequest(
                    title="Bad column set action", description="The action is default, undefault or delete."
                )
        except ColumnSetError as exc:
            raise bad_set(exc) from None
        raise falcon.HTTPSeeOther(back_to(form, page))


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/column-sets", ColumnSetsResource(panel.sessions, panel.render))
    app.add_route(
        "/panel/column-sets/{set_id:int(min=1, max=4611686018427387904)}",
        ColumnSetResource(panel.sessions, panel.render),
    )
