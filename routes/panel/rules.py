"""Automation rules in the panel (/panel/rules): the list with each rule's last run and the actions it
took, a new rule's form; a rule's page (/panel/rules/{id}) with its dry run (what it would do now, with
the numbers), an edit form, pause / resume, and its log with an undo per action. Over
models/optimisation/rules.py, as `lanner rule` and `/api/v1/rules` are. Admins only, as in the API: a
rule acts on any campaign it names. Reached from the reports page (the nav has no room left at 1280 px).
"""

from __future__ import annotations

import re

import falcon

from models.alerts.channels import list_channels
from models.errors import LannerError
from models.optimisation.rules import (
    ACTIONS,
    RuleSpec,
    create_rule,
    get_rule,
    list_rules,
    plan_rules,
    rule_counts,
    rule_log,
    rule_of_action,
    rule_warnings,
    set_rule_enabled,
    undo_action,
    update_rule,
)
from models.optimisation.sourcepause import SourceAccess
from models.reporting.history import HistoryFiles
from models.reporting.timerange import local_iso, zone
from models.tables.campaign import Campaign
from routes.panel.common import PanelContext, PanelResource, timezone_of
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form

PATH = "/panel/rules"
FIELDS = (
    "name",
    "campaigns",
    "dimension",
    "window",
    "conditions",
    "action",
    "max_actions",
    "exclude_today",
    "timezone",
    "notify",
)
BLANK_FORM = {
    **dict.fromkeys(FIELDS, ""),
    "action": "blacklist",
    "max_actions": "10",
    "timezone": "UTC",
    "window": "6h",
}
DONE = {
    "created": "Rule created: its dry run below is what it would do at its next run.",
    "saved": "Saved: the dry run below is the rule as it is now.",
    "paused": "Paused: it does not run; what it did stays.",
    "resumed": "Resumed: it runs at the worker's next round.",
    "undone": "Undone: put back as it was; the rule leaves it be.",
}


def require_admin(principal) -> None:
    if principal.role != "admin":
        raise falcon.HTTPForbidden(title="Not allowed", description="Only an admin may see or change rules.")


def _list(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"[,\n]", text) if part.strip()]


def _max_actions(text: str) -> int:
    if not text.strip().isdigit():
        raise LannerError("At most how many actions a run: a whole number, 1 to 1000.")
    return int(text.strip())


def _when(ms: int | None, tz: str) -> str:
    return local_iso(ms, zone(tz))[:16].replace("T", " ") if ms else "never"


def _form_of(spec: RuleSpec) -> dict[str, str]:
    shown = spec.as_json()
    return {
        "name": spec.name,
        "campaigns": "",
        "dimension": spec.dimension,
        "window": shown["window"],
        "conditions": " and ".join(shown["conditions"]),
        "action": spec.action,
        "max_actions": str(spec.max_actions),
        "exclude_today": "1" if spec.is_today_excluded else "",
        "timezone": spec.timezone,
        "notify": shown["notify"] or "",
    }


def _aliases(db, specs) -> dict[int, str]:
    ids = sorted({i for spec in specs for i in spec.campaign_ids})
    return {
        c.id: c.alias
        for c in Campaign.select(Campaign.id, Campaign.alias).where(Campaign.id.in_(ids or [-1]))
    }


class RuleListResource(PanelResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        require_admin(session.principal)
        self.show(req, resp, session)

    def show(self, req, resp, session, *, code=200, form=None, message="") -> None:
        db = self.sessions.db
        specs = list_rules(db)
        tz = timezone_of(session.principal)
        counts = rule_counts(db)
        aliases = _aliases(db, specs)
        rows = [
            {
                "spec": spec,
                "shown": spec.as_json(),
                "campaigns": ", ".join(aliases.get(i, str(i)) for i in spec.campaign_ids),
                "last_run": _when(spec.last_run_at, tz),
                "taken": counts.get(spec.id, (0, 0))[0],
                "undone": counts.get(spec.id, (0, 0))[1],
            }
            for spec in specs
        ]
        self.page(
            req,
            resp,
            "rules.html",
            session,
            code,
            rows=rows,
            channels=list_channels(db),
            actions=ACTIONS,
            form=form or BLANK_FORM,
            message=message,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        given = {name: str(form.get(name, "")) for name in FIELDS}
        try:
            spec = create_rule(
                self.sessions.db,
                given["name"],
                campaigns=_list(given["campaigns"]),
                dimension=given["dimension"],
                window=given["window"],
                conditions=[given["conditions"]],
                action=given["action"],
                max_actions=_max_actions(given["max_actions"]),
                exclude_today=bool(given["exclude_today"]),
                timezone=given["timezone"] or "UTC",
                notify=given["notify"] or None,
                actor=session.principal,
            )
        except LannerError as exc:
            self.show(req, resp, session, code=400, form=given, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}/{spec.id}?done=created"


class RuleResource(PanelResource):
    """A rule's page and its forms' posts: `do` says which (save, pause, resume, undo)."""

    def __init__(
        self,
        sessions: PanelSessions,
        render: Renderer,
        history: HistoryFiles | None,
        sources: SourceAccess,
    ) -> None:
        super().__init__(sessions, render)
        self.history, self.sources = history, sources

    def spec(self, rule_id: int) -> RuleSpec:
        try:
            return RuleSpec.of(get_rule(self.sessions.db, rule_id))
        except LannerError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, rule_id: int) -> None:
        session = self.sessions.require(req)
        require_admin(session.principal)
        self.show(req, resp, session, self.spec(rule_id), done=DONE.get(req.get_param("done") or "", ""))

    def show(self, req, resp, session, spec, *, code=200, form=None, message="", done="") -> None:
        db = self.sessions.db
        tz = timezone_of(session.principal)
        (plan,) = plan_rules(db, [spec], history=self.history)
        log = rule_log(db, rule_ref=str(spec.id), limit=100)
        for row in log:
            row["when"] = _when(row["created_at"], tz)
            row["undone"] = _when(row["undone_at"], tz) if row["undone_at"] else ""
        aliases = _aliases(db, [spec])
        self.page(
            req,
            resp,
            "rule.html",
            session,
            code,
            spec=spec,
            shown=spec.as_json(),
            campaigns=", ".join(aliases.get(i, str(i)) for i in spec.campaign_ids),
            aliases=aliases,
            last_run=_when(spec.last_run_at, tz),
            plan=plan,
            log=log,
            warnings=rule_warnings(db, spec),
            channels=list_channels(db),
            form=form or _form_of(spec),
            message=message,
            done=done,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, rule_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        spec = self.spec(rule_id)
        db, actor, action = self.sessions.db, session.principal, form.get("do")
        given = {name: str(form.get(name, "")) for name in FIELDS}
        try:
            if action == "save":
                update_rule(
                    db,
                    spec.id,
                    window=given["window"],
                    conditions=[given["conditions"]],
                    max_actions=_max_actions(given["max_actions"]),
                    exclude_today=bool(given["exclude_today"]),
                    timezone=given["timezone"] or "UTC",
                    notify=given["notify"] or None,
                    actor=actor,
                )
                done = "saved"
            elif action in ("pause", "resume"):
                set_rule_enabled(db, spec.id, action == "resume", actor=actor)
                done = "paused" if action == "pause" else "resumed"
            elif action == "undo":
                action_id = str(form.get("action_id", ""))
                if not action_id.isdigit() or int(action_id) >= 2**63:
                    raise falcon.HTTPBadRequest(title="Bad form", description="Undo which action?")
                if rule_of_action(db, int(action_id)) != spec.id:
                    raise falcon.HTTPNotFound(
                        title="Not found", description=f"Rule {spec.name!r} has no action {action_id}."
                    )
                undo_action(db, int(action_id), actor=actor, sources=self.sources)
                done = "undone"
            else:
                raise falcon.HTTPBadRequest(
                    title="Bad form", description="This form asks for nothing the page does."
                )
        except LannerError as exc:
            kept = {
                **_form_of(spec),
                **{k: v for k, v in given.items() if v or k in ("exclude_today", "notify")},
            }
            self.show(
                req, resp, session, spec, code=400, form=kept if action == "save" else None, message=str(exc)
            )
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}/{spec.id}?done={done}"


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route(PATH, RuleListResource(panel.sessions, panel.render))
    app.add_route(
        PATH + "/{rule_id:int(min=1, max=9223372036854775807)}",
        RuleResource(
            panel.sessions,
            panel.render,
            HistoryFiles.for_reports(panel.settings),
            SourceAccess.from_settings(panel.settings),
        ),
    )
