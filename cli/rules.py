"""`lanner rule`: automation rules that label zones or pause offers, landers and streams by their numbers."""

from __future__ import annotations

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text, ms_iso

RULE_COLUMNS = [
    "id",
    "name",
    "campaigns",
    "dimension",
    "window",
    "conditions",
    "action",
    "max_actions",
    "enabled",
    "notify",
]
PLAN_COLUMNS = [
    "rule",
    "campaign",
    "target",
    "name",
    "action",
    "reason",
    "clicks",
    "conversions",
    "cost",
    "roi",
]
LOG_COLUMNS = [
    "id",
    "rule",
    "campaign",
    "target",
    "action",
    "state",
    "reason",
    "numbers",
    "answer",
    "created_at",
    "undone_at",
]


@click.group()
def rule() -> None:
    """Automation rules: when a zone's (offer's, lander's, stream's) numbers meet conditions, label it or
    pause it; run by `lanner worker` every LANNER_RULES_INTERVAL_MINUTES."""


@rule.command("add")
@click.argument("name")
@click.option(
    "--campaign", "campaigns", multiple=True, required=True, help="Campaign id or alias (repeatable)."
)
@click.option(
    "--for",
    "dimension",
    required=True,
    help="What it judges: a source's parameter (zoneid), sub_id_N, offer, lander or stream.",
)
@click.option("--window", required=True, help="Over the last 6h, 3d ... (1 hour to 90 days).")
@click.option("--exclude-today", is_flag=True, help="The window ends at today's midnight (late postbacks).")
@click.option("--timezone", default="UTC", show_default=True, help="Whose midnight --exclude-today means.")
@click.option(
    "--when",
    "conditions",
    multiple=True,
    required=True,
    help='A condition such as "cost >= 5" or "roi < -50" (repeatable, or joined by "and"; all must hold).',
)
@click.option(
    "--then",
    "action",
    type=click.Choice(["blacklist", "whitelist", "pause", "pause_at_source", "notify"]),
    required=True,
    help="blacklist/whitelist a sub id value; pause an offer, lander (weight 0) or stream (disabled); "
    "pause_at_source: exclude the zone in the platform campaigns a PropellerAds spend connection maps onto "
    "the campaign; notify: change nothing, tell --notify's channel what matched.",
)
@click.option(
    "--notify", help="An alert channel (`lanner alert channel`) told of what it does, one message a run."
)
@click.option(
    "--max-actions", type=int, default=10, show_default=True, help="At most this many actions a run."
)
@pass_context
def rule_add(
    ctx: Context,
    name: str,
    campaigns,
    dimension,
    window,
    exclude_today,
    timezone,
    conditions,
    action,
    max_actions,
    notify,
) -> None:
    """Make a rule NAME (checked whole first: an impossible condition or a rule that would undo another
    is refused)."""
    from models.optimisation.rules import create_rule

    spec = create_rule(
        ctx.db,
        name,
        campaigns=campaigns,
        dimension=dimension,
        window=window,
        conditions=conditions,
        action=action,
        max_actions=max_actions,
        exclude_today=exclude_today,
        timezone=timezone,
        notify=notify,
    )
    click.echo(f"Rule {spec.id} {spec.name!r}: {spec.action} each {spec.dimension} where {spec.reason}.")
    for warning in spec.warnings:
        click.echo(f"Warning: {warning}", err=True)


@rule.command("list")
@format_option
@pass_context
def rule_list(ctx: Context, fmt: str) -> None:
    """The rules."""
    from models.optimisation.rules import list_rules

    rows = [spec.as_json() for spec in list_rules(ctx.db)]
    if fmt != "json":
        rows = [
            {
                **row,
                "campaigns": ",".join(map(str, row["campaigns"])),
                "conditions": " and ".join(row["conditions"]),
            }
            for row in rows
        ]
    echo_rows(rows, RULE_COLUMNS, fmt)


def _echo_plans(plans, fmt: str, acted=None) -> None:
    if fmt == "json":
        click.echo(
            json_text(
                [
                    {
                        "rule": plan.rule.name,
                        "actions": [a.as_json() for a in plan.actions],
                        "held_back": plan.held_back,
                        "done_before": plan.done_before,
                        "unchanged": plan.unchanged,
                        "error": plan.error,
                        "notes": plan.notes,
                    }
                    for plan in plans
                ]
            )
        )
        return
    rows = [{**a.as_json(), **a.numbers} for plan in plans for a in plan.actions]
    echo_rows(rows, PLAN_COLUMNS, fmt)
    for plan in plans:
        said = f"Rule {plan.rule.name}: {len(plan.actions)} action(s)"
        if plan.error:
            said = f"Rule {plan.rule.name}: not evaluated: {plan.error}"
        else:
            said += (
                f", {plan.held_back} held back by its limit, {plan.done_before} done before, "
                f"{plan.unchanged} left as they are."
            )
        click.echo(said, err=fmt == "csv")


@rule.command("dry-run")
@click.argument("names", nargs=-1)
@format_option
@pass_context
def rule_dry_run(ctx: Context, names: tuple[str, ...], fmt: str) -> None:
    """What the rules NAMES (default: every enabled one) would do now; changes nothing."""
    from models.optimisation.rules import RuleSpec, get_rule, plan_rules
    from models.reporting.history import HistoryFiles

    specs = [RuleSpec.of(get_rule(ctx.db, name)) for name in names] if names else None
    _echo_plans(plan_rules(ctx.db, specs, history=HistoryFiles.for_reports(ctx.settings)), fmt)


@rule.command("run")
@click.argument("names", nargs=-1)
@format_option
@pass_context
def rule_run(ctx: Context, names: tuple[str, ...], fmt: str) -> None:
    """Run the rules NAMES (default: every enabled one) now, as `lanner worker` does."""
    from models.optimisation.rules import RuleSpec, get_rule, run_rules
    from models.optimisation.sourcepause import SourceAccess
    from models.reporting.history import HistoryFiles

    specs = [RuleSpec.of(get_rule(ctx.db, name)) for name in names] if names else None
    result = run_rules(
        ctx.db,
        specs,
        history=HistoryFiles.for_reports(ctx.settings),
        sources=SourceAccess.from_settings(ctx.settings),
    )
    _echo_plans(result.plans, fmt)
    for planned, why in result.skipped:
        click.echo(f"Skipped {planned.target} of campaign {planned.campaign_id}: {why}.", err=True)


@rule.command("log")
@click.option("--rule", "rule_ref", help="Only this rule's actions.")
@click.option("--limit", type=int, default=100, show_default=True)
@format_option
@pass_context
def rule_log_command(ctx: Context, rule_ref: str | None, limit: int, fmt: str) -> None:
    """What the rules did, newest first: what, why, the numbers then, and whether it was undone."""
    from models.optimisation.rules import rule_log

    rows = rule_log(ctx.db, rule_ref=rule_ref, limit=limit)
    if fmt != "json":
        rows = [
            {
                **row,
                "numbers": " ".join(f"{k}={v}" for k, v in row["numbers"].items() if v is not None),
                "created_at": ms_iso(row["created_at"]),
                "undone_at": ms_iso(row["undone_at"]) or "",
            }
            for row in rows
        ]
    echo_rows(rows, LOG_COLUMNS, fmt)


@rule.command("undo")
@click.argument("action_id", type=int)
@pass_context
def rule_undo(ctx: Context, action_id: int) -> None:
    """Put back what rule action ACTION_ID (from `lanner rule log`) changed; its rule leaves it be."""
    from models.optimisation.rules import undo_action
    from models.optimisation.sourcepause import SourceAccess

    undone = undo_action(ctx.db, action_id, sources=SourceAccess.from_settings(ctx.settings))
    said = f" (the source answered: {undone['answer']})" if undone.get("answer") else ""
    click.echo(f"Undone: {undone['action']} of {undone['target']}{said}.")


@rule.command("enable")
@click.argument("name")
@pass_context
def rule_enable(ctx: Context, name: str) -> None:
    """Run rule NAME again."""
    from models.optimisation.rules import set_rule_enabled

    click.echo(f"Rule {set_rule_enabled(ctx.db, name, True).name} enabled.")


@rule.command("disable")
@click.argument("name")
@pass_context
def rule_disable(ctx: Context, name: str) -> None:
    """Stop running rule NAME (what it did stays)."""
    from models.optimisation.rules import set_rule_enabled

    click.echo(f"Rule {set_rule_enabled(ctx.db, name, False).name} disabled.")


@rule.command("notify")
@click.argument("name")
@click.option("--channel", help="The alert channel told of what rule NAME does.")
@click.option("--none", "is_none", is_flag=True, help="Tell no channel any more.")
@pass_context
def rule_notify(ctx: Context, name: str, channel: str | None, is_none: bool) -> None:
    """Set the alert channel rule NAME tells of what it does (one message a run)."""
    from models.optimisation.rules import set_rule_channel

    if bool(channel) == is_none:
        raise click.ClickException("Name one --channel, or give --none.")
    spec = set_rule_channel(ctx.db, name, None if is_none else channel)
    said = f"notifies {spec.as_json()['notify']}" if spec.channel_id else "notifies no channel"
    click.echo(f"Rule {spec.name} {said}.")


@rule.command("delete")
@click.argument("name")
@pass_context
def rule_delete(ctx: Context, name: str) -> None:
    """Delete rule NAME and its log (what it did stays: undo first what should not)."""
    from models.optimisation.rules import delete_rule

    delete_rule(ctx.db, name)
    click.echo(f"Rule {name} deleted.")
