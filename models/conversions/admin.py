"""Postback administration: the key, status maps (re-applied to stored conversions), outbound targets.

The library the CLI, the API and the panel call; every error is an AdminError with one sentence for the
user. Every change names its actor and is in the audit log (entities `postback_target`, `status_map`).
"""

from __future__ import annotations

import time
from typing import Any

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminError, AdminNotFound
from models.admin.rows import get_campaign
from models.choices import POSTBACK_METHODS
from models.conversions.outbound import OutboundError, compile_target_url, http_send, render_delivery
from models.conversions.postbacks import ALLOWED_CHANGES, STATUSES, StatusChange, change_status
from models.reporting.currency import campaign_cost, report_currency
from models.store.conversions import ConversionStore
from models.store.database import write_tx
from models.tables.conversion import Conversion, PostbackTarget, StatusMap


def _status(value: str) -> str:
    status = value.strip().lower()
    if status not in STATUSES:
        raise AdminError(f"Status must be one of {', '.join(STATUSES)}, not {value!r}.")
    return status


def map_status(
    db: Database, raw_status: str, status: str, *, network: str = "", actor: Principal = CLI
) -> int:
    """Map a network's word to a status; conversions stored with that word unmapped take it now,
    with their costs, rollups and outbound postbacks.

    Returns how many stored conversions were re-mapped.
    """
    word = raw_status.strip().lower()
    if not word:
        raise AdminError("The network's status word cannot be empty.")
    status, network = _status(status), network.strip().lower()
    remapped = 0
    with write_tx(db):
        before = StatusMap.get_or_none((StatusMap.network == network) & (StatusMap.raw_status == word))
        StatusMap.insert(network=network, raw_status=word, status=status).on_conflict(
            conflict_target=[StatusMap.network, StatusMap.raw_status], update={StatusMap.status: status}
        ).execute()
        stored = Conversion.select().where(
            (Conversion.raw_status == word) & Conversion.status.not_in(list(ALLOWED_CHANGES))
        )
        if network:
            stored = stored.where(Conversion.network == network)
        conn = db.connection()
        conversions = ConversionStore(conn)
        costs = {}
        report = report_currency(conn)
        now = int(time.time() * 1000)
        for conversion in stored:
            if conversion.campaign_id not in costs:
                costs[conversion.campaign_id] = campaign_cost(conn, conversion.campaign_id, report)
            change = StatusChange(
                conversion.id,
                conversion.click_id,
                conversion.campaign_id,
                conversion.status,
                conversion.original_status,
                conversion.raw_status,
                conversion.report_payout,
                conversion.cost,
                status,
                conversion.tid,
                conversion.raw_status,
                conversion.payout,
                conversion.currency,
                conversion.report_payout,
            )
            # Its outbound postbacks are sent by `lanner worker`'s periodic sweep within a minute.
            change_status(conversions, change, *costs[conversion.campaign_id], now)
            remapped += 1
        new = {"network": network, "raw_status": word, "status": status}
        if before is None:
            record_change(db, actor, "status_map", None, "create", None, new)
        elif before.status != status:
            # A map has no id: the old snapshot leaves out its network and word so the entry keeps them.
            record_change(db, actor, "status_map", None, "update", {"status": before.status}, new)
    return remapped


def unmap_status(db: Database, raw_status: str, *, network: str = "", actor: Principal = CLI) -> None:
    word, network = raw_status.strip().lower(), network.strip().lower()
    with write_tx(db):
        found = StatusMap.get_or_none((StatusMap.raw_status == word) & (StatusMap.network == network))
        if found is None:
            raise AdminNotFound(
                f"There is no map for {raw_status!r}" + (f" of network {network!r}." if network else ".")
            )
        StatusMap.delete().where((StatusMap.raw_status == word) & (StatusMap.network == network)).execute()
        old = {"network": network, "raw_status": word, "status": found.status}
        record_change(db, actor, "status_map", None, "delete", old, None)


def list_status_maps(db: Database) -> list[dict[str, Any]]:
    maps = StatusMap.select().order_by(StatusMap.network, StatusMap.raw_status).dicts()
    return list(maps)  # type: ignore[arg-type]  # .dicts(): peewee's stubs still say models.


def _statuses(values: list[str] | tuple[str, ...]) -> str:
    statuses = [_status(part) for value in values for part in value.split(",") if part.strip()]
    if not statuses:
        raise AdminError("Name at least one status the target is for (lead, sale, rejected, rebill, trash).")
    return ",".join(dict.fromkeys(statuses))


def add_target(
    db: Database,
    campaign_ref: str,
    url: str,
    statuses: list[str],
    *,
    method: str = "GET",
    actor: Principal = CLI,
) -> PostbackTarget:
    """An outbound postback for a campaign's conversions in these statuses."""
    campaign = get_campaign(db, campaign_ref)
    method = method.upper()
    if method not in POSTBACK_METHODS:
        raise AdminError(f"Method must be GET or POST, not {method!r}.")
    try:
        compile_target_url(url)
    except OutboundError as exc:
        raise AdminError(str(exc)) from None
    joined = _statuses(statuses)
    with write_tx(db):
        target = PostbackTarget.create(
            campaign_id=campaign.id,
            statuses=joined,
            url=url,
            method=method,
            created_at=int(time.time() * 1000),
        )
        record_change(db, actor, "postback_target", target.id, "create", None, _target_fields(target))
    return target


def _target_fields(target: PostbackTarget) -> dict[str, Any]:
    return {name: getattr(target, name) for name in ("campaign_id", "statuses", "url", "method", "status")}


def remove_target(db: Database, target_id: int, *, actor: Principal = CLI) -> PostbackTarget:
    """Stop sending to a target (its delivery history stays)."""
    with write_tx(db):
        target = PostbackTarget.get_or_none(
            (PostbackTarget.id == target_id) & (PostbackTarget.status == "active")
        )
        if target is None:
            raise AdminNotFound(f"There is no active postback target {target_id}.")
        if target.source_id is not None:  # Made again by the source's next change: refuse, say why.
            raise AdminError(
                f"Postback target {target_id} is its campaign's traffic source's postback; empty the "
                "source's postback URL, or take the campaign off the source."
            )
        before = _target_fields(target)
        target.status = "removed"
        target.save()
        record_change(db, actor, "postback_target", target.id, "remove", before, _target_fields(target))
    assert target is not None  # mypy: WriteTransaction.__exit__ says it may swallow the raise above.
    return target


def list_targets(db: Database, campaign_ref: str | None = None) -> list[dict[str, Any]]:
    select = PostbackTarget.select().where(PostbackTarget.status == "active")
    if campaign_ref:
        select = select.where(PostbackTarget.campaign_id == get_campaign(db, campaign_ref).id)
    return list(select.order_by(PostbackTarget.id).dicts())  # type: ignore[arg-type]  # .dicts(): peewee's stubs still say models.


SAMPLE_CLICK = {
    "subid": "0000000000example",
    "campaign_id": "0",
    "stream_id": "0",
    "offer_id": "0",
    "ip": "203.0.113.7",
    "user_agent": "Mozilla/5.0 (test)",
    "country": "US",
    "source": "test",
    "sub_id_1": "test",
}


def test_target(
    url: str, *, method: str = "GET", status: str = "sale", payout: float = 1.0
) -> dict[str, Any]:
    """Send one postback to `url` now, with sample click values; store nothing."""
    try:
        template = compile_target_url(url)
    except OutboundError as exc:
        raise AdminError(str(exc)) from None
    if method.upper() not in POSTBACK_METHODS:
        raise AdminError(f"Method must be GET or POST, not {method!r}.")
    rendered = render_delivery(template, _status(status), (0, "test", payout, "USD"), SAMPLE_CLICK, "test")
    code, error = http_send(rendered, method.upper())
    return {
        "url": rendered,
        "method": method.upper(),
        "response_code": code,
        "error": error,
        "ok": bool(code and 200 <= code < 300),
    }
