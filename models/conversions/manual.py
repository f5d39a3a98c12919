"""Conversions entered by hand: a CSV of (subid, tid, status, payout) rows imported, one conversion corrected.

An imported row is a postback in all but transport: it is parsed by the same rules (`parse_postback`),
applied and logged by the same recorder (method `IMPORT`), so a row names the same verdicts a network's
postback would get (created, updated, duplicate, refused, parked) and a status word maps the same way.
A correction is an operator's override of one stored conversion's status or payout: any of the
statuses models/choices.py names may replace any other (the postback rules guard against networks,
not against the operator), through `change_status`, so costs, rollups and outbound postbacks follow as
for a postback. Both are in the audit log under the user who made them (entity `conversion`).
"""

from __future__ import annotations

import csv
import io
import math
import time
from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.choices import CONVERSION_STATUSES
from models.conversions.postbacks import (
    INVALID,
    ConversionRecorder,
    PostbackError,
    Received,
    StatusChange,
    change_status,
    parse_postback,
)
from models.errors import LannerError, NotFoundError
from models.reporting.currency import CODE, campaign_cost, convert, report_currency
from models.store.conversions import ConversionStore
from models.store.database import write_tx
from models.tables.conversion import Conversion

IMPORT_COLUMNS = ("subid", "tid", "status", "payout", "currency", "from")
REQUIRED_COLUMNS = ("subid",)
MAX_IMPORT_ROWS = 10_000
MAX_PAYOUT = 1e9
# What a correction's audit entry keeps, before and after.
CORRECTED_FIELDS = ("status", "payout", "currency", "report_payout")


class ConversionInputError(LannerError, ValueError):
    """A conversion import or correction that cannot be applied; one sentence for the user."""


class ConversionNotFound(ConversionInputError, NotFoundError):
    """The conversion named is not there."""


@dataclass(frozen=True)
class ImportedRow:
    line: int  # The CSV line, the header being line 1.
    subid: str
    verdict: str
    detail: str
    conversion_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "subid": self.subid,
            "verdict": self.verdict,
            "detail": self.detail,
            "conversion_id": self.conversion_id,
        }


def import_conversions(
    recorder: ConversionRecorder, text: str, *, remote_ip: str = "", actor: Principal = CLI
) -> list[ImportedRow]:
    """Apply every row of a CSV with a header naming some of IMPORT_COLUMNS (`subid` required), in order.

    A row that does not parse is answered `invalid` and logged as such; the others are applied."""
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip().lower() for name in reader.fieldnames or ()]
    if not header:
        raise ConversionInputError(
            "The CSV is empty; its first line names the columns, e.g. subid,status,payout."
        )
    unknown = [name for name in header if name not in IMPORT_COLUMNS]
    if unknown:
        raise ConversionInputError(f"Unknown CSV column {unknown[0]!r}; use {', '.join(IMPORT_COLUMNS)}.")
    if len(set(header)) != len(header):
        raise ConversionInputError("A CSV column is named twice.")
    for name in REQUIRED_COLUMNS:
        if name not in header:
            raise ConversionInputError(f"The CSV has no {name!r} column.")
    reader.fieldnames = header
    rows: list[tuple[int, dict[str, str]]] = []
    for row in reader:
        if len(rows) == MAX_IMPORT_ROWS:
            raise ConversionInputError(
                f"A CSV import takes at most {MAX_IMPORT_ROWS:,} rows; split the file."
            )
        if None in row:
            raise ConversionInputError(f"Line {reader.line_num} has more fields than the header.")
        rows.append((reader.line_num, {name: (value or "").strip() for name, value in row.items()}))
    results = []
    for line, params in rows:
        request = "import " + ",".join(f"{name}={params.get(name, '')}" for name in header)
        received = Received("IMPORT", remote_ip, request)
        try:
            postback = parse_postback(params)
        except PostbackError as exc:
            recorder.log_rejected(received, INVALID, str(exc), params.get("subid", ""))
            results.append(ImportedRow(line, params.get("subid", ""), INVALID, str(exc)))
            continue
        outcome = recorder.record(postback, received)
        results.append(
            ImportedRow(line, postback.subid, outcome.verdict, outcome.detail, outcome.conversion_id)
        )
    # Each row is applied (and logged, method IMPORT) in its own transaction, as a postback is; the
    # audit log says who imported how many, once they are in.
    with write_tx(recorder.db):
        record_change(recorder.db, actor, "conversion", None, "import", None, verdict_counts(results))
    return results


def verdict_counts(rows: list[ImportedRow]) -> dict[str, int]:
    """How many rows got each verdict, in the order verdicts first appear."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    return counts


def get_conversion(conversion_id: int) -> Conversion:
    conversion = Conversion.get_or_none(Conversion.id == conversion_id)
    if conversion is None:
        raise ConversionNotFound(f"There is no conversion {conversion_id}.")
    return conversion


def correct_conversion(
    db: Database,
    conversion_id: int,
    *,
    status: str | None = None,
    payout: float | None = None,
    currency: str | None = None,
    actor: Principal = CLI,
) -> Conversion:
    """Set one stored conversion's status and/or payout (its currency with it), as the operator says."""
    if status is None and payout is None and currency is None:
        raise ConversionInputError("Give a status, a payout or a currency to change.")
    if status is not None:
        status = status.strip().lower()
        if status not in CONVERSION_STATUSES:
            raise ConversionInputError(
                f"Status must be one of {', '.join(CONVERSION_STATUSES)}, not {status[:40]!r}."
            )
    if payout is not None and not (math.isfinite(payout) and 0 <= payout <= MAX_PAYOUT):
        raise ConversionInputError(f"A payout must be a number from 0 to {MAX_PAYOUT:,.0f}.")
    if currency is not None:
        currency = currency.strip().upper()
        if not CODE.match(currency):
            raise ConversionInputError(f"Currency {currency[:20]!r} is not a three-letter code such as USD.")
    with write_tx(db):
        stored = get_conversion(conversion_id)
        conn = db.connection()
        report = report_currency(conn)
        new_payout = stored.payout if payout is None else payout
        new_currency = currency or stored.currency
        report_payout = stored.report_payout
        if (new_payout, new_currency) != (stored.payout, stored.currency):
            report_payout = convert(conn, new_payout, new_currency, report, stored.created_at)
        change = StatusChange(
            stored.id,
            stored.click_id,
            stored.campaign_id,
            stored.status,
            stored.original_status,
            stored.raw_status,
            stored.report_payout,
            stored.cost,
            status or stored.status,
            stored.tid,
            stored.raw_status,
            new_payout,
            new_currency,
            report_payout,
            stored.previous_status,
        )
        # Its outbound postbacks are sent by `lanner worker`'s periodic sweep within a minute.
        change_status(ConversionStore(conn), change, *campaign_cost(conn, stored.campaign_id, report), _now())
        corrected = Conversion.get_by_id(conversion_id)
        record_change(db, actor, "conversion", conversion_id, "update", _fields(stored), _fields(corrected))
    return corrected


def _fields(conversion: Conversion) -> dict[str, Any]:
    return {name: getattr(conversion, name) for name in CORRECTED_FIELDS}


def _now() -> int:
    return int(time.time() * 1000)
