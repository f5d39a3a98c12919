"""Automation rules (models/optimisation/rules.py, as `lanner rule`): made, listed, tried (a dry run),
run, enabled or disabled, and their log with an undo per action. Rules act on any campaign they name
and their log names those campaigns' zones and numbers: they are an admin's, to read as to change.
"""

from __future__ import annotations

import falcon

from models.optimisation.rules import (
    RuleSpec,
    create_rule,
    delete_rule,
    get_rule,
    list_rules,
    plan_rules,
    rule_log,
    run_rules,
    set_rule_channel,
    set_rule_enabled,
    undo_action,
)
from models.optimisation.sourcepause import SourceAccess
from models.reporting.history import HistoryFiles
from routes.v1.auth import require_admin
from routes.v1.spec import Field, Operation, Param, answer, api_resource, read_body

RULE_FIELDS = (
    Field("name", "string", "Unique.", required=True),
    Field("campaigns", "strings", "Campaign ids or aliases.", required=True),
    Field(
        "dimension",
        "string",
        "zoneid (a source's parameter), sub_id_N, offer, lander or stream.",
        required=True,
    ),
    Field("window", "string", "6h, 3d ... (1 hour to 90 days).", required=True),
    Field(
        "conditions",
        "strings",
        'All must hold: "cost >= 5", "conversions = 0", "roi < -50" ...',
        required=True,
    ),
    Field(
        "action",
        "string",
        "blacklist or whitelist (sub id values), pause (offer, lander, stream), or notify (changes "
        "nothing: tells `notify` what matched).",
        required=True,
    ),
    Field("notify", "string", "The alert channel (name or id) told of what it does, one message a run."),
    Field("max_actions", "integer", "At most this many actions a run (default 10)."),
    Field("exclude_today", "boolean", "The window ends at today's midnight in `timezone`."),
    Field("timezone", "string", "IANA name (default UTC)."),
)
RULE_CHANGE = (
    Field("enabled", "boolean", "Run it (true) or not."),
    Field("notify", "string", "The alert channel told of what it does; '' for none."),
)


def _plans_json(plans) -> list[dict]:
    return [
        {
            "rule": plan.rule.name,
            "actions": [action.as_json() for action in plan.actions],
            "held_back": plan.held_back,
            "done_before": plan.done_before,
            "unchanged": plan.unchanged,
            "error": plan.error,
            "notes": plan.notes,
        }
        for plan in plans
    ]


@api_resource
class RuleListResource:
    operations = {
        "GET": Operation("The rules."),
        "POST": Operation(
            "Make a rule (400 naming what is wrong: an impossible condition ...; 409 for a name taken or "
            "a rule it would undo).",
            body=RULE_FIELDS,
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req, "rules")
        answer(req, resp, {"items": [spec.as_json() for spec in list_rules(self.db)], "next": None})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req, "rules")
        body = read_body(req, RULE_FIELDS)
        spec = create_rule(
            self.db,
            body["name"],
            campaigns=body["campaigns"],
            dimension=body["dimension"],
            window=body["window"],
            conditions=body["conditions"],
            action=body["action"],
            max_actions=body.get("max_actions", 10),
            exclude_today=body.get("exclude_today", False),
            timezone=body.get("timezone", "UTC"),
            notify=body.get("notify"),
            actor=req.context.principal,
        )
        answer(req, resp, spec.as_json(), falcon.HTTP_201)


@api_resource
class RuleResource:
    operations = {
        "GET": Operation("A rule, by id or name."),
        "PATCH": Operation("Enable or disable a rule, or set the channel it notifies.", body=RULE_CHANGE),
        "DELETE": Operation("Delete a rule and its log (what it did stays)."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "rules")
        answer(req, resp, RuleSpec.of(get_rule(self.db, ref)).as_json())

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "rules")
        body = read_body(req, RULE_CHANGE)
        actor = req.context.principal
        spec = RuleSpec.of(get_rule(self.db, ref))
        if "notify" in body:
            spec = set_rule_channel(self.db, ref, body["notify"] or None, actor=actor)
        if "enabled" in body:
            spec = set_rule_enabled(self.db, ref, body["enabled"], actor=actor)
        answer(req, resp, spec.as_json())

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "rules")
        delete_rule(self.db, ref, actor=req.context.principal)
        answer(req, resp, {"deleted": ref})


@api_resource
class RuleRunResource:
    operations = {
        "GET": Operation("What a rule would do now (a dry run: nothing changes)."),
        "POST": Operation("Run a rule now, as `lanner worker` does every LANNER_RULES_INTERVAL_MINUTES."),
    }

    def __init__(self, auth, db, history: HistoryFiles | None, sources: SourceAccess) -> None:
        self.auth, self.db, self.history, self.sources = auth, db, history, sources

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "rules")
        spec = RuleSpec.of(get_rule(self.db, ref))
        answer(req, resp, _plans_json(plan_rules(self.db, [spec], history=self.history))[0])

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        require_admin(req, "rules")
        spec = RuleSpec.of(get_rule(self.db, ref))
        result = run_rules(
            self.db, [spec], history=self.history, actor=req.context.principal, sources=self.sources
        )
        shown = _plans_json(result.plans)[0]
        shown["skipped"] = [{**planned.as_json(), "why": why} for planned, why in result.skipped]
        answer(req, resp, shown)


@api_resource
class RuleLogResource:
    operations = {
        "GET": Operation(
            "What the rules did, newest first: what, why, the numbers then, whether it was undone.",
            params=(
                Param("rule", "Only this rule's (id or name)."),
                Param("limit", "1 to 1000 (default 100).", "integer"),
            ),
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        require_admin(req, "rules")
        limit = req.get_param_as_int("limit", min_value=1, max_value=1000) or 100
        answer(
            req, resp, {"items": rule_log(self.db, rule_ref=req.get_param("rule"), limit=limit), "next": None}
        )


@api_resource
class RuleUndoResource:
    operations = {
        "POST": Operation(
            "Undo a rule's action (409 if undone already, changed since, or the source refused)."
        )
    }

    def __init__(self, auth, db, sources: SourceAccess) -> None:
        self.auth, self.db, self.sources = auth, db, sources

    def on_post(self, req: falcon.Request, resp: falcon.Response, action_id: int) -> None:
        require_admin(req, "rules")
        answer(req, resp, undo_action(self.db, action_id, actor=req.context.principal, sources=self.sources))
