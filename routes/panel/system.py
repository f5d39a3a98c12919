"""The panel's admin pages about the install itself: /panel/audit (the audit log, as `lanner audit
list` shows it) and /panel/status (what `lanner status` and GET /api/v1/status show, and the
effective settings as `lanner settings` prints them). Admins only, as the CLI and the API decide."""

from __future__ import annotations

import csv
import io
import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import falcon

from models.accounts.audit import audit_actors, audit_entities, list_audit, list_audit_sorted, newest_audit_id
from models.reporting.reports import preset_range
from models.reporting.timerange import TimeRangeError, local_instant, zone
from routes.panel.common import PERIODS, PanelContext, PanelResource, timezone_of
from routes.panel.people import local_time
from routes.panel.reports import csv_text
from routes.panel.sorting import Sort
from settings import shown_settings

AUDIT_PAGE_ROWS = 50
AUDIT_CSV_CHUNK = 1000  # Entries read per query while the CSV streams.
AUDIT_PERIODS = {"all_time": "All time", **PERIODS}
AUDIT_SORTS = ("when", "who", "what")  # The columns shown but the changes (a list of fields each).
MAX_AUDIT_PAGE = 1_000_000
ENTITY_PATTERN = re.compile(r"^[a-z_]{1,40}$")  # What the services name entities (record_change).
STATUS_SECTIONS = (
    "consumer",
    "spool",
    "queue",
    "database",
    "geo",
    "bot_ranges",
    "deferred",
    "postbacks",
    "alerts",
)


def require_admin(sessions, req: falcon.Request, what: str):
    session = sessions.require(req)
    if not session.principal.is_admin:
        raise falcon.HTTPForbidden(title="Admins only", description=f"Only an admin sees {what}.")
    return session


def optional_id(req: falcon.Request, name: str) -> int | None:
    """A positive id parameter; blank (the filter form's empty box) is none."""
    text = (req.get_param(name) or "").strip()
    if not text:
        return None
    if not text.isdigit() or not 0 < int(text) < 2**63:
        raise falcon.HTTPBadRequest(title="Bad id", description=f"The {name.replace('_', ' ')} is a number.")
    return int(text)


def shown_value(value: Any) -> str:
    """An audited value as text: strings as they are (an empty one as ""), everything else as JSON
    (null, true, 3, [..])."""
    return value if isinstance(value, str) and value else json.dumps(value, sort_keys=True)


def entry_fields(entry) -> list[tuple[str, str | None, str | None]]:
    """(field, old or None, new or None) of every field the entry changed, by name."""
    names = sorted({*entry.old_values, *entry.new_values})
    return [
        (
            name,
            shown_value(entry.old_values[name]) if name in entry.old_values else None,
            shown_value(entry.new_values[name]) if name in entry.new_values else None,
        )
        for name in names
    ]


def audit_query(req: falcon.Request, tz: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The audit log's filters as the query gives them: (list_audit's keywords, the page's filters)."""
    period = req.get_param("period") or "all_time"
    if period not in AUDIT_PERIODS:
        raise falcon.HTTPBadRequest(
            title="Unknown period", description=f"The period is one of {', '.join(AUDIT_PERIODS)}."
        )
    entity = req.get_param("entity") or None
    if entity is not None and not ENTITY_PATTERN.match(entity):
        raise falcon.HTTPBadRequest(
            title="Bad entity", description="An entity is a type such as campaign, stream or user."
        )
    entity_id = optional_id(req, "entity_id") if entity else None
    actor = (req.get_param("actor") or "").strip() or None
    since, until = (req.get_param("from") or "").strip(), (req.get_param("to") or "").strip()
    if since or until:  # A custom range (dates in the user's timezone, the end inclusive) wins.
        try:
            start = local_instant(since, zone(tz), is_end=False) if since else None
            end = local_instant(until, zone(tz), is_end=True) if until else None
        except TimeRangeError as exc:
            raise falcon.HTTPBadRequest(title="Bad date", description=str(exc)) from None
    else:
        start, end = preset_range(period, zone(tz), time.time())
    query = {
        "entity": entity,
        "entity_id": entity_id,
        "since_ms": start or 0,
        "until_ms": end,
        "actor": actor,
    }
    filters = {
        "period": period,
        "from": since,
        "to": until,
        "entity": entity or "",
        "entity_id": entity_id or "",
        "actor": actor or "",
    }
    return query, {name: value for name, value in filters.items() if value}


def audit_sort(req: falcon.Request) -> Sort:
    """`?sort=` over AUDIT_SORTS, two keys (routes/panel/sorting.py); none: newest first."""
    return Sort.parse(req.get_param("sort"), AUDIT_SORTS)


def sorted_page(req: falcon.Request) -> int:
    page = optional_id(req, "page") or 1
    if page > MAX_AUDIT_PAGE:
        raise falcon.HTTPBadRequest(title="Bad page", description=f"The page is 1 to {MAX_AUDIT_PAGE:,}.")
    return page


def sort_order(sort: Sort) -> list[tuple[str, bool]]:
    return [(key.column, key.is_descending) for key in sort.keys]


class AuditResource(PanelResource):
    """Newest first, paged by the last entry's id; or sorted by up to two of its columns (`sort=`),
    paged by number below the newest entry of the first page (`below`), so entries added meanwhile
    neither repeat nor push others onto the next page."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = require_admin(self.sessions, req, "the audit log")
        tz = timezone_of(session.principal)
        query, filters = audit_query(req, tz)
        sort = audit_sort(req)
        if sort.text:
            filters = {**filters, "sort": sort.text}
        older = None
        if sort.keys:
            page = sorted_page(req)
            below = optional_id(req, "below") or (newest_audit_id(self.sessions.db) or 0) + 1
            entries = list_audit_sorted(
                self.sessions.db,
                sort_order(sort),
                offset=(page - 1) * AUDIT_PAGE_ROWS,
                limit=AUDIT_PAGE_ROWS + 1,
                before_id=below,
                **query,
            )
            cursor = page if page > 1 else None
            if len(entries) > AUDIT_PAGE_ROWS:
                entries = entries[:AUDIT_PAGE_ROWS]
                older = "?" + urllib.parse.urlencode({**filters, "below": below, "page": page + 1})
        else:
            cursor = optional_id(req, "cursor")
            entries = list_audit(self.sessions.db, **query, before_id=cursor, limit=AUDIT_PAGE_ROWS + 1)
            if len(entries) > AUDIT_PAGE_ROWS:
                entries = entries[:AUDIT_PAGE_ROWS]
                older = "?" + urllib.parse.urlencode({**filters, "cursor": entries[-1].id})
        plain = {name: value for name, value in filters.items() if name != "sort"}
        self.page(
            req,
            resp,
            "audit.html",
            session,
            entries=[(entry, local_time(entry.created_at, tz), entry_fields(entry)) for entry in entries],
            periods=AUDIT_PERIODS,
            period=filters["period"],
            range_from=filters.get("from", ""),
            range_to=filters.get("to", ""),
            entities=audit_entities(self.sessions.db),
            entity=filters.get("entity", ""),
            entity_id=filters.get("entity_id", ""),
            actor=filters.get("actor", ""),
            actors=audit_actors(self.sessions.db),
            older=older,
            newest="?" + urllib.parse.urlencode(filters) if cursor else None,
            csv_query=urllib.parse.urlencode(filters, safe=","),
            sort=sort,
            sort_links={
                column: urllib.parse.urlencode(
                    {**plain, "sort": sort.clicked(column, is_descending_first=column == "when")}, safe=","
                )
                for column in AUDIT_SORTS
            },
        )


class AuditCsvResource(PanelResource):
    """`GET /panel/audit.csv`: every entry the filters select (all pages, newest first), a line per
    changed field (an entry that changed none: one line without), streamed AUDIT_CSV_CHUNK entries a
    query."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = require_admin(self.sessions, req, "the audit log")
        tz = timezone_of(session.principal)
        query, _ = audit_query(req, tz)
        sort = audit_sort(req)
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Content-Disposition", 'attachment; filename="lanner-audit.csv"')
        resp.stream = self.lines(query, tz, sort)

    def chunks(self, query: dict[str, Any], sort: Sort) -> Iterator[list]:
        """The entries in the page's order, AUDIT_CSV_CHUNK a query."""
        db = self.sessions.db
        if not sort.keys:
            before_id = None
            while True:
                entries = list_audit(db, **query, before_id=before_id, limit=AUDIT_CSV_CHUNK)
                yield entries
                if len(entries) < AUDIT_CSV_CHUNK:
                    return
                before_id = entries[-1].id
        below, offset = (newest_audit_id(db) or 0) + 1, 0  # Entries added while it streams stay out.
        while True:
            entries = list_audit_sorted(
                db, sort_order(sort), offset=offset, limit=AUDIT_CSV_CHUNK, before_id=below, **query
            )
            yield entries
            if len(entries) < AUDIT_CSV_CHUNK:
                return
            offset += AUDIT_CSV_CHUNK

    def lines(self, query: dict[str, Any], tz: str, sort: Sort) -> Iterator[bytes]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["Time", "Who", "Action", "Entity", "Entity id", "Field", "Old", "New"])
        for entries in self.chunks(query, sort):
            for entry in entries:
                head = [
                    local_time(entry.created_at, tz),
                    csv_text(entry.actor),
                    entry.action,
                    entry.entity,
                    "" if entry.entity_id is None else str(entry.entity_id),
                ]
                for name, old, new in entry_fields(entry) or [("", None, None)]:
                    writer.writerow([*head, name, csv_text(old or ""), csv_text(new or "")])
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()


def section_rows(section: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, value) of a status section; nested values as JSON."""
    return [
        (name, value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        for name, value in section.items()
    ]


class StatusResource(PanelResource):
    def __init__(self, sessions, render, settings) -> None:
        super().__init__(sessions, render)
        self.settings = settings

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        from workers.ops.status import collect_status

        session = require_admin(self.sessions, req, "the install's status")
        status = collect_status(self.settings, self.sessions.db)
        geo = status["geo"]
        warnings = [info["warning"] for info in (geo, *geo.get("network", {}).values()) if "warning" in info]
        sections = [(name, section_rows(status[name])) for name in STATUS_SECTIONS if name in status]
        self.page(
            req,
            resp,
            "status.html",
            session,
            web=status["web"],
            consumer=status["consumer"],
            spool=status["spool"],
            database=status["database"],
            warnings=warnings,
            sections=sections,
            settings_rows=shown_settings(self.settings),
        )


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/audit", AuditResource(panel.sessions, panel.render))
    app.add_route("/panel/audit.csv", AuditCsvResource(panel.sessions, panel.render))
    app.add_route("/panel/status", StatusResource(panel.sessions, panel.render, panel.settings))
