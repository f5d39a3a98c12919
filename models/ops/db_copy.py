"""`lanner db copy SOURCE TARGET`: move an install from its SQLite file into PostgreSQL, resumably,
and verify the result by counts and sums per table.

The target is a PostgreSQL database that `lanner db migrate` has brought to this code's version and
that holds nothing of Lanner's yet (the baseline's own meta and spool rows are replaced by the
source's: its secrets, so the install's postback URLs and API key keep working, and its spool
position, so a flusher pointed at the target lands exactly what the source's had not), or one that a
copy of the same source left unfinished. Tables go in foreign-key order, each in its primary key's
order, a batch per transaction together with the table's progress row (models/store/postgres/copying.py):
killed anywhere and run again, the copy goes on from the last batch that committed, and the result is
the same. The migration machinery's own tables (migration_history, deferred_step) are not copied: the
target's record how its schema was made, and the source must have no deferred step left.

The source is read in one snapshot, so a copy of a live install is of one moment (the start of the
run). Verification reads the same snapshot: counts of every table, and for clicks, conversions and
rollups the sums that reports add up. README "Moving to PostgreSQL" has the switch-over.

A source holding money from before costs were bounded (a click URL's `cost=1e308`: Infinity, or a
value beyond EXACT_LIMIT, in a click's cost, a conversion's payout or cost, or a rollup's sums) is
refused before anything is copied. Copied as it is, PostgreSQL would hold values no real spend has,
which its reports could only leave empty; and no step can compute what they should have been: the
repair is the user's (`lanner cost set` with the real spend, `lanner conversion correct`), on SQLite,
where the reports already name what to repair.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from peewee import Database, DatabaseError

from models.errors import LannerError
from models.migrations.deferred import pending_steps
from models.migrations.runner import schema_is_current
from models.reporting.costs import EXACT_LIMIT
from models.store.copying import CopyStore, TableShape
from models.store.database import (
    POSTGRES_SCHEMES,
    STORE_ROLLBACK_ERRORS,
    PostgresUnreachable,
    connect,
    dialect_of,
    sqlite_path,
    write_tx,
)
from models.tables.dimensions import MONEY_METRICS

NOT_COPIED = ("migration_history", "deferred_step", "copy_progress")  # Each database's own.
# A new database's baseline fills them; the source's replace them. history_state: the box's columnar
# history (DATA_DIR/history) goes on from the source's position, the click ids being copied as they are.
REPLACED = ("meta", "spool_node", "history_state")
BASELINE_META = {
    "config_version",
    "rollup_conversions",
    "visitor_probe",
    "report_currency",
    "postback_key",
    "api_key",
}
SUMMED = {"click": ("cost",), "conversion": ("payout", "cost", "report_payout")}
MAXIMA = {"click": ("id",)}
DEFAULT_BATCH = 5000
LOCK_WAIT_SECONDS = 15.0
LOCK_POLL_SECONDS = 0.2


class CopyRefused(LannerError, RuntimeError):
    """The copy cannot start (or go on) with these databases; the message says why in one sentence."""


@dataclass(frozen=True)
class Check:
    table: str
    measure: str  # "count", "sum(cost)", "max(id)"
    source: int | float | None
    target: int | float | None

    @property
    def is_equal(self) -> bool:
        if isinstance(self.source, float) or isinstance(self.target, float):
            if self.source is None or self.target is None:
                return self.source is self.target
            if math.isnan(self.source) and math.isnan(self.target):
                return True
            # The same values, added in another order: float sums may differ in their last digits.
            return math.isclose(self.source, self.target, rel_tol=1e-9, abs_tol=1e-6)
        return self.source == self.target


@dataclass
class CopyResult:
    rows: int  # Rows written by this run.
    total_rows: int  # Rows of the source in all.
    seconds: float
    checks: list[Check] = field(default_factory=list)
    was_resumed: bool = False
    nul_values: int = 0  # Text values whose NUL characters PostgreSQL could not store.

    @property
    def differences(self) -> list[Check]:
        return [check for check in self.checks if not check.is_equal]


def shown_url(url: str) -> str:
    """`url` as messages name it: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":(secret)@", 1)
    return parts._replace(netloc=netloc).geturl()


def without_password(text: str, url: str) -> str:
    """A driver's message with the URL's password taken out, however it was spelled in the URL."""
    password = urlsplit(url).password
    if password:
        for spelling in {password, unquote(password)}:
            text = text.replace(spelling, "(secret)")
    return text


def open_source(location: str):
    """The source SQLite database (a path or sqlite:///PATH), which must exist."""
    if location.startswith(POSTGRES_SCHEMES):
        raise CopyRefused(
            "The source must be a SQLite database (sqlite:///PATH or a file path), not PostgreSQL."
        )
    path = sqlite_path(location)
    if not Path(path).is_file():
        raise CopyRefused(f"There is no database file at {path}.")
    try:
        return connect(Path(path))
    except STORE_ROLLBACK_ERRORS + (DatabaseError,) as error:  # E.g. "file is not a database".
        raise CopyRefused(f"{path} cannot be opened as a SQLite database ({error}).") from error


def open_target(url: str):
    """The target PostgreSQL database at `url`."""
    if not url.startswith(POSTGRES_SCHEMES):
        raise CopyRefused("The target must be a PostgreSQL database (postgresql://…).")
    try:
        return connect(url)
    except PostgresUnreachable as error:
        cause = without_password(str(error.__cause__ or error), url)
        raise CopyRefused(
            f"Cannot connect to the target {shown_url(url)} ({cause.splitlines()[0]})."
        ) from None
    except Exception as error:  # A URL libpq cannot parse.
        cause = without_password(str(error), url).splitlines()[0]
        raise CopyRefused(f"Cannot connect to the target {shown_url(url)} ({cause}).") from None


def copy_store(database: Database) -> CopyStore:
    return CopyStore(database.connection())


def source_identity(source_db) -> str:
    """What tells one install from another: a digest of its secrets (never the secrets themselves)."""
    from models.store.meta import MetaStore

    meta = MetaStore(source_db.connection())
    secrets = f"{meta.get('postback_key')}:{meta.get('api_key')}"
    return hashlib.sha256(secrets.encode()).hexdigest()[:24]


def check_versions(source_db, target_db, source_shown: str, target_shown: str) -> None:
    if not schema_is_current(source_db):
        raise CopyRefused(
            f"The source {source_shown} is not migrated to this version: run `lanner db migrate` first."
        )
    steps = pending_steps(source_db)
    if steps:
        raise CopyRefused(
            f"The source {source_shown} has deferred migration steps pending "
            f"({', '.join(step.name for step in steps)}): "
            "run `lanner db migrate` first (and `lanner db run-deferred`)."
        )
    if dialect_of(target_db) != "postgres" or not schema_is_current(target_db):
        raise CopyRefused(
            f"The target {target_shown} is not migrated to this version: "
            f"run `LANNER_DATABASE_URL='{target_shown}' lanner db migrate` first."
        )


def copy_order(tables: list[str], references: list[tuple[str, str]]) -> list[str]:
    """`tables` with every table after the tables its foreign keys refer to (alphabetical otherwise)."""
    needs = {table: {ref for child, ref in references if child == table and ref != table} for table in tables}
    ordered: list[str] = []
    while needs:
        ready = sorted(table for table, refs in needs.items() if not refs - set(ordered))
        if not ready:  # A cycle: Lanner's schema has none.
            raise CopyRefused(f"The target's foreign keys form a cycle among {', '.join(sorted(needs))}.")
        ordered.append(ready[0])
        del needs[ready[0]]
    return ordered


def plan_tables(source, target) -> list[TableShape]:
    """The shapes of the tables to copy, in copy order; refused unless both schemas have them alike."""
    source_tables = {n: s for n, s in source.tables().items() if n not in NOT_COPIED}
    target_tables = {n: s for n, s in target.tables().items() if n not in NOT_COPIED}
    if set(source_tables) != set(target_tables):
        odd = sorted(set(source_tables) ^ set(target_tables))
        raise CopyRefused(f"The source and target schemas differ (tables {', '.join(odd)} are in one only).")
    for name, shape in source_tables.items():
        other = target_tables[name]
        if set(shape.columns) != set(other.columns) or shape.key != other.key or not shape.key:
            raise CopyRefused(
                f"The source and target schemas differ (table {name}'s columns or primary key)."
            )
    order = copy_order(sorted(target_tables), target.references())
    # Read the source's columns in the target's order: one COPY column list for both.
    return [TableShape(name, target_tables[name].columns, source_tables[name].key) for name in order]


def check_target_is_new(target, shapes: list[TableShape], target_shown: str) -> None:
    """Refuse a target that holds anything of an install: rows beyond the baseline's own."""
    for shape in shapes:
        if shape.name in ("spool_node", "history_state"):
            continue
        if shape.name == "meta":
            at = shape.columns.index("key")
            keys = {row[at] for row in target.read_after(shape, None, 1000)}
            if keys - BASELINE_META:
                raise CopyRefused(
                    f"The target {target_shown} already holds an install's settings: "
                    "copy into a new database that only `lanner db migrate` has touched."
                )
            continue
        if target.measure(shape.name)[0]:
            raise CopyRefused(
                f"The target {target_shown} already holds data ({shape.name} has rows): "
                "copy into a new database that only `lanner db migrate` has touched."
            )


def check_money_is_summable(source, shapes: list[TableShape], source_shown: str) -> None:
    """Refuse a source whose money holds Infinity or values beyond EXACT_LIMIT (the module's docstring)."""
    found = {}
    for shape in shapes:
        columns = SUMMED.get(shape.name, ())
        if shape.name.startswith("rollup_"):
            columns = tuple(column for column in shape.columns if column in MONEY_METRICS)
        count = source.count_beyond(shape.name, columns, EXACT_LIMIT) if columns else 0
        if count:
            found[shape.name] = count
    if found:
        rows = ", ".join(f"{count} in {table}" for table, count in found.items())
        raise CopyRefused(
            f"The source {source_shown} holds costs or revenues that are Infinity or beyond {EXACT_LIMIT:g} "
            f"(rows: {rows}), stored before they were bounded: repair them first (`lanner cost set` over "
            "the days its reports leave empty, `lanner conversion correct` for a payout), then copy again."
        )


def measures(shape: TableShape) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What verifies a table: besides its count, the sums and maxima of these columns."""
    if shape.name.startswith("rollup_"):
        return tuple(column for column in shape.columns if column not in shape.key), ()
    return SUMMED.get(shape.name, ()), MAXIMA.get(shape.name, ())


def verify(source, target, shapes: list[TableShape]) -> list[Check]:
    """Each table's count, and its sums and maxima (measures()), on both sides."""
    checks = []
    for shape in shapes:
        sums, maxima = measures(shape)
        labels = ["count", *(f"sum({c})" for c in sums), *(f"max({c})" for c in maxima)]
        ours = source.measure(shape.name, sums=sums, maxima=maxima)
        theirs = target.measure(shape.name, sums=sums, maxima=maxima)
        checks += [Check(shape.name, label, a, b) for label, a, b in zip(labels, ours, theirs, strict=True)]
    return checks


def copy_table(source, target, target_db, shape: TableShape, progress, batch_size: int, advance) -> None:
    """Copy the rows of `shape`'s table after its progress row's last key, a batch per transaction
    together with that row; `advance(rows, nul values)` after each."""
    _, last_key, _, is_done = progress
    after = None if last_key is None else tuple(json.loads(last_key))
    key_at = [shape.columns.index(column) for column in shape.key]
    # PERF: the next batch is read while this one is written (sqlite3 and psycopg let go of the GIL
    # while they wait); leaving the block waits for a read still under way.
    with ThreadPoolExecutor(1) as reader:
        upcoming = None if is_done else reader.submit(source.read_after, shape, after, batch_size)
        while not is_done:
            assert upcoming is not None  # Submitted while a batch is left.
            rows = upcoming.result()
            is_done = len(rows) < batch_size
            if rows:
                after = tuple(rows[-1][index] for index in key_at)
            if not is_done:
                upcoming = reader.submit(source.read_after, shape, after, batch_size)
            with write_tx(target_db):
                nul_values = target.write_rows(shape, rows) if rows else 0
                target.save_progress(
                    shape.name, None if after is None else json.dumps(after), len(rows), is_done
                )
            advance(len(rows), nul_values)


def copy_database(
    source_location: str,
    target_url: str,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    lock_wait: float = LOCK_WAIT_SECONDS,
) -> CopyResult:
    """Copy the SQLite database at `source_location` into the PostgreSQL database at `target_url`
    (or go on with a copy of it left unfinished), then verify it. `on_progress(rows done, rows in all)`
    after each batch. The copy's progress rows are dropped once it verifies; a copy that differs keeps
    them (running again verifies again) and its result lists the differences. `lock_wait`: seconds to
    wait for another copy into the target to end."""
    started = clock()
    target_shown = shown_url(target_url)
    source_db = open_source(source_location)
    try:
        target_db = open_target(target_url)
        try:
            return _copy(
                source_db,
                target_db,
                str(sqlite_path(source_location)),
                target_shown,
                batch_size,
                on_progress,
                clock,
                started,
                lock_wait,
            )
        finally:
            target_db.close()
    finally:
        source_db.close()


def take_lock(target, wait: float, clock: Callable[[], float]) -> bool:
    """The target's copy lock, waited for up to `wait` seconds: a copy just killed holds it until its
    server session notices (at the end of the statement it was running)."""
    deadline = clock() + wait
    while not target.try_lock():
        if clock() >= deadline:
            return False
        time.sleep(LOCK_POLL_SECONDS)
    return True


def _copy(
    source_db, target_db, source_shown, target_shown, batch_size, on_progress, clock, started, lock_wait
) -> CopyResult:
    check_versions(source_db, target_db, source_shown, target_shown)
    source, target = copy_store(source_db), copy_store(target_db)
    if not take_lock(target, lock_wait, clock):
        raise CopyRefused(f"Another `lanner db copy` is writing into {target_shown}; wait for it to end.")
    identity = source_identity(source_db)
    try:
        source.begin_snapshot()
        shapes = plan_tables(source, target)
        check_money_is_summable(source, shapes, source_shown)
        was_resumed = target.has_progress()
        if was_resumed:
            sources = {entry[0] for entry in target.progress().values()}
            if sources != {identity}:
                raise CopyRefused(
                    f"The target {target_shown} holds an unfinished copy of another database: "
                    "copy into a new database that only `lanner db migrate` has touched."
                )
        else:
            check_target_is_new(target, shapes, target_shown)
            with write_tx(target_db):
                target.start_progress([shape.name for shape in shapes], identity)
                for name in REPLACED:
                    target.clear(name)
        total = sum(source.measure(shape.name)[0] for shape in shapes)
        progress = target.progress()
        done = sum(entry[2] for entry in progress.values())
        result = CopyResult(rows=0, total_rows=total, seconds=0.0, was_resumed=was_resumed)
        if on_progress:
            on_progress(done, total)

        def advance(rows: int, nul_values: int) -> None:
            nonlocal done
            result.rows += rows
            result.nul_values += nul_values
            done += rows
            if on_progress:
                on_progress(done, max(total, done))

        for shape in shapes:
            copy_table(source, target, target_db, shape, progress[shape.name], batch_size, advance)
        with write_tx(target_db):
            target.move_sequences([shape.name for shape in shapes])
        target.analyze([shape.name for shape in shapes])
        result.checks = verify(source, target, shapes)
        if not result.differences:
            with write_tx(target_db):
                target.drop_progress()
    finally:
        source.end_snapshot()
        target.unlock()
    result.seconds = clock() - started
    return result
