"""Incoming postbacks: a network's word about a click, turned into exactly one conversion per (subid, tid).

The rules, in the order `ConversionRecorder.record` applies them inside one write transaction
(BEGIN IMMEDIATE: concurrent identical postbacks through several workers are serialised, so the
second one finds the first one's row and is a duplicate):

- The status word is mapped: the postback's own `<status>_status=word1,word2` parameters (Keitaro's
  in-URL maps), then `lanner postback status map` entries for the network (`from=`), then those for
  every network, then the statuses themselves, then built-in aliases (approved → sale, hold → lead,
  declined → rejected ...). A word nothing maps is stored as it came (lowercase) and counts nowhere
  until a map for it is added, which re-maps the stored conversions. No status at all means `sale`:
  a network that sends a single postback sends it for a paid conversion.
- The conversion is found by (subid, tid). A postback with a tid adopts the click's one conversion
  without a tid (lead sent without, sale with); one without a tid updates the click's only
  conversion. A rebill is always a new conversion and needs a tid of its own.
- The changes allowed are the network's (`network.status_changes`, the network the postback's `from=`
  names, else the click's offer's): `forward` (the default) allows lead → sale | rejected | trash, sale
  → rejected, rebill → rejected; `any` (a network that corrects itself either way) allows any of lead,
  sale, rejected and trash to become any other, and a rebill to become lead, rejected or trash (a
  rejected rebill approved again is a rebill again). Any mapped status replaces an unmapped one. The
  first status is kept as `original_status`, the one before the last change as `previous_status`
  (the conversion log's before → after); revenue, cost and the rollups move with the status. A
  conversion approved again without a payout, stored with none (a network that zeroes a rejected
  one's), gets its offer's payout, as a new conversion would. The same status again is a duplicate:
  answered 200, so the network stops retrying, and logged.
- Rebills (`network.rebills`): `own_tid` (the default): a `rebill` word with a tid of its own; `repeat_sale`:
  the network sends each rebill as another approved postback with a new tid, so a sale for a click that
  has a sale (or rebill) already, with a tid none of its conversions has, is recorded as a new rebill.
- A subid not in the click table yet (its click may still be in the spool) is parked in the log and
  matched by the spool flusher when the click lands; it expires after `LANNER_POSTBACK_PARK_HOURS`.
- A subid made before `pruned_before` (LANNER_RAW_RETENTION or `lanner prune` deleted raw clicks that
  old) whose click the row store no longer has is looked up in the columnar history, before the write
  transaction (DuckDB is never opened while the row store's write lock is held), and the click is put
  back in the row store from it (`revive_click`): the conversion, its rollup key and every later status
  change find it there as for any click, and retention keeps a converted click.

Every postback is logged as received, with its verdict, in the same transaction as its effect.
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from peewee import Database

from models.choices import POSTBACK_VERDICTS, SUB_ID_SLOTS
from models.clicks.record import SUBID_PATTERN
from models.errors import LannerError
from models.reporting.currency import CODE, campaign_cost, conversion_cost, convert, report_currency
from models.reporting.historyclicks import ClickHistory, may_be_pruned, row_store_values
from models.reporting.rollups import RollupDelta, click_key, conversion_metrics
from models.store.conversions import ConversionStore, PostbackLogStore
from models.store.database import write_tx
from models.store.deliveries import DeliveryStore
from models.store.duckdb.connection import HistoryBusy, HistoryUnreadable
from models.store.meta import MetaStore
from models.tables.conversion import LEAD, REBILL, REJECTED, SALE, STATUSES, TRASH

logger = logging.getLogger(__name__)

DEFAULT_STATUS = SALE
ALLOWED_CHANGES: dict[str, frozenset[str]] = {
    LEAD: frozenset({SALE, REJECTED, TRASH}),
    SALE: frozenset({REJECTED}),
    REBILL: frozenset({REJECTED}),
    REJECTED: frozenset(),
    TRASH: frozenset(),
}
# A network whose postbacks correct a status either way (`status_changes = any`).
ANY_CHANGES: dict[str, frozenset[str]] = {
    **{
        status: frozenset({LEAD, SALE, REJECTED, TRASH} - {status})
        for status in (LEAD, SALE, REJECTED, TRASH)
    },
    REBILL: frozenset({LEAD, REJECTED, TRASH}),
}
CHANGES = {"forward": ALLOWED_CHANGES, "any": ANY_CHANGES}  # By network.status_changes.
DEFAULT_RULES = ("forward", "own_tid")  # A postback no network's settings apply to.
BUILTIN_ALIASES: dict[str, str] = {
    **dict.fromkeys(("pending", "hold", "on_hold", "wait", "waiting", "processing", "new", "open"), LEAD),
    **dict.fromkeys(
        ("approved", "approve", "confirmed", "confirm", "paid", "accepted", "accept", "completed", "success"),
        SALE,
    ),
    **dict.fromkeys(
        (
            "declined",
            "decline",
            "cancelled",
            "canceled",
            "cancel",
            "reject",
            "refund",
            "refunded",
            "chargeback",
            "reversed",
            "fraud",
            "denied",
            "failed",
        ),
        REJECTED,
    ),
    **dict.fromkeys(("recurring", "renewal", "upsell"), REBILL),
    **dict.fromkeys(("invalid", "spam", "junk"), TRASH),
}

# Verdicts, as logged and answered.
VERDICTS = POSTBACK_VERDICTS
CREATED, UPDATED, DUPLICATE, REFUSED, PARKED, EXPIRED, INVALID, FORBIDDEN, FAILED = VERDICTS

SUBID_PARAMS = ("subid", "clickid", "click_id")
TID_PARAMS = ("tid", "transaction_id", "txid")
MAX_TEXT = 200
MAX_REQUEST_LOGGED = 4000
STATUS_WORD = re.compile(r"^[\w .:-]{1,50}$")


def storable(text: str) -> str:
    """`text` with each NUL as U+FFFD: PostgreSQL's text cannot hold a NUL (SQLite's can), so what a
    network sends is stored alike on both. No network means one."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


class PostbackError(LannerError, ValueError):
    """A postback that cannot be processed; the message is one sentence for the network's log."""


@dataclass
class Postback:
    """What a postback asks for, parsed and bounded."""

    subid: str
    tid: str = ""
    raw_status: str = ""
    payout: float | None = None
    currency: str = ""
    network: str = ""
    status_words: dict[str, str] = field(default_factory=dict)  # word -> status, from `sale_status=...`
    sub_ids: dict[int, str] = field(default_factory=dict)  # slot -> value, applied to the click

    def to_json(self) -> str:
        data = asdict(self)
        data["sub_ids"] = {str(slot): value for slot, value in self.sub_ids.items()}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Postback:
        data = json.loads(text)
        data["sub_ids"] = {int(slot): value for slot, value in data["sub_ids"].items()}
        return cls(**data)


@dataclass
class Received:
    """How a postback arrived, for the log (the key is never part of `request`)."""

    method: str
    remote_ip: str
    request: str


@dataclass
class Outcome:
    verdict: str
    detail: str
    conversion_id: int | None = None
    status: str = ""
    deliveries: list[int] = field(default_factory=list)  # Outbound postbacks to send now.

    @property
    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "detail": self.detail, "conversion_id": self.conversion_id}


def _first(params: Mapping[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = params.get(name)
        if value:
            return value.strip()
    return ""


def parse_amount(text: str, what: str) -> float:
    """A money amount as networks send it (`12.5`, `12,50`); PostbackError if not one."""
    cleaned = text.strip().replace(",", ".") if text.count(",") == 1 and "." not in text else text.strip()
    try:
        amount = float(cleaned)
    except ValueError:
        raise PostbackError(f"{what} {text[:40]!r} is not a number.") from None
    if not math.isfinite(amount) or amount < 0 or amount > 1e9:
        raise PostbackError(f"{what} {text[:40]!r} must be a number from 0 to 1,000,000,000.")
    return amount


def parse_postback(params: Mapping[str, str]) -> Postback:
    """The postback a network's parameters describe; PostbackError names what is wrong."""
    subid = _first(params, SUBID_PARAMS)
    if not subid:
        raise PostbackError("The postback has no subid parameter.")
    if not SUBID_PATTERN.match(subid):
        raise PostbackError(
            f"{subid[:40]!r} is not a Lanner subid (is the network's macro in the postback URL right?)."
        )
    raw_status = params.get("status", "").strip()
    if raw_status and not STATUS_WORD.match(raw_status):
        raise PostbackError(f"Status {raw_status[:40]!r} is not a status word.")
    postback = Postback(
        subid=subid,
        tid=storable(_first(params, TID_PARAMS)[:MAX_TEXT]),
        raw_status=raw_status.lower(),
        currency=params.get("currency", "").strip().upper(),
        network=storable(params.get("from", "").strip().lower()[:MAX_TEXT]),
    )
    if postback.currency and not CODE.match(postback.currency):
        raise PostbackError(f"Currency {postback.currency[:20]!r} is not a three-letter code such as USD.")
    payout = params.get("payout", "").strip()
    if payout:
        postback.payout = parse_amount(payout, "Payout")
    for status in STATUSES:
        for word in params.get(f"{status}_status", "").split(","):
            if word.strip():
                postback.status_words[word.strip().lower()[:50]] = status
    for name, value in params.items():
        slot = name[7:]  # isdigit() alone takes `²`, which int() refuses.
        if (
            name.startswith("sub_id_")
            and slot.isascii()
            and slot.isdigit()
            and 1 <= int(slot) <= SUB_ID_SLOTS
        ):
            postback.sub_ids[int(slot)] = storable(value[:500])
    return postback


def read_secret(db: Database, name: str) -> str:
    return MetaStore(db.connection()).get(name) or ""


def rotate_secret(db: Database, name: str) -> str:
    """Replace the postback or API key; the old one stops working at once."""
    value = secrets.token_hex(16)
    with write_tx(db):
        MetaStore(db.connection()).set(name, value)
    return value


def keys_match(given: str, expected: str) -> bool:
    return bool(expected) and secrets.compare_digest(given.encode(), expected.encode())


class ConversionRecorder:
    """Applies postbacks to the conversion table; one per process, on that process's connection."""

    def __init__(
        self, db: Database, *, park_ms: int, clock=time.time, history: ClickHistory | None = None
    ) -> None:
        """`history`: where a click the row store no longer has is looked up (None: nowhere)."""
        self.db = db
        self.park_ms = park_ms
        self.clock = clock
        self.history = history
        self._missed: set[str] = set()  # Parked subids the history was asked about and does not hold.
        self._stores: tuple[ConversionStore, PostbackLogStore] | None = None

    def _connection_stores(self) -> tuple[ConversionStore, PostbackLogStore]:
        """The stores of this thread's connection, made again only when that connection changes."""
        conn = self.db.connection()
        stores = self._stores
        if stores is None or stores[0].conn is not conn:  # First use, a reconnect, another thread.
            stores = self._stores = (ConversionStore(conn), PostbackLogStore(conn))
        return stores

    def log_rejected(self, received: Received, verdict: str, detail: str, subid: str = "") -> None:
        """Log a postback with the right key refused before processing (malformed); it changes nothing.

        One without the right key is only counted (models/conversions/refusals.py): anyone can send those.
        """
        with write_tx(self.db):
            log = self._connection_stores()[1]
            self._log(log, received, Postback(subid=subid[:MAX_TEXT]), Outcome(verdict, detail), None)

    def record(self, postback: Postback, received: Received) -> Outcome:
        """Apply `postback` and log it, in one transaction."""
        historic = self._historic(postback.subid)
        with write_tx(self.db):
            conversions, log = self._connection_stores()
            outcome = self._apply(conversions, postback, historic)
            expires_at = self._now() + self.park_ms if outcome.verdict == PARKED else None
            self._log(log, received, postback, outcome, expires_at)
        return outcome

    def settle_parked(self) -> list[Outcome]:
        """Apply parked postbacks whose click has landed; expire the ones that waited too long."""
        conversions, log = self._connection_stores()
        if not log.any_parked():
            return []
        outcomes = []
        pruned = self._parked_history(log)
        with write_tx(self.db):
            for click in pruned:  # Back in the row store: their postbacks are matched as landed ones.
                conversions.revive_click(row_store_values(click))
            parked = [
                (log_id, Postback.from_json(params), received_at)
                for log_id, params, received_at in log.parked_landed()
            ]
            # Every click first, in one order, before any rollup row: on PostgreSQL find_click locks the
            # click's row, and a postback takes its click's, then rollup rows. Locking each click as its
            # postback came up held the rollup rows of the ones before while waiting for a click a
            # postback held, which waited for those rollup rows: a deadlock (tests/test_histories.py).
            for subid in sorted({postback.subid for _, postback, _ in parked}):
                conversions.find_click(subid)
            for log_id, postback, received_at in parked:
                outcome = self._apply(conversions, postback)
                waited = (self._now() - received_at) / 1000
                detail = f"{outcome.detail} (matched after {waited:.1f} s parked)"
                log.settle_parked(log_id, outcome.verdict, detail, outcome.conversion_id)
                outcomes.append(outcome)
            log.expire_parked(self._now())
        return outcomes

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def _parked_history(self, log: PostbackLogStore) -> list[dict]:
        """The clicks of parked postbacks that only the history holds (a web worker that could not look
        them up in time, or a cluster node without the file: the history node's flusher matches them).
        Asked once per subid it lacks, not every round."""
        if self.history is None:
            return []
        subids = log.parked_subids()
        self._missed &= set(subids)
        cutoff = MetaStore(self.db.connection()).pruned_before()
        found: list[dict] = []
        for subid in subids:
            if subid in self._missed or not may_be_pruned(subid, cutoff):
                continue
            try:
                click = self.history.by_subid(subid)
            except (HistoryBusy, HistoryUnreadable):
                return found  # The next round asks again.
            if click is None:
                self._missed.add(subid)
            else:
                found.append(click)
        return found

    def _historic(self, subid: str) -> dict | None:
        """The history's copy of the click, if the row store no longer has it (made before the prune cutoff,
        and not in the row store). PERF: one `meta` read for any other postback; DuckDB (an open and a
        lookup, ~20-30 ms, after a wait of at most LOOKUP_WAIT for an append's chunk) only for those."""
        if self.history is None:
            return None
        if not may_be_pruned(subid, MetaStore(self.db.connection()).pruned_before()):
            return None
        if self._connection_stores()[0].has_click(subid):  # Converted before, or not deleted yet.
            return None  # Deleted from here on, the postback parks and the history node's flusher matches it.
        try:
            return self.history.by_subid(subid)
        except HistoryBusy:  # An append's chunk outlasted the wait: parked, as a click not landed yet.
            logger.warning("postback for %s: the click history was busy; parked", subid)
        except HistoryUnreadable as error:
            logger.warning("postback for %s: %s", subid, error)
        return None

    def _log(
        self,
        log: PostbackLogStore,
        received: Received,
        postback: Postback,
        outcome: Outcome,
        expires_at: int | None,
    ) -> None:
        log.log(
            self._now(),
            storable(received.method),
            storable(received.remote_ip),
            storable(received.request[:MAX_REQUEST_LOGGED]),
            storable(postback.subid),
            postback.tid,
            postback.raw_status,
            postback.to_json(),
            outcome.verdict,
            storable(outcome.detail),
            outcome.conversion_id,
            expires_at,
        )

    def status_of(self, conversions: ConversionStore, postback: Postback) -> str:
        """The status a postback asks for: its own words, the status maps, a known word, an alias."""
        word = postback.raw_status
        if not word:
            return DEFAULT_STATUS
        if word in postback.status_words:
            return postback.status_words[word]
        mapped = conversions.mapped_status(word, postback.network)
        if mapped is not None:
            return mapped
        if word in ALLOWED_CHANGES:
            return word
        return BUILTIN_ALIASES.get(word, word)

    def _apply(
        self, conversions: ConversionStore, postback: Postback, historic: dict | None = None
    ) -> Outcome:
        conn = conversions.conn
        click = conversions.find_click(postback.subid)
        if click is None and historic is not None:  # Pruned from the row store: back from the history.
            conversions.revive_click(row_store_values(historic))
            click = conversions.find_click(postback.subid)
        if click is None:
            return Outcome(PARKED, "No click with this subid yet; waiting for it to land.")
        click_id, campaign_id, stream_id, offer_id, click_created_at = click
        status = self.status_of(conversions, postback)
        is_mapped = status in ALLOWED_CHANGES
        changes, rebills = conversions.network_rules(postback.network, offer_id) or DEFAULT_RULES
        existing = self._find_conversion(conversions, postback, status)
        if isinstance(existing, Outcome):
            return existing
        is_repeat_sale = (
            existing is None
            and status == SALE
            and rebills == "repeat_sale"
            and conversions.has_sale(postback.subid)
        )
        if is_repeat_sale:
            status = REBILL
        # Amounts the reports sum are in the report currency, converted now (models/reporting/currency.py).
        report = report_currency(conn)
        cost_model, cost_value = campaign_cost(conn, campaign_id, report)
        now = self._now()
        if existing is None:
            payout, currency = postback.payout, postback.currency
            if payout is None or not currency:
                offer = conversions.offer_payout(offer_id) if offer_id else None
                offer_payout, offer_currency = offer or (0.0, report)
                payout = offer_payout if payout is None else payout
                currency = currency or offer_currency
            # The rate of the day it is recorded on (`now`); None: no rate yet, reports say so.
            report_payout = convert(conn, payout, currency, report, now)
            cost = conversion_cost(cost_model, cost_value, status, report_payout or 0.0)
            conversion_id = conversions.insert(
                postback.subid,
                postback.tid,
                status,
                postback.raw_status,
                postback.network,
                payout,
                currency,
                report_payout,
                cost,
                click_id,
                campaign_id,
                stream_id,
                offer_id,
                click_created_at,
                now,
            )
            outcome = Outcome(CREATED, f"Conversion recorded as {status}.", conversion_id, status)
            if is_repeat_sale:
                outcome.detail += " The network sends rebills as repeat sales: a new conversion."
            if report_payout is None:
                outcome.detail += f" {currency} has no exchange rate yet: not in revenue until one is set."
            move_conversion_rollups(
                conn, click_id, None, conversion_metrics(status, report_payout or 0.0, cost)
            )
        else:
            (
                conversion_id,
                tid,
                old_status,
                old_payout,
                old_cost,
                old_currency,
                old_report,
                original,
                raw,
                recorded_at,
            ) = existing
            if changes == "any" and status == SALE and original == REBILL:
                status = REBILL  # A rebill approved again stays a rebill (`forward` refuses the change).
            if old_status == status:
                if postback.tid and tid != postback.tid:  # The lead came without a tid, this with one.
                    conversions.adopt_tid(conversion_id, postback.tid, now)
                return Outcome(DUPLICATE, f"Already recorded as {status}.", conversion_id, status)
            allowed = CHANGES.get(changes, ALLOWED_CHANGES)
            target = SALE if status == REBILL and original == REBILL else status
            if old_status in allowed and target not in allowed[old_status]:
                hint = " (the network's status changes are `forward`)" if changes != "any" else ""
                return Outcome(
                    REFUSED,
                    f"A {old_status} conversion cannot become {status}{hint}.",
                    conversion_id,
                    old_status,
                )
            payout, currency, report_payout = old_payout, old_currency, old_report
            if (
                status in (SALE, REBILL)
                and old_status in (REJECTED, TRASH)
                and postback.payout is None
                and not old_payout
                and offer_id
            ):  # Zeroed when it was rejected: approved again, it pays what a new one would.
                offer = conversions.offer_payout(offer_id)
                if offer is not None and offer[0]:
                    payout, currency = offer
                    report_payout = convert(conn, payout, currency, report, recorded_at)
            if postback.payout is not None and (postback.payout, postback.currency or currency) != (
                payout,
                currency,
            ):  # A new amount converts at the rate of the day the conversion was recorded, as its first did.
                payout, currency = postback.payout, postback.currency or currency
                report_payout = convert(conn, payout, currency, report, recorded_at)
            change = StatusChange(
                conversion_id,
                click_id,
                campaign_id,
                old_status,
                original,
                raw,
                old_report,
                old_cost,
                status,
                postback.tid or tid,
                postback.raw_status,
                payout,
                currency,
                report_payout,
            )
            outcome = Outcome(
                UPDATED, f"Conversion changed from {old_status} to {status}.", conversion_id, status
            )
            outcome.deliveries = change_status(conversions, change, cost_model, cost_value, now)
        if not is_mapped:
            outcome.detail += (
                " The status is not mapped: it counts nowhere until `lanner postback status map`."
            )
        for slot, value in postback.sub_ids.items():
            conversions.set_sub_id(click_id, slot, value)
        if is_mapped and existing is None:
            outcome.deliveries = queue_deliveries(conn, campaign_id, conversion_id, status, now)
        return outcome

    def _find_conversion(
        self, conversions: ConversionStore, postback: Postback, status: str
    ) -> tuple | Outcome | None:
        """The conversion this postback is about, None for a new one, or the Outcome refusing it."""
        if status == REBILL:
            if not postback.tid:
                return Outcome(REFUSED, "A rebill needs a tid (transaction id) of its own.")
            return conversions.conversion_by_tid(postback.subid, postback.tid)
        found = conversions.conversion_by_tid(postback.subid, postback.tid)
        if found is not None:
            return found
        others = conversions.conversions_of_click(postback.subid)
        if postback.tid:
            # A lead sent without a tid, its sale with one: the same conversion.
            untagged = [row for row in others if row[1] == ""]
            return untagged[0] if untagged else None
        if len(others) > 1:
            return Outcome(REFUSED, "This click has several conversions; send the tid to say which.")
        return others[0] if others else None


@dataclass(frozen=True)
class StatusChange:
    """A stored conversion moving to a new status, with what it holds before and after."""

    conversion_id: int
    click_id: int
    campaign_id: int
    old_status: str
    old_original_status: str
    old_raw_status: str
    old_report_payout: float | None
    old_cost: float
    status: str
    tid: str
    raw_status: str
    payout: float
    currency: str
    report_payout: float | None
    old_previous_status: str = ""  # Kept when the status stays (a payout corrected alone).


def change_status(
    conversions: ConversionStore, change: StatusChange, cost_model: str, cost_value: float, now: int
) -> list[int]:
    """Write a stored conversion's new status: the one place a status changes (a postback, a status
    map). Its row, its cost under the campaign's model, its part of the rollups and the outbound
    postbacks the new status sends, in the caller's transaction. Returns the deliveries queued.

    A conversion stored with a word no map knew, and mapped since, was that status from the start:
    its original status becomes the mapped one too.
    """
    cost = conversion_cost(cost_model, cost_value, change.status, change.report_payout or 0.0)
    is_remap = (
        change.old_status not in ALLOWED_CHANGES
        and change.raw_status == change.old_raw_status
        and change.old_original_status == change.old_status
    )
    original = change.status if is_remap else change.old_original_status
    if is_remap:
        previous = ""  # A remapped word was the mapped status from the start.
    else:
        previous = change.old_status if change.status != change.old_status else change.old_previous_status
    conversions.write_status(
        change.conversion_id,
        change.tid,
        change.status,
        original,
        previous,
        change.raw_status,
        change.payout,
        change.currency,
        change.report_payout,
        cost,
        now,
    )
    conn = conversions.conn
    move_conversion_rollups(
        conn,
        change.click_id,
        conversion_metrics(change.old_status, change.old_report_payout or 0.0, change.old_cost),
        conversion_metrics(change.status, change.report_payout or 0.0, cost),
    )
    if change.status not in ALLOWED_CHANGES:
        return []
    return queue_deliveries(conn, change.campaign_id, change.conversion_id, change.status, now)


def queue_deliveries(conn, campaign_id: int, conversion_id: int, status: str, now: int) -> list[int]:
    """Outbound postbacks for this status, stored with the change so none is forgotten; new ids."""
    return DeliveryStore(conn).queue(campaign_id, conversion_id, status, now)


def move_conversion_rollups(conn, click_id: int, old: tuple | None, new: tuple) -> None:
    """Move a conversion's part of the rollups from its old metrics (None: new) to its new ones."""
    if not MetaStore(conn).rollups_live():
        return  # The deferred backfill adds it, as it is then.
    key = click_key(conn, click_id)
    assert key is not None, f"conversion of a click not stored ({click_id})"
    delta = RollupDelta()
    if old is not None:
        delta.add_conversion(key, old, -1)
    delta.add_conversion(key, new)
    delta.apply(conn)
