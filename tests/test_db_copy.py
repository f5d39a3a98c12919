"""`lanner db copy`: a real SQLite install copied into the run's throwaway PostgreSQL, verified, resumed
after a kill, refused when the target is not a new database of this version; no password printed."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from conftest import LANNER, ROOT, run_lanner

from models.accounts.users import add_user
from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.costs import spread_cost
from models.reporting.currency import set_rates
from workers.bench.generate import generate_clicks

# The copy's source is a SQLite file whatever the run's backend; its target is the run's PostgreSQL
# (postgres_url / postgres_migrated_url: skipped without PostgreSQL locally, failing under CI=1).
pytestmark = [pytest.mark.xdist_group("db_copy"), pytest.mark.sqlite_only]

END_MS = int(datetime(2026, 11, 20, 17, 41, tzinfo=UTC).timestamp() * 1000)
RECEIVED = Received("GET", "127.0.0.1", "test")
PASSWORD = "hunter2-Sekrit"


@pytest.fixture(scope="module")
def built_install(tmp_path_factory):
    """A migrated SQLite install with campaigns, streams, offers, clicks, conversions in two
    currencies, rollups, users, costs, and no deferred step left: built once, each test copies it."""
    from models.migrations.runner import migrate
    from models.store.database import db, open_database

    path = tmp_path_factory.mktemp("install") / "lanner.db"
    open_database(path, autocheckpoint=True)
    migrate(db)
    generate_clicks(db, 1500, 10, campaigns=3, seed=7, end_ms=END_MS)
    run_deferred(db, pause=0)
    set_rates(db, {"EUR": 1.08})
    add_user(db, "ann", "buyer", "correct horse battery")
    rng = random.Random(3)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in rng.sample(subids, 120):
        params = {
            "subid": subid,
            "status": rng.choice(["lead", "sale", "rejected"]),
            "tid": "t1",
            "payout": f"{rng.uniform(1, 40):.2f}",
            "currency": rng.choice(["USD", "EUR"]),
        }
        recorder.record(parse_postback(params), RECEIVED)
    spread_cost(db, 2, END_MS - 4 * 86_400_000, END_MS, 77.7)
    db.close()  # The last connection: SQLite checkpoints the WAL into the file.
    return path


@pytest.fixture
def install(built_install, data_dir):
    """This test's own copy of the install's database file."""
    path = data_dir / "lanner.db"
    shutil.copyfile(built_install, path)
    return path


def copy_args(path, url: str, *extra: str) -> list[str]:
    return ["db", "copy", f"sqlite:///{path}", url, *extra]


def with_password(url: str) -> str:
    """The same database with a password in its URL (the test server trusts its socket: ignored)."""
    return url.replace("postgresql://lanner@", f"postgresql://lanner:{PASSWORD}@", 1)


def contents(location) -> dict[str, Counter]:
    """Every copied table's rows, by table (PostgreSQL and SQLite order text differently: unordered)."""
    from models.ops.db_copy import NOT_COPIED, copy_store
    from models.store.database import db, open_database

    open_database(location)
    try:
        store = copy_store(db)
        return {
            name: Counter(store.read_after(shape, None, 1_000_000))
            for name, shape in sorted(store.tables().items())
            if name not in NOT_COPIED
        }
    finally:
        db.close()


def reports(location) -> list[list[dict]]:
    """What the install's reports say over all time, in three groupings."""
    from models.reporting.reports import ReportQuery, run_report
    from models.store.database import db, open_database

    open_database(location)
    try:
        return [
            [
                {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}
                for row in run_report(db, ReportQuery(group_by=group_by, preset="all_time")).rows
            ]
            for group_by in (("campaign",), ("country", "offer"), ("day",))
        ]
    finally:
        db.close()


def postback_key(location) -> str:
    from models.conversions.postbacks import read_secret
    from models.store.database import db, open_database

    open_database(location)
    try:
        return read_secret(db, "postback_key")
    finally:
        db.close()


def pg(url: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else []


def test_a_copy_verifies_and_the_copied_install_answers_the_same(install, env, postgres_migrated_url):
    result = run_lanner(env, *copy_args(install, postgres_migrated_url))
    assert "verified" in result.stdout and "Copying" in result.stderr  # The progress bar: on stderr.
    assert "click " in result.stdout and "count, sum(cost), max(id)" in result.stdout
    assert contents(postgres_migrated_url) == contents(install)
    assert postback_key(postgres_migrated_url) == postback_key(install)  # The install's URLs keep working.
    assert pg(postgres_migrated_url, "SELECT to_regclass('copy_progress')") == [(None,)]  # Dropped.
    # Ids kept their values, and PostgreSQL numbers the next row past them.
    (last,) = pg(postgres_migrated_url, "SELECT MAX(id) FROM campaign")[0]
    added = pg(
        postgres_migrated_url,
        "INSERT INTO campaign (alias, name, created_at, updated_at) VALUES ('new', 'New', 0, 0) RETURNING id",
    )
    assert added == [(last + 1,)]


def test_the_copied_install_reports_the_same_numbers(install, postgres_migrated_url):
    from models.ops.db_copy import copy_database

    assert copy_database(str(install), postgres_migrated_url).differences == []
    source = reports(install)
    assert source[0] and source[0][0]["clicks"] > 0 and any(row["revenue"] for row in source[0])
    assert reports(postgres_migrated_url) == source


def test_a_copy_stopped_after_some_batches_goes_on_and_ends_identical(install, postgres_migrated_url):
    from models.ops.db_copy import copy_database

    calls = []

    def stop_after_three_batches(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 4:  # The first call reports what was there before: three batches committed.
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_database(
            str(install), postgres_migrated_url, batch_size=50, on_progress=stop_after_three_batches
        )
    ((copied, done, tables),) = pg(
        postgres_migrated_url, "SELECT SUM(rows_copied), SUM(is_done), COUNT(*) FROM copy_progress"
    )
    assert 0 < copied and done < tables

    result = copy_database(str(install), postgres_migrated_url, batch_size=50)
    assert result.was_resumed and result.differences == []
    assert result.rows == result.total_rows - copied
    assert contents(postgres_migrated_url) == contents(install)


def test_a_copy_killed_mid_way_and_run_again_ends_identical(install, env, postgres_migrated_url):
    process = subprocess.Popen(
        [*LANNER, *copy_args(install, postgres_migrated_url, "--batch-size", "20")],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import psycopg

    deadline = time.monotonic() + 20
    copied = 0
    with psycopg.connect(postgres_migrated_url, autocommit=True) as conn:
        while not copied and time.monotonic() < deadline and process.poll() is None:
            try:  # Kill it once its first batch has committed.
                copied = conn.execute("SELECT SUM(rows_copied) FROM copy_progress").fetchone()[0] or 0
            except psycopg.errors.UndefinedTable:
                time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=10) == -signal.SIGKILL, "the copy ended before it could be killed"
    assert copied > 0

    result = run_lanner(env, *copy_args(install, postgres_migrated_url))
    assert "(resumed)" in result.stdout and "verified" in result.stdout
    assert contents(postgres_migrated_url) == contents(install)


def one_sentence(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1
    lines = [
        line for line in result.stderr.strip().splitlines() if not line.startswith("Copying")
    ]  # The bar.
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


def test_a_target_not_new_or_not_of_this_version_is_refused_in_one_sentence(
    install, env, postgres_url, postgres_migrated_url, tmp_path
):
    unmigrated = one_sentence(run_lanner(env, *copy_args(install, postgres_url), check=False))
    assert "not migrated to this version" in unmigrated and "lanner db migrate" in unmigrated

    pg(postgres_migrated_url, "INSERT INTO offer (name, url, created_at, updated_at) VALUES ('o', 'u', 0, 0)")
    taken = one_sentence(run_lanner(env, *copy_args(install, postgres_migrated_url), check=False))
    assert "already holds data (offer has rows)" in taken

    # The same refusals in process (the CLI says each as the one sentence above).
    from models.migrations.runner import migrate
    from models.ops.db_copy import CopyRefused, copy_database
    from models.store.sqlite.database import connect_sqlite

    pg(postgres_url, "CREATE TABLE migration_history (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)")
    pg(postgres_url, f"INSERT INTO migration_history VALUES ('0010_user_timezone', {END_MS})")
    with pytest.raises(CopyRefused, match="not migrated to this version"):
        copy_database(str(install), postgres_url)  # An older schema.

    fresh = connect_sqlite(tmp_path / "fresh.db")  # A new install: its rollup backfill is still pending.
    migrate(fresh)
    fresh.close()
    with pytest.raises(
        CopyRefused, match=r"deferred migration steps pending \(rollup_backfill\).*db migrate"
    ):
        copy_database(str(tmp_path / "fresh.db"), postgres_migrated_url)


def poison_costs(path) -> str:
    """Two clicks of one hour costing 1e308, as a click URL's cost= could before costs were bounded,
    the rollups moved by the same amounts (they add up to Infinity); the day, for `lanner cost set`."""
    from models.reporting.rollups import RollupDelta, click_key
    from models.store.database import db, open_database

    open_database(path)
    try:
        conn = db.connection()
        sql = "SELECT id, cost, created_at FROM click WHERE campaign_id = 1 ORDER BY id"
        rows = conn.execute(sql).fetchall()
        hour = rows[len(rows) // 2][2] // 3_600_000
        victims = [row for row in rows if row[2] // 3_600_000 == hour][:2]
        with db.atomic():
            delta = RollupDelta()
            for click_id, old_cost, _ in victims:
                conn.execute("UPDATE click SET cost = 1e308 WHERE id = ?", (click_id,)).close()
                delta.add_click_cost(click_key(conn, click_id), 1e308 - old_cost)
            delta.apply(conn)
    finally:
        db.close()
    return datetime.fromtimestamp(victims[0][2] / 1000, UTC).date().isoformat()


def test_costs_from_before_the_bound_are_refused_until_repaired(install, env, postgres_migrated_url):
    day = poison_costs(install)
    refused = one_sentence(run_lanner(env, *copy_args(install, postgres_migrated_url), check=False))
    assert "holds costs or revenues that are Infinity or beyond 1e+12 (rows: 2 in click, " in refused
    assert "lanner cost set" in refused and "then copy again" in refused
    assert pg(postgres_migrated_url, "SELECT to_regclass('copy_progress'), (SELECT COUNT(*) FROM click)") == [
        (None, 0)
    ]  # Nothing copied.
    run_lanner(env, "cost", "set", "--campaign", "1", "--from", day, "--to", day, "--amount", "10")
    assert "verified" in run_lanner(env, *copy_args(install, postgres_migrated_url)).stdout
    assert reports(postgres_migrated_url) == reports(install)


def test_the_password_of_a_url_is_never_printed(install, env, postgres_migrated_url):
    url = with_password(postgres_migrated_url)
    copied = run_lanner(env, *copy_args(install, url))
    again = run_lanner(env, *copy_args(install, url), check=False)
    assert "(secret)" in one_sentence(again)
    unreachable = url.replace("?host=", "?host=/nonexistent")
    refused = run_lanner(env, *copy_args(install, unreachable), check=False)
    assert "Cannot connect to the target" in one_sentence(refused)
    for result in (copied, again, refused):
        assert PASSWORD not in result.stdout + result.stderr


def test_a_nul_character_postgresql_cannot_store_is_removed_and_counted(install, postgres_migrated_url):
    import sqlite3

    from models.ops.db_copy import copy_database

    with sqlite3.connect(install) as conn:  # A `%00` in a click URL's sub_id reaches SQLite as it is.
        conn.execute("UPDATE click SET sub_id_1 = 'a' || char(0) || 'b' WHERE id = 7")
    conn.close()
    result = copy_database(str(install), postgres_migrated_url)
    assert result.nul_values == 1 and result.differences == []
    assert pg(postgres_migrated_url, "SELECT sub_id_1 FROM click WHERE id = 7") == [("ab",)]


def test_a_copy_of_a_live_install_is_of_the_moment_it_began(install, postgres_migrated_url):
    import sqlite3

    from models.ops.db_copy import copy_database

    before = contents(install)
    writer = sqlite3.connect(install, isolation_level=None)

    def land_a_click_meanwhile(done: int, total: int) -> None:
        if done and not writer.execute("SELECT COUNT(*) FROM click WHERE subid = 'late'").fetchone()[0]:
            writer.execute(
                "INSERT INTO click (subid, created_at, campaign_id, ip, user_agent, ua_hash, cost) "
                "SELECT 'late', created_at, campaign_id, ip, user_agent, ua_hash, 9.5 FROM click WHERE id = 1"
            )
            writer.execute("UPDATE meta SET value = value || '0' WHERE key = 'config_version'")

    result = copy_database(str(install), postgres_migrated_url, on_progress=land_a_click_meanwhile)
    writer.close()
    assert result.differences == [] and result.total_rows == sum(map(len, before.values()))
    assert contents(postgres_migrated_url) == before  # Neither the new click nor the changed setting.


def test_a_copy_that_differs_from_its_source_exits_1_in_one_sentence(install, env, postgres_migrated_url):
    from models.ops.db_copy import copy_database

    def stop_after_the_first_batch(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_database(str(install), postgres_migrated_url, on_progress=stop_after_the_first_batch)
    assert pg(postgres_migrated_url, "SELECT is_done FROM copy_progress WHERE table_name = 'app_user'") == [
        (1,)
    ]
    from models.store.database import db, open_database

    open_database(install)  # The source changes between the two runs: a user added where the copy was.
    add_user(db, "bob", "viewer", "correct horse battery")
    db.close()

    result = run_lanner(env, *copy_args(install, postgres_migrated_url), check=False)
    assert "The copy differs from the source in 1 check(s) (app_user count)" in one_sentence(result)
    assert "count 2 != 1" in result.stdout
    assert (
        pg(postgres_migrated_url, "SELECT COUNT(*) FROM copy_progress") != []
    )  # Kept: run again to verify again.


def test_two_copies_into_one_database_at_once_are_refused(install, postgres_migrated_url):
    import psycopg

    from models.ops.db_copy import CopyRefused, copy_database
    from models.store.postgres.copying import LOCK_KEY

    with psycopg.connect(postgres_migrated_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))  # As a running copy holds it.
        with pytest.raises(CopyRefused, match="Another `lanner db copy` is writing into"):
            copy_database(str(install), postgres_migrated_url, lock_wait=0.3)
    assert pg(postgres_migrated_url, "SELECT to_regclass('copy_progress')") == [(None,)]  # Nothing begun.


def subids_by_id_open(db, after: int = 0) -> dict[int, str]:
    return dict(db.execute_sql(f"SELECT id, subid FROM click WHERE id > {int(after)}").fetchall())


def subids_by_id(location, after: int) -> dict[int, str]:
    from models.store.database import db, open_database

    open_database(location)
    try:
        return subids_by_id_open(db, after)
    finally:
        db.close()


def test_the_box_history_goes_on_over_the_copy_and_one_that_went_past_it_is_cut_back(
    install, data_dir, postgres_migrated_url
):
    """The columnar history stays the box's file: click ids are copied as they are, so after the copy it
    goes on from its position, clicks only it holds (pruned from SQLite) still found; a file that kept
    appending from SQLite after the copy began is cut back instead of keeping clicks PostgreSQL reuses
    the ids of."""
    from models.ops.db_copy import copy_database
    from models.reporting.history import HistoryFiles, append_history, verify_history
    from models.reporting.historyclicks import history_click
    from models.reporting.rawretention import prune_held_clicks
    from models.store.database import db, open_database
    from models.store.duckdb.connection import open_history
    from models.store.history import HistoryStore

    files = HistoryFiles(data_dir / "history" / "clicks.duckdb")

    def history_subids(after: int) -> dict[int, str]:
        with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
            return dict(conn.execute("SELECT id, subid FROM click WHERE id > ?", (after,)).fetchall())

    open_database(install)
    try:
        append_history(db, files)
        run = prune_held_clicks(db, files, 5 * 86_400_000, global_uniqueness_hours=24, now_ms=END_MS, pause=0)
        kept = set(subids_by_id_open(db).values())
    finally:
        db.close()
    only_history = set(history_subids(0).values()) - kept
    assert run.deleted > 300 and len(only_history) == run.deleted
    assert copy_database(str(install), postgres_migrated_url).differences == []
    (position,) = pg(postgres_migrated_url, "SELECT position FROM history_state")[0]

    # The SQLite install went on after the copy began (a rehearsal copy, then switched to anyway): its
    # history took clicks PostgreSQL never got.
    open_database(install)
    try:
        generate_clicks(db, 30, 1, campaigns=3, seed=8, end_ms=END_MS + 3_600_000)
        assert append_history(db, files).copied == 30
    finally:
        db.close()
    open_database(postgres_migrated_url)
    try:
        assert HistoryStore(db.connection()).state()[0] == position
        generate_clicks(db, 40, 1, campaigns=3, seed=9, end_ms=END_MS + 7_200_000)  # Those ids again.
        result = append_history(db, files)
        assert (result.copied, result.restarted_from) == (40, None)
        assert verify_history(db, files).is_consistent  # The pruned hours counted apart.
    finally:
        db.close()
    assert history_subids(position) == subids_by_id(postgres_migrated_url, position)
    assert only_history <= set(history_subids(0).values())
    assert not only_history & set(subids_by_id(postgres_migrated_url, 0).values())
    old_subid = min(only_history)
    old = history_click(files, old_subid)  # Found by its subid: what a postback for it revives.
    assert old is not None and old["subid"] == old_subid
