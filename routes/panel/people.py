"""The panel's people pages: /panel/account (every user's own timezone and password) and /panel/users
(admins only: users, their campaign shares and API keys), over the services `lanner user` and
`lanner api key` call (models/accounts/)."""

from __future__ import annotations

from datetime import datetime

import falcon

from models.accounts.apikeys import create_api_key, list_api_keys, revoke_api_key
from models.accounts.errors import AccountError
from models.accounts.logins import LoginThrottled, confirm_password
from models.accounts.sharing import share_campaign, unshare_campaign, user_shares
from models.accounts.users import (
    add_user,
    get_user_by_id,
    list_users,
    remove_user,
    set_password,
    update_user,
)
from models.admin.services import AdminError, list_campaigns
from models.choices import API_KEY_SCOPES, ROLES
from models.lookups.timezones import timezone_names
from models.reporting.timerange import zone
from routes.panel.common import PanelContext, PanelResource, timezone_of
from routes.panel.flash import Flash
from routes.panel.session import read_form

ACCOUNT_PATH = "/panel/account"
USERS_PATH = "/panel/users"
# What a 303 back to a page says happened (`?done=`): fixed sentences, so a link cannot put words there.
DONE = {
    "timezone": "Your timezone is saved.",
    "password": "Your password is changed.",
    "added": "The user is added.",
    "saved": "The user is saved.",
    "removed": "The user is removed.",
    "reset": "The password is reset.",
    "shared": "The campaign is shared.",
    "unshared": "The campaign is no longer shared.",
    "revoked": "The key is revoked.",
}


def local_time(ms: int | None, timezone: str) -> str:
    """Unix ms as the viewer's local date and time to the minute ('' for never)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, zone(timezone)).strftime("%Y-%m-%d %H:%M")


def see_other(resp: falcon.Response, location: str) -> None:
    resp.status = falcon.HTTP_303
    resp.location = location


def done_message(req: falcon.Request) -> str:
    return DONE.get(req.get_param("done") or "", "")


class AccountResource(PanelResource):
    """Every user's own page: their timezone and password (a viewer's too: it is their own account)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.show(req, resp, session, message=done_message(req))

    def show(
        self, req, resp, session, code: int = 200, *, message: str = "", error: str = "", field: str = ""
    ):
        user = get_user_by_id(self.sessions.db, session.user_id)
        self.page(
            req,
            resp,
            "account.html",
            session,
            code,
            account=user,
            timezones=timezone_names(),
            message=message,
            error=error,
            error_field=field,
        )

    def on_post_timezone(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal = session.principal
        try:
            update_user(
                self.sessions.db, principal.name, timezone=str(form.get("timezone", "")), actor=principal
            )
        except AccountError as exc:
            self.show(req, resp, session, 400, error=str(exc), field="timezone")
            return
        see_other(resp, ACCOUNT_PATH + "?done=timezone")

    def on_post_password(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal = session.principal
        db = self.sessions.db
        new = str(form.get("new_password", ""))
        try:
            is_right = confirm_password(
                db,
                principal.name,
                str(form.get("password", "")),
                self.sessions.client_ip(req),
                **self.sessions.clock_options(),
            )
        except LoginThrottled as exc:
            resp.set_header("Retry-After", str(exc.retry_after))
            self.show(req, resp, session, 429, error=str(exc), field="password")
            return
        if not is_right:
            error = "The current password is wrong."
        elif new != form.get("confirm_password"):
            error = "The new password and its confirmation differ."
        else:
            try:
                set_password(db, principal.name, new, actor=principal, keep_session=session.id)
            except AccountError as exc:
                error = str(exc)
            else:
                see_other(resp, ACCOUNT_PATH + "?done=password")
                return
        self.show(req, resp, session, 400, error=error, field="password")


class AdminPage(PanelResource):
    """A page for admins only: anyone else is answered 403."""

    def admin_session(self, req: falcon.Request, form: dict | None = None):
        session = self.sessions.require(req)
        if form is not None:
            self.sessions.check_write(req, session, form)
        if not session.principal.is_admin:
            raise falcon.HTTPForbidden(title="Admins only", description="Only an admin manages users.")
        return session

    def user_of(self, user_id: int):
        try:
            return get_user_by_id(self.sessions.db, user_id)
        except AccountError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None


def is_checked(form: dict, name: str) -> bool:
    return form.get(name) in ("1", "on", "true")


class UserListResource(AdminPage):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.show(req, resp, self.admin_session(req), message=done_message(req))

    def show(self, req, resp, session, code: int = 200, *, message: str = "", error: str = "", form=None):
        tz = timezone_of(session.principal)
        users = [(user, local_time(user.last_login_at, tz)) for user in list_users(self.sessions.db)]
        self.page(
            req,
            resp,
            "users.html",
            session,
            code,
            users=users,
            roles=ROLES,
            timezones=timezone_names(),
            message=message,
            error=error,
            form=form or {},
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = read_form(req)
        session = self.admin_session(req, form)
        try:
            add_user(
                self.sessions.db,
                str(form.get("name", "")).strip(),
                str(form.get("role", "")),
                str(form.get("password", "")),
                hides_money=is_checked(form, "hides_money"),
                timezone=str(form.get("timezone", "")),
                actor=session.principal,
            )
        except AccountError as exc:
            self.show(req, resp, session, 400, error=str(exc), form=form)
            return
        see_other(resp, USERS_PATH + "?done=added")


class UserResource(AdminPage):
    """One user: edit, reset the password, remove; their campaign shares and API keys."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: int) -> None:
        session = self.admin_session(req)
        user = self.user_of(user_id)
        created = Flash(self.sessions).take(req, resp, session)
        if created is not None:
            message = (
                f"API key {created['id']} ({created['scope']}) is created: "
                "copy it now, it is not shown again."
            )
            self.show(req, resp, session, user, message=message, new_key=created["key"])
            return
        self.show(req, resp, session, user, message=done_message(req))

    def show(
        self, req, resp, session, user, code: int = 200, *, message="", error="", field="", new_key=None
    ):
        db = self.sessions.db
        tz = timezone_of(session.principal)
        campaigns = list_campaigns(db, include_archived=True)
        shares = user_shares(db, user.id)
        self.page(
            req,
            resp,
            "user.html",
            session,
            code,
            account=user,
            roles=ROLES,
            scopes=API_KEY_SCOPES,
            timezones=timezone_names(),
            owned=[c for c in campaigns if c.owner_id == user.id],
            shares=[(c, shares[c.id]) for c in campaigns if c.id in shares],
            shareable=[c for c in campaigns if c.id not in shares and c.owner_id != user.id],
            keys=[
                (key, local_time(key.created_at, tz), local_time(key.last_used_at, tz))
                for key in list_api_keys(db)
                if key.user_id == user.id
            ],
            last_login=local_time(user.last_login_at, tz),
            new_key=new_key,
            message=message,
            error=error,
            error_field=field,
        )

    def refused(self, req, resp, session, user, field: str, exc: Exception) -> None:
        self.show(req, resp, session, user, 400, error=str(exc), field=field)

    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: int) -> None:
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        try:
            after = update_user(
                self.sessions.db,
                user.name,
                role=str(form.get("role", user.role)),
                hides_money=is_checked(form, "hides_money"),
                is_disabled=is_checked(form, "is_disabled"),
                timezone=str(form.get("timezone", user.timezone)),
                actor=session.principal,
            )
        except AccountError as exc:
            self.refused(req, resp, session, user, "edit", exc)
            return
        if after.id == session.user_id and after.role != "admin":  # No longer theirs to see: the dashboard.
            see_other(resp, "/panel")
            return
        see_other(resp, f"{USERS_PATH}/{user.id}?done=saved")

    def on_post_password(self, req: falcon.Request, resp: falcon.Response, user_id: int) -> None:
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        try:
            if form.get("new_password") != form.get("confirm_password"):
                raise AccountError("The new password and its confirmation differ.")
            set_password(
                self.sessions.db,
                user.name,
                str(form.get("new_password", "")),
                actor=session.principal,
                keep_session=session.id,
            )
        except AccountError as exc:
            self.refused(req, resp, session, user, "password", exc)
            return
        see_other(resp, f"{USERS_PATH}/{user.id}?done=reset")

    def on_post_remove(self, req: falcon.Request, resp: falcon.Response, user_id: int) -> None:
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        try:
            remove_user(self.sessions.db, user.name, actor=session.principal)
        except AccountError as exc:
            self.refused(req, resp, session, user, "remove", exc)
            return
        if user.id == session.user_id:  # Their own account: the session went with it.
            self.sessions.clear_cookie(req, resp)
        see_other(resp, USERS_PATH + "?done=removed")

    def on_post_share(self, req: falcon.Request, resp: falcon.Response, user_id: int) -> None:
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        try:
            campaign = int(str(form.get("campaign", "")))
        except ValueError:
            self.refused(req, resp, session, user, "share", AccountError("Choose a campaign to share."))
            return
        try:
            share_campaign(
                self.sessions.db,
                campaign,
                user.name,
                may_edit=is_checked(form, "may_edit"),
                actor=session.principal,
            )
        except (AccountError, AdminError) as exc:
            self.refused(req, resp, session, user, "share", exc)
            return
        see_other(resp, f"{USERS_PATH}/{user.id}?done=shared")

    def on_post_unshare(self, req: falcon.Request, resp: falcon.Response, user_id: int, campaign_id: int):
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        try:
            unshare_campaign(self.sessions.db, campaign_id, user.name, actor=session.principal)
        except (AccountError, AdminError) as exc:
            self.refused(req, resp, session, user, "share", exc)
            return
        see_other(resp, f"{USERS_PATH}/{user.id}?done=unshared")

    def on_post_keys(self, req: falcon.Request, resp: falcon.Response, user_id: int) -> None:
        """A new key, shown once by the GET this redirects to (routes/panel/flash.py): a reload of that
        page neither shows it again nor creates another."""
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        try:
            created, key = create_api_key(
                self.sessions.db,
                user.name,
                str(form.get("scope", "")),
                label=str(form.get("label", "")).strip(),
                actor=session.principal,
            )
        except AccountError as exc:
            self.refused(req, resp, session, user, "keys", exc)
            return
        shown = {"id": created.id, "scope": created.scope, "key": key}
        Flash(self.sessions).put(req, resp, session, f"{USERS_PATH}/{user.id}", shown)

    def on_post_revoke(self, req: falcon.Request, resp: falcon.Response, user_id: int, key_id: int) -> None:
        form = read_form(req)
        session = self.admin_session(req, form)
        user = self.user_of(user_id)
        if not any(key.id == key_id and key.user_id == user.id for key in list_api_keys(self.sessions.db)):
            raise falcon.HTTPNotFound(title="Not found", description=f"{user.name} has no API key {key_id}.")
        try:
            revoke_api_key(self.sessions.db, key_id, actor=session.principal)
        except AccountError as exc:
            self.refused(req, resp, session, user, "keys", exc)
            return
        see_other(resp, f"{USERS_PATH}/{user.id}?done=revoked")


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    sessions, render = panel.sessions, panel.render
    account = AccountResource(sessions, render)
    app.add_route(ACCOUNT_PATH, account)
    app.add_route(ACCOUNT_PATH + "/timezone", account, suffix="timezone")
    app.add_route(ACCOUNT_PATH + "/password", account, suffix="password")
    app.add_route(USERS_PATH, UserListResource(sessions, render))
    one = UserResource(sessions, render)
    user = USERS_PATH + "/{user_id:int(min=1)}"
    app.add_route(user, one)
    for suffix in ("password", "remove", "share", "keys"):
        app.add_route(f"{user}/{suffix}", one, suffix=suffix)
    app.add_route(user + "/shares/{campaign_id:int(min=1)}/remove", one, suffix="unshare")
    app.add_route(user + "/keys/{key_id:int(min=1)}/revoke", one, suffix="revoke")
