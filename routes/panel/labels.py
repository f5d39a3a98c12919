"""Labels in the panel: the report builder's rows of a sub id level ticked and blacklisted or whitelisted
(`POST /panel/labels`), a campaign's list exported as its source takes it (`/panel/labels.txt`), and its
blacklist pushed to the source through a mapped spend connection (`POST /panel/labels/push`, as
`lanner label export --push` and `POST /api/v1/labels/push` do), the source's answer or the one-sentence
refusal shown once on the report it was pushed from.

The report page shows a level's labels, and the ticks, where the rows are one campaign's values of
one parameter: the level groups by a sub id (or a source's parameter name) and a filter or a drill
step names a single campaign. The labels are that campaign's (its source's show through).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

import falcon

from models.accounts.access import edits_campaign, visible_campaign_ids
from models.admin.rows import get_campaign
from models.errors import LannerError
from models.optimisation.labels import (
    EXPORT_FORMATS,
    LABELS,
    LabelScope,
    export_labels,
    label_lookup,
    label_scope,
    remove_labels,
    set_labels,
)
from models.optimisation.sourcepause import SourceAccess, SourceTarget, push_blacklist, source_target
from routes.panel.common import PanelContext, PanelResource
from routes.panel.flash import Flash
from routes.panel.session import read_form_lists

REMOVE = "none"  # The form's button that takes labels off.
REPORTS = "/panel/reports"  # Where a push's answer is shown (the flash cookie's path).
# Of a push's answer too long for the flash cookie (~3,800 characters, encoded), the start shown.
SHORT_ANSWER = 200


def changeable_campaign(db, principal, campaign_ref: str):
    """The campaign `campaign_ref` names, if the principal sees it (else 404) and may change it (else
    403): labelling its values or pushing its blacklist changes what it buys."""
    try:
        campaign = get_campaign(db, campaign_ref)
    except LannerError as exc:
        raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
    visible = visible_campaign_ids(db, principal)
    if visible is not None and campaign.id not in visible:
        raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {campaign_ref!r}.")
    if not (principal.can_write and edits_campaign(db, principal, campaign.id)):
        raise falcon.HTTPForbidden(
            title="Read-only", description=f"{principal.name} may not change this campaign."
        )
    return campaign


@dataclass(frozen=True)
class LabelColumn:
    """What the report page needs to show a level's labels and offer the ticks."""

    scope: LabelScope
    labels: dict[str, str]  # value -> label, "" for none
    can_write: bool
    export_urls: dict[str, str]  # format -> the blacklist's export URL
    # For a user who may change the campaign: where its blacklist is pushed (a connection and its
    # platform campaigns), or the sentence why it cannot be; None for one who may not.
    push_target: SourceTarget | str | None = None


def _campaign_of(groups: tuple[str, ...], drill: tuple[str, ...], filters: tuple[tuple[str, str], ...]):
    """The one campaign a report level is about (a drill step on campaign, else a one-value filter)."""
    for group, value in zip(groups, drill, strict=False):
        if group == "campaign":
            return value
    for name, values in filters:
        if name == "campaign" and "," not in values:
            return values.strip()
    return None


def label_column(db, principal, group: str, groups, drill, filters, values: list[str]) -> LabelColumn | None:
    """The label column of a report level grouped by `group` whose rows have `values`; None where the
    rows are not one campaign's values of one sub id parameter, or the user may not see the campaign."""
    if group in _NOT_SUB_IDS:
        return None
    ref = _campaign_of(tuple(groups), tuple(drill), tuple(filters))
    if ref is None:
        return None
    try:
        campaign = get_campaign(db, ref)
        scope = label_scope(campaign=campaign, parameter=group)
    except LannerError:
        return None
    visible = visible_campaign_ids(db, principal)
    if visible is not None and campaign.id not in visible:
        return None
    lookup = label_lookup(scope.slot, {campaign.id: campaign.source_id})
    query = {"campaign": str(campaign.id), "param": group, "label": "blacklist"}
    can_write = principal.can_write and edits_campaign(db, principal, campaign.id)
    return LabelColumn(
        scope,
        {value: lookup(campaign.id, value) for value in values},
        can_write,
        {
            fmt: "/panel/labels.txt?" + urllib.parse.urlencode({**query, "format": fmt})
            for fmt in EXPORT_FORMATS
        },
        _push_target(campaign, scope.slot) if can_write else None,
    )


def _push_target(campaign, slot: int) -> SourceTarget | str:
    found = source_target(campaign, slot)
    # The rules' sentence says what a run skipped; here it says why there is no button.
    return found.removesuffix("; skipped.") + "." if isinstance(found, str) else found


# The report's groups that are no sub id (a source's parameter name is any other).
_NOT_SUB_IDS = frozenset(
    (
        "campaign",
        "stream",
        "offer",
        "network",
        "traffic_source",
        "lander",
        "source",
        "country",
        "device",
        "os",
        "browser",
        "language",
        "referrer_domain",
        "domain",
        "label",
        "day",
        "hour",
    )
)


class LabelResource(PanelResource):
    """`POST /panel/labels`: the ticked values blacklisted, whitelisted or unlabelled; back to the report."""

    def __init__(self, panel: PanelContext) -> None:
        super().__init__(panel.sessions, panel.render)
        self.db = panel.db

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        lists = read_form_lists(req)
        form = {name: values[0] for name, values in lists.items() if values}
        self.sessions.check_write(req, session, form)
        principal = session.principal
        campaign_ref, parameter = form.get("campaign", ""), form.get("param", "")
        label, back = form.get("label", ""), form.get("back", "")
        values = [value for value in lists.get("values", []) if value.strip()]
        if not back.startswith("/panel/reports?"):
            back = "/panel/reports"
        if label not in (*LABELS, REMOVE):
            raise falcon.HTTPBadRequest(
                title="Refused", description="Blacklist, whitelist or unlabel the values."
            )
        if not values:
            raise falcon.HTTPBadRequest(title="Refused", description="Tick the rows to label first.")
        campaign = changeable_campaign(self.db, principal, campaign_ref)
        try:
            scope = label_scope(campaign=campaign, parameter=parameter)
            if label == REMOVE:
                remove_labels(self.db, scope, values, actor=principal)
            else:
                set_labels(self.db, scope, values, label, actor=principal)
        except LannerError as exc:
            raise falcon.HTTPBadRequest(title="Refused", description=str(exc)) from None
        raise falcon.HTTPSeeOther(back)


class LabelExportResource(PanelResource):
    """`GET /panel/labels.txt`: a campaign's black or white list of a parameter, as a download."""

    def __init__(self, panel: PanelContext) -> None:
        super().__init__(panel.sessions, panel.render)
        self.db = panel.db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        fmt = req.get_param("format") or "plain"
        try:
            campaign = get_campaign(self.db, req.get_param("campaign") or "")
            visible = visible_campaign_ids(self.db, principal)
            if visible is not None and campaign.id not in visible:
                raise falcon.HTTPNotFound(title="Not found", description="There is no such campaign.")
            scope = label_scope(campaign=campaign, parameter=req.get_param("param") or "")
            text = export_labels(self.db, scope, req.get_param("label") or "blacklist", fmt)
        except LannerError as exc:
            raise falcon.HTTPBadRequest(title="Refused", description=str(exc)) from None
        resp.content_type = "text/csv; charset=utf-8" if fmt == "csv" else "text/plain; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        name = f"{campaign.alias}-{scope.parameter}-{req.get_param('label') or 'blacklist'}"
        resp.set_header(
            "Content-Disposition", f'attachment; filename="{name}.{"csv" if fmt == "csv" else "txt"}"'
        )
        resp.text = text


class LabelPushResource(PanelResource):
    """`POST /panel/labels/push`: a campaign's blacklist of a parameter sent to its traffic source (its
    zones excluded in the platform campaigns a spend connection maps onto it); back to the report with
    the source's answer, or why nothing (or not all) was sent, shown once."""

    def __init__(self, panel: PanelContext, sources: SourceAccess) -> None:
        super().__init__(panel.sessions, panel.render)
        self.db, self.sources = panel.db, sources

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        lists = read_form_lists(req)
        form = {name: values[0] for name, values in lists.items() if values}
        self.sessions.check_write(req, session, form)
        principal = session.principal
        campaign_ref, back = form.get("campaign", ""), form.get("back", "")
        if not back.startswith(REPORTS + "?"):
            back = REPORTS
        # The API's rule: pushing changes what the campaign buys, so it takes the right to change it.
        campaign = changeable_campaign(self.db, principal, campaign_ref)
        try:
            scope = label_scope(campaign=campaign, parameter=form.get("param", ""))
        except LannerError as exc:
            raise falcon.HTTPBadRequest(title="Refused", description=str(exc)) from None
        try:
            pushed = push_blacklist(scope, self.sources)
        except LannerError as exc:  # The source refused, or nothing maps a platform campaign.
            is_ok, text = False, str(exc)
        else:
            answers = "; ".join(f"campaign {cid}: {said}" for cid, said in pushed.campaigns.items())
            is_ok = True
            text = f"{pushed.zones} zone id(s) of the {scope.parameter} blacklist sent. {answers}."
            if pushed.not_zone_ids:
                text += f" Not zone ids, not sent: {', '.join(pushed.not_zone_ids)}."
        flash = Flash(self.sessions)
        if not flash.put(req, resp, session, REPORTS, {"ok": is_ok, "text": text}):  # Too long for a cookie.
            flash.put(req, resp, session, REPORTS, {"ok": is_ok, "text": text[:SHORT_ANSWER] + "…"})
        resp.location = back  # The same report level; the cookie's path is the page's, without the query.


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/labels", LabelResource(panel))
    app.add_route("/panel/labels.txt", LabelExportResource(panel))
    app.add_route("/panel/labels/push", LabelPushResource(panel, SourceAccess.from_settings(panel.settings)))
