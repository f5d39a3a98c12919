"""The campaign editor: create a campaign, change its settings, and its streams in evaluation order
(add, edit, remove, reorder) with their filters and weighted offers, over the services the CLI's
`campaign` and `stream` commands and routes/v1/campaigns.py call.

Filters are posted as the CLI's `--filter` expressions (`country=US,GB`), one builder row each, so the
same parser (models/routing/filters.py) validates them and its sentence is shown next to the row.
"""

from __future__ import annotations

import json
import re

import falcon

from models.accounts.access import (
    creates_campaigns,
    edits_campaign,
    visible_campaign_ids,
    visible_lander_ids,
    visible_offers,
)
from models.accounts.users import list_users
from models.admin.domains import campaign_domains, campaign_url
from models.admin.landers import list_landers, stream_lander_rows, stream_landers
from models.admin.services import (
    AdminError,
    add_stream,
    create_campaign,
    describe_filters,
    filters_json,
    get_campaign,
    get_stream,
    list_offers,
    list_streams,
    rate_warnings,
    remove_stream,
    reorder_streams,
    stream_geo_warnings,
    stream_offers,
    update_campaign,
    update_stream,
)
from models.admin.sources import campaign_source_url, list_sources, source_of
from models.admin.tags import campaign_tags, parse_tags, set_campaign_tags
from models.choices import (
    CAMPAIGN_STATUSES,
    COST_MODELS,
    DEFAULT_ACTIONS,
    FILTER_MODES,
    LANDER_ROTATIONS,
    OFFER_ROTATIONS,
    REDIRECT_TYPES,
    ROTATIONS,
    STREAM_ACTIONS,
    STREAM_TYPES,
)
from models.lookups.timezones import timezone_names
from models.reporting.sequential import ALPHA
from models.routing.filters import DEVICE_TYPES, FILTER_NAMES, describe_filter
from routes.panel.common import PERIODS, CampaignBase, FormError, PanelContext, PanelResource, chosen_period
from routes.panel.editornumbers import EditorNumbers
from routes.panel.session import read_form, read_form_lists

WHOLE_NUMBER = re.compile(r"-?[0-9]{1,12}")  # Negative ones get the services' sentence.
BLANK_FILTER_ROWS = 3  # Rows to fill in without JavaScript (with it, "Add a filter" clones more).
OPERATORS = {"=": "is", "!=": "is not", "~": "contains / ~/regex/", "!~": "does not contain"}
# Per filter type: a placeholder for its value, the values to suggest, and what its key field is.
FILTER_HINTS = {
    "country": ("US,GB", (), ""),
    "region": ("California", (), ""),
    "city": ('London,"New York"', (), ""),
    "device": ("mobile,tablet", DEVICE_TYPES, ""),
    "os": ("iOS,Android", ("iOS", "Android", "Windows", "Mac OS X", "Linux", "unknown"), ""),
    "browser": (
        "Chrome,Mobile Safari",
        ("Chrome", "Mobile Safari", "Firefox", "Edge", "Samsung Internet"),
        "",
    ),
    "language": ("en,de", (), ""),
    "connection": ("Cellular", ("Cellular", "Cable/DSL", "Corporate", "Satellite", "Dialup", "unknown"), ""),
    "ip": ("10.0.0.0/8,2001:db8::/32,203.0.113.7", (), ""),
    "referrer": ("google (empty with =: no referrer)", (), ""),
    "keyword": ("shoes,boots", (), ""),
    "user_agent": ("/bot|spider/ (with ~)", (), ""),
    "param": ("fb", (), "parameter name"),
    "sub_id": ("promo", (), "slot 1-30"),
    "isp": ("comcast", (), ""),
    "carrier": ("vodafone", (), ""),
    "schedule": ("mon-fri 09:00-18:00", (), ""),
    "date": ("2026-12-01..2026-12-31", (), ""),
    "unique": ("campaign", ("campaign", "stream"), ""),
    "bot": ("yes", ("yes", "no"), ""),
}
FILTER_LABELS = {
    "country": "Country",
    "region": "Region",
    "city": "City",
    "device": "Device type",
    "os": "OS",
    "browser": "Browser",
    "language": "Language",
    "connection": "Connection type",
    "ip": "IP / CIDR list",
    "referrer": "Referrer",
    "keyword": "Keyword",
    "user_agent": "User-Agent",
    "param": "URL parameter",
    "sub_id": "sub_id_N",
    "isp": "ISP",
    "carrier": "Mobile carrier",
    "schedule": "Schedule",
    "date": "Dates",
    "unique": "Unique visitor",
    "bot": "Bot",
}
CAMPAIGN_FIELDS = (
    "name",
    "alias",
    "status",
    "rotation",
    "uniqueness_hours",
    "timezone",
    "bind_visitor",
    "default_action",
    "default_url",
    "cost_model",
    "cost_value",
    "cost_currency",
    "owner_id",
    "source_id",
    "tags",
)


def _float(form: dict, name: str, what: str) -> float | None:
    text = str(form.get(name, "")).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise FormError(f"{what} must be a number, not {text!r}.") from None


def _int(form: dict, name: str | int, what: str) -> int | None:
    text = str(form.get(name, "")).strip()
    if not text:
        return None
    if not WHOLE_NUMBER.fullmatch(text):
        raise FormError(f"{what} must be a whole number, not {text!r}.")
    return int(text)


def _text(form: dict, name: str) -> str:
    return str(form.get(name, "")).strip()


def campaign_values(campaign) -> dict[str, str]:
    """A campaign's settings as the form shows them."""
    return {
        "name": campaign.name,
        "alias": campaign.alias,
        "status": campaign.status,
        "rotation": campaign.rotation,
        "uniqueness_hours": f"{campaign.uniqueness_hours:g}",
        "timezone": campaign.timezone,
        "bind_visitor": "1" if campaign.bind_visitor else "",
        "default_action": campaign.default_action,
        "default_url": campaign.default_payload,
        "cost_model": campaign.cost_model,
        "cost_value": f"{campaign.cost_value:g}",
        "cost_currency": campaign.cost_currency,
        "owner_id": "" if campaign.owner_id is None else str(campaign.owner_id),
        "source_id": "" if campaign.source_id is None else str(campaign.source_id),
    }


def campaign_changes(form: dict, principal, *, is_new: bool) -> dict:
    """The create_campaign / update_campaign keywords the settings form asks for."""
    changes = {
        "name": _text(form, "name"),
        "alias": _text(form, "alias"),
        "rotation": _text(form, "rotation") or "position",
        "uniqueness_hours": _float(form, "uniqueness_hours", "The uniqueness window"),
        "timezone": _text(form, "timezone") or "UTC",
        "bind_visitor": bool(form.get("bind_visitor")),
        "default_action": _text(form, "default_action") or "not_found",
        "default_payload": _text(form, "default_url"),
    }
    if not changes["name"]:
        raise FormError("A campaign needs a name.")
    if not is_new:
        changes["status"] = _text(form, "status")
    if not principal.hides_money:  # Their form has no cost fields: the campaign's stay as they are.
        changes.update(
            cost_model=_text(form, "cost_model") or "cpc",
            cost_value=_float(form, "cost_value", "The cost") or 0.0,
            cost_currency=_text(form, "cost_currency").upper() or None,
        )
    source = _int(form, "source_id", "The traffic source")
    if source is not None:
        changes["source"] = source
    elif not is_new:
        changes["clear_source"] = True
    if principal.is_admin:
        owner = _int(form, "owner_id", "The owner")
        if owner is not None:
            changes["owner_id"] = owner
        elif not is_new:
            changes["clear_owner"] = True
    return changes


# -- filters --------------------------------------------------------------------------------------


def filter_row(spec: dict) -> dict[str, str]:
    """A stored filter spec as a builder row: type, key (param name, sub_id slot), operator, value."""
    text = describe_filter(spec)
    key = str(spec.get("param") or spec.get("slot") or "")
    head = {"param": f"param.{key}", "sub_id": f"sub_id_{key}"}.get(spec["name"], spec["name"])
    rest = text[len(head) :]
    operator = next(op for op in ("!=", "!~", "=", "~") if rest.startswith(op))
    return {"type": spec["name"], "key": key, "op": operator, "value": rest[len(operator) :], "error": ""}


def blank_filter_row() -> dict[str, str]:
    return {"type": "", "key": "", "op": "=", "value": "", "error": ""}


def filter_expression(row: dict[str, str]) -> str:
    """A builder row as the CLI's `--filter` expression."""
    name, key = row["type"], row["key"].strip()
    if name not in FILTER_NAMES:
        raise FormError(f"Unknown filter type {name!r}.")
    if row["op"] not in OPERATORS:
        raise FormError(f"A filter's operator is one of {', '.join(OPERATORS)}.")
    if name == "sub_id":
        if not key:
            raise FormError("A sub_id filter needs its slot, 1 to 30.")
        name = f"sub_id_{key}"
    elif name == "param":
        name = f"param.{key}"
    return f"{name}{row['op']}{row['value']}"


def posted_filter_rows(lists: dict[str, list[str]]) -> list[dict[str, str]]:
    """The builder's rows as posted, those with a type (a blank row has none)."""
    columns = [lists.get(f"filter_{part}", []) for part in ("type", "key", "op", "value")]
    count = max(len(column) for column in columns)
    rows = []
    for index in range(count):
        kind, key, op, value = (column[index] if index < len(column) else "" for column in columns)
        if kind.strip():
            rows.append({"type": kind.strip(), "key": key, "op": op, "value": value, "error": ""})
    return rows


def checked_filters(rows: list[dict[str, str]]) -> list[str] | None:
    """The rows' expressions, each parsed as the services will; None when a row has an error (set on it)."""
    expressions, is_valid = [], True
    for row in rows:
        try:
            expression = filter_expression(row)
            filters_json([expression])
            expressions.append(expression)
        except (FormError, AdminError) as exc:
            row["error"], is_valid = str(exc), False
    return expressions if is_valid else None


# -- offers ---------------------------------------------------------------------------------------


def offer_rows(offers, weights: dict[int, str]) -> list[dict]:
    """Every offer a stream may use (archived ones only when the stream has them), with its weight as
    the form holds it and its share of the stream's traffic."""
    numbers = {}
    for offer_id, text in weights.items():
        try:
            numbers[offer_id] = max(int(text), 0)
        except ValueError:
            pass
    total = sum(numbers.values())
    return [
        {
            "offer": offer,
            "weight": weights.get(offer.id, ""),
            "share": numbers[offer.id] / total * 100 if total and offer.id in numbers else None,
        }
        for offer in offers
        if offer.status != "archived" or offer.id in weights
    ]


def typed_weights(form: dict, offers) -> dict[int, str]:
    """The weight typed per offer (`offer_<id>`), as the form holds it; a blank one is no offer of the
    stream."""
    return {
        offer.id: _text(form, f"offer_{offer.id}") for offer in offers if _text(form, f"offer_{offer.id}")
    }


def chosen_offers(weights: dict[int, str]) -> list[tuple[int, int]]:
    """The typed weights as the services take them: [(offer_id, weight)]; none is blank (`or 0`: never)."""
    return [(offer_id, _int(weights, offer_id, f"Offer {offer_id}'s weight") or 0) for offer_id in weights]


# -- landers: weighted as offers are, each row `lander_<id>` --------------------------------------


def visible_landers(db, principal) -> list:
    """The landers a stream of `principal`'s may send to (models/accounts/access.py), by id."""
    visible = visible_lander_ids(db, principal)
    landers = list_landers(db, include_archived=True)
    return [lander for lander in landers if visible is None or lander.id in visible]


def lander_rows(landers, weights: dict[int, str]) -> list[dict]:
    """Every lander a stream may use (archived ones only when the stream has them), with its weight and
    share, as offer_rows."""
    return [
        {"lander": row["offer"], "weight": row["weight"], "share": row["share"]}
        for row in offer_rows(landers, weights)
    ]


def typed_lander_weights(form: dict, landers) -> dict[int, str]:
    """The weight typed per lander (`lander_<id>`); a blank one is no lander of the stream."""
    typed = {lander.id: _text(form, f"lander_{lander.id}") for lander in landers}
    return {lander_id: weight for lander_id, weight in typed.items() if weight}


def chosen_landers(weights: dict[int, str]) -> list[tuple[int, int]]:
    return [
        (lander_id, _int(weights, lander_id, f"Lander {lander_id}'s weight") or 0) for lander_id in weights
    ]


# -- streams --------------------------------------------------------------------------------------


def stream_values(stream) -> dict[str, str]:
    return {
        "name": stream.name,
        "type": stream.type,
        "weight": str(stream.weight),
        "action": stream.action,
        "payload": stream.action_payload,
        "filter_mode": stream.filter_mode,
        "offer_rotation": stream.offer_rotation,
        "lander_rotation": stream.lander_rotation,
        "redirect_type": stream.redirect_type,
        "fallback_offer_id": "" if stream.fallback_offer_id is None else str(stream.fallback_offer_id),
        "daily_cap": "" if stream.daily_cap is None else str(stream.daily_cap),
        "total_cap": "" if stream.total_cap is None else str(stream.total_cap),
        "status": stream.status,
    }


NEW_STREAM = {
    "name": "",
    "type": "regular",
    "weight": "100",
    "action": "offers",
    "payload": "",
    "filter_mode": "and",
    "offer_rotation": "weight",
    "lander_rotation": "weight",
    "redirect_type": "http",
    "fallback_offer_id": "",
    "daily_cap": "",
    "total_cap": "",
    "status": "active",
}


def stream_changes(form: dict) -> dict:
    """The add_stream / update_stream keywords of the stream form (filters and offers aside)."""
    action = _text(form, "action") or "offers"
    return {
        "name": _text(form, "name"),
        "type": _text(form, "type") or "regular",
        "weight": _int(form, "weight", "The stream's weight") if _text(form, "weight") else 100,
        "action": action,
        "payload": str(form.get("payload", "")).strip() if action in ("redirect", "html", "campaign") else "",
        "filter_mode": _text(form, "filter_mode") or "and",
        "offer_rotation": _text(form, "offer_rotation") or "weight",
        "lander_rotation": _text(form, "lander_rotation") or "weight",
        "redirect_type": _text(form, "redirect_type") or "http",
        "fallback_offer_id": _int(form, "fallback_offer_id", "The fallback offer"),
        "daily_cap": _int(form, "daily_cap", "The daily cap"),
        "total_cap": _int(form, "total_cap", "The total cap"),
    }


def stream_summary(db, stream, offer_names: dict[int, str]) -> dict:
    """What the editor's stream list shows of a stream."""
    links = stream_offers(db, stream)
    total = sum(weight for _, weight in links)
    return {
        "stream": stream,
        "filters": f" {stream.filter_mode.upper()} ".join(describe_filters(stream)),
        "offers": [
            {
                "id": offer_id,
                "name": offer_names.get(offer_id, f"#{offer_id}"),
                "weight": weight,
                "share": weight / total * 100 if total else None,
            }
            for offer_id, weight in links
        ],
        "landers": stream_lander_rows(db, stream.id),
    }


def split_tests(
    db, stream, *, with_landers: bool, history=None
) -> tuple[list[tuple[str, object]], list[dict], list[dict]]:
    """An existing stream's split tests over all its clicks, (arm kind, SplitTest or the sentence why there
    is none), its offers' and, when asked, its landers'; and its offers' and landers' bandit shares as
    the last refresh stored them (models/reporting/).

    PERF: offers are read from the rollups; no rollup keeps the lander, so its test reads the columnar
    history (`history`; without one, the raw clicks of the whole period, a report's wait on a large
    install): on demand only."""
    from models.errors import LannerError
    from models.reporting.bandits import stream_shares
    from models.reporting.splittest import split_test

    if stream is None:
        return [], [], []
    tests: list[tuple[str, object]] = []
    for kind in ("offer", "lander") if with_landers else ("offer",):
        try:
            tests.append((kind, split_test(db, stream.id, arm_kind=kind, history=history)))
        except LannerError as exc:  # A range `lanner prune` emptied: say so, the editor still works.
            tests.append((kind, str(exc)))
    return tests, stream_shares(db, stream.id), stream_shares(db, stream.id, "lander")


def stream_groups(streams: list) -> list[dict]:
    """The streams by type in evaluation order, each with the order its up and down buttons post."""
    by_type = {kind: [s for s in streams if s.type == kind] for kind in STREAM_TYPES}
    groups = []
    for kind in STREAM_TYPES:
        ids = [s.id for s in by_type[kind]]
        moves = {}
        for index, stream_id in enumerate(ids):
            moved = {}
            for direction, other in (("up", index - 1), ("down", index + 1)):
                if 0 <= other < len(ids):
                    swapped = list(ids)
                    swapped[index], swapped[other] = swapped[other], swapped[index]
                    order = [s.id for k in STREAM_TYPES for s in by_type[k] if k != kind]
                    # Each type's positions are its own: the other types' ids keep theirs in any order.
                    moved[direction] = ",".join(str(i) for i in swapped + order)
            moves[stream_id] = moved
        groups.append({"type": kind, "streams": by_type[kind], "moves": moves})
    return groups


def shown_campaign_url(base: str, campaign) -> str:
    """The campaign's URL on its first domain (https once it has a certificate), else on the host the
    panel is reached by (`base`), with its source's parameters."""
    path = campaign_source_url(campaign)
    if campaign_domains(campaign.id):
        return campaign_url(campaign, path)
    return base + path.removeprefix("/")


class EditorResource(PanelResource):
    """The access rules every editor page applies: a campaign not visible is 404, a write without the
    right to change it 403."""

    def __init__(self, panel: PanelContext, campaign_base: CampaignBase | None) -> None:
        super().__init__(panel.sessions, panel.render)
        self.db = panel.db
        self.settings = panel.settings
        self.history = panel.reports.history  # The columnar history's files (a lander split test's).
        self.campaign_base = campaign_base

    def campaign(self, principal, campaign_id: int, *, write: bool = False):
        visible = visible_campaign_ids(self.db, principal)
        if visible is not None and campaign_id not in visible:
            raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {campaign_id}.")
        try:
            campaign = get_campaign(self.db, campaign_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
        if write and not edits_campaign(self.db, principal, campaign_id):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not change this campaign."
            )
        return campaign

    def stream(self, campaign, stream_id: int):
        try:
            stream = get_stream(self.db, stream_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
        if stream.campaign_id != campaign.id:
            raise falcon.HTTPNotFound(title="Not found", description=f"There is no stream {stream_id}.")
        return stream

    def write_form(self, req: falcon.Request, session) -> dict:
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        return form

    def owners(self, principal) -> list:
        return list_users(self.db) if principal.is_admin else []


NEW_CAMPAIGN = {
    "name": "",
    "alias": "",
    "rotation": "position",
    "uniqueness_hours": "24",
    "timezone": "UTC",
    "bind_visitor": "",
    "default_action": "not_found",
    "default_url": "",
    "cost_model": "cpc",
    "cost_value": "0",
    "cost_currency": "",
    "owner_id": "",
    "offer": "new",
    "offer_url": "",
    "source_id": "",
    "tags": "",
}


class CampaignNewResource(EditorResource):
    """/panel/campaigns/new: a campaign with one stream to one offer, as `lanner campaign create`."""

    def require_creator(self, principal) -> None:
        if not creates_campaigns(principal):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not create campaigns."
            )

    def show(self, req, resp, session, values: dict, message: str = "", code: int = 200) -> None:
        self.page(
            req,
            resp,
            "editor_new.html",
            session,
            code,
            values=values,
            message=message,
            offers=[o for o in visible_offers(self.db, session.principal) if o.status != "archived"],
            owners=self.owners(session.principal),
            sources=list_sources(self.db),
            timezones=timezone_names(),
            **CHOICES,
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.require_creator(session.principal)
        self.show(req, resp, session, dict(NEW_CAMPAIGN))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = self.write_form(req, session)
        principal = session.principal
        self.require_creator(principal)
        try:
            changes = campaign_changes(form, principal, is_new=True)
            if _text(form, "offer") == "new":
                changes["offer_url"] = _text(form, "offer_url")
            else:
                changes["offer_id"] = _int(form, "offer", "The offer")
            changes = {key: value for key, value in changes.items() if value is not None}
            name, alias = changes.pop("name"), changes.pop("alias")
            tags = parse_tags(_text(form, "tags"))
            campaign = create_campaign(self.db, name, alias, actor=principal, **changes)
            set_campaign_tags(self.db, campaign, tags, actor=principal)
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, {**NEW_CAMPAIGN, **form}, str(exc), 400)
            return
        raise falcon.HTTPSeeOther(f"/panel/campaigns/{campaign.id}")


def script_tag(base: str, alias: str) -> str:
    """The tag a remote lander includes to record its visits (routes/clickapi.py, /lanner.js)."""
    return f'<script src="{base}lanner.js" data-campaign="{alias}" async></script>'


class CampaignEditorResource(EditorResource):
    """/panel/campaigns/{id}: the campaign's URL and settings, and its streams in evaluation order with
    their numbers, today's and the period's (`?period=`, routes/panel/editornumbers.py)."""

    def __init__(self, panel: PanelContext, campaign_base: CampaignBase | None) -> None:
        super().__init__(panel, campaign_base)
        self.numbers = EditorNumbers(panel.db, panel.reports)

    def show(self, req, resp, session, campaign, values=None, message="", code=200, warnings=(), notice=""):
        principal = session.principal
        period = chosen_period(req)
        offers = list_offers(self.db)
        names = {offer.id: offer.name for offer in offers}
        streams = [stream_summary(self.db, stream, names) for stream in list_streams(self.db, campaign.id)]
        by_id = {summary["stream"].id: summary for summary in streams}
        numbers, currency = self.numbers(
            principal, campaign, streams, {offer.id: offer for offer in offers}, period
        )
        assert self.campaign_base is not None  # The campaign editor's (the cost pages pass none).
        base = self.campaign_base(req)
        self.page(
            req,
            resp,
            "editor.html",
            session,
            code,
            campaign=campaign,
            values=values
            or {
                **campaign_values(campaign),
                "tags": ", ".join(campaign_tags(self.db, [campaign.id]).get(campaign.id, [])),
            },
            message=message,
            is_editable=edits_campaign(self.db, principal, campaign.id),
            campaign_url=shown_campaign_url(base, campaign),
            tracker_base=base,
            script_tag=script_tag(base, campaign.alias),
            campaign_source=source_of(campaign),
            sources=[
                s
                for s in list_sources(self.db, include_archived=True)
                if s.status == "active" or s.id == campaign.source_id
            ],
            groups=[
                {**group, "streams": [by_id[s.id] for s in group["streams"]]}
                for group in stream_groups([summary["stream"] for summary in streams])
            ],
            order=",".join(str(summary["stream"].id) for summary in streams),
            numbers=numbers,
            currency=currency,
            period=period.key,
            range_period=period,
            range_state={},
            periods=PERIODS,
            owners=self.owners(principal),
            timezones=timezone_names(),
            # The cost currency's missing rate, if it has none, until one is stored (accepted, but told).
            warnings=[*warnings, *rate_warnings(self.db, campaign.cost_currency)],
            notice=notice,
            **CHOICES,
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        campaign = self.campaign(session.principal, campaign_id)
        warnings, notice = [], "Settings saved." if req.get_param("saved_settings") else ""
        saved = req.get_param_as_int("saved")
        if saved is not None:  # Back from saving a stream: what its geo filters cannot see (as the API says).
            try:
                stream = get_stream(self.db, saved)
            except AdminError:
                stream = None
            if stream is not None and stream.campaign_id == campaign.id:
                notice = f"Stream {stream.id} saved."
                warnings = stream_geo_warnings(
                    stream, self.settings.geo_path, self.settings.geo_network_paths
                )
        self.show(req, resp, session, campaign, warnings=warnings, notice=notice)

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        form = self.write_form(req, session)
        principal = session.principal
        campaign = self.campaign(principal, campaign_id, write=True)
        try:
            changes = campaign_changes(form, principal, is_new=False)
            tags = parse_tags(_text(form, "tags"))
            update_campaign(self.db, campaign.id, actor=principal, **changes)
            set_campaign_tags(self.db, campaign, tags, actor=principal)
        except (FormError, AdminError) as exc:
            values = {
                **campaign_values(campaign),
                **{name: str(form.get(name, "")) for name in CAMPAIGN_FIELDS},
            }
            self.show(req, resp, session, campaign, values, str(exc), 400)
            return
        raise falcon.HTTPSeeOther(f"/panel/campaigns/{campaign.id}?saved_settings=1")


class StreamFormResource(EditorResource):
    """/panel/campaigns/{id}/streams/new and /panel/campaigns/{id}/streams/{stream_id}: a stream's
    type, action, filters (the builder), offers with weights and caps."""

    def show(
        self,
        req,
        resp,
        session,
        campaign,
        stream,
        values,
        filters,
        weights,
        lander_weights,
        message="",
        code=200,
    ):
        offers = visible_offers(self.db, session.principal)  # Those it may use; another buyer's are not.
        landers = visible_landers(self.db, session.principal)
        rows = filters + [blank_filter_row() for _ in range(BLANK_FILTER_ROWS)]
        with_landers = req.method == "GET" and req.get_param("split") == "landers"
        tests, bandit, lander_bandit = split_tests(
            self.db, stream, with_landers=with_landers, history=self.history
        )
        self.page(
            req,
            resp,
            "editor_stream.html",
            session,
            code,
            campaign=campaign,
            stream=stream,
            values=values,
            filter_rows=rows,
            message=message,
            offer_rows=offer_rows(offers, weights),
            offers=offers,
            lander_rows=lander_rows(landers, lander_weights),
            is_editable=edits_campaign(self.db, session.principal, campaign.id),
            filter_hints=FILTER_HINTS,
            operators=OPERATORS,
            filter_names=FILTER_NAMES,
            filter_labels=FILTER_LABELS,
            split_tests=tests,
            split_alpha=ALPHA,
            has_landers=any(lander_weights.values()),
            bandit=bandit,
            lander_bandit=lander_bandit,
            **CHOICES,
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response, campaign_id: int, stream_id=None) -> None:
        session = self.sessions.require(req)
        campaign = self.campaign(session.principal, campaign_id)
        if stream_id is None:
            self.show(req, resp, session, campaign, None, dict(NEW_STREAM), [], {}, {})
            return
        stream = self.stream(campaign, stream_id)
        rows = [filter_row(spec) for spec in json.loads(stream.filters or "[]")]
        weights = {offer_id: str(weight) for offer_id, weight in stream_offers(self.db, stream)}
        lander_weights = {lander_id: str(weight) for lander_id, weight in stream_landers(stream.id)}
        self.show(req, resp, session, campaign, stream, stream_values(stream), rows, weights, lander_weights)

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int, stream_id=None) -> None:
        session = self.sessions.require(req)
        form = self.write_form(req, session)
        lists = read_form_lists(req)
        principal = session.principal
        campaign = self.campaign(principal, campaign_id, write=True)
        stream = None if stream_id is None else self.stream(campaign, stream_id)
        rows = posted_filter_rows(lists)
        values = {**NEW_STREAM, **{name: str(form.get(name, "")) for name in NEW_STREAM}}
        # Only the offers it may use are read: a forged field for another's is ignored, as for none at all.
        weights = typed_weights(form, visible_offers(self.db, principal))
        lander_weights = typed_lander_weights(form, visible_landers(self.db, principal))
        try:
            offers = chosen_offers(weights)
            landers = chosen_landers(lander_weights)
            changes = stream_changes(form)
            expressions = checked_filters(rows)
            if expressions is None:
                raise FormError("A filter cannot be used; see the message next to it.")
            if changes["action"] == "offers" and not offers:
                raise FormError("A stream that sends to offers needs at least one offer with a weight.")
            if stream is None:
                saved = add_stream(
                    self.db,
                    campaign.id,
                    offers=offers,
                    landers=landers,
                    filters=expressions,
                    actor=principal,
                    **changes,
                )
            else:
                status = _text(form, "status") or stream.status
                saved = update_stream(
                    self.db,
                    stream.id,
                    offers=offers or None,
                    landers=landers,
                    filters=expressions,
                    clear_filters=not expressions,
                    clear_caps=True,
                    clear_fallback_offer=True,
                    status=status if status != "deleted" else None,
                    actor=principal,
                    **changes,
                )
        except (FormError, AdminError) as exc:
            self.show(
                req, resp, session, campaign, stream, values, rows, weights, lander_weights, str(exc), 400
            )
            return
        raise falcon.HTTPSeeOther(f"/panel/campaigns/{campaign.id}?saved={saved.id}#streams")


class StreamRemoveResource(EditorResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int, stream_id: int) -> None:
        session = self.sessions.require(req)
        self.write_form(req, session)
        campaign = self.campaign(session.principal, campaign_id, write=True)
        stream = self.stream(campaign, stream_id)
        remove_stream(self.db, stream.id, actor=session.principal)
        raise falcon.HTTPSeeOther(f"/panel/campaigns/{campaign.id}#streams")


class StreamOrderResource(EditorResource):
    """The streams' new order, from a drag and drop (panel.js) or an up/down button: every stream id of
    the campaign, comma-separated, as reorder_streams takes them."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        form = self.write_form(req, session)
        campaign = self.campaign(session.principal, campaign_id, write=True)
        parts = [part.strip() for part in str(form.get("order", "")).split(",") if part.strip()]
        if not all(part.isascii() and part.isdigit() and len(part) < 19 for part in parts):
            raise falcon.HTTPBadRequest(
                title="Not reordered", description="The order is a list of stream ids."
            )
        try:
            reorder_streams(self.db, campaign.id, [int(part) for part in parts], actor=session.principal)
        except AdminError as exc:
            raise falcon.HTTPBadRequest(title="Not reordered", description=str(exc)) from None
        raise falcon.HTTPSeeOther(f"/panel/campaigns/{campaign.id}#streams")


CHOICES = {
    "campaign_statuses": CAMPAIGN_STATUSES,
    "rotations": ROTATIONS,
    "default_actions": DEFAULT_ACTIONS,
    "cost_models": COST_MODELS,
    "stream_types": STREAM_TYPES,
    "stream_actions": STREAM_ACTIONS,
    "filter_modes": FILTER_MODES,
    "offer_rotations": OFFER_ROTATIONS,
    "lander_rotations": LANDER_ROTATIONS,
    "redirect_types": REDIRECT_TYPES,
}


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    base = CampaignBase(panel.sessions, panel.settings)
    campaign = "/panel/campaigns/{campaign_id:int(min=1)}"
    streams = StreamFormResource(panel, base)
    app.add_route("/panel/campaigns/new", CampaignNewResource(panel, base))
    app.add_route(campaign, CampaignEditorResource(panel, base))
    app.add_route(campaign + "/streams/new", streams)
    app.add_route(campaign + "/streams/order", StreamOrderResource(panel, base))
    app.add_route(campaign + "/streams/{stream_id:int(min=1)}", streams)
    app.add_route(campaign + "/streams/{stream_id:int(min=1)}/remove", StreamRemoveResource(panel, base))
