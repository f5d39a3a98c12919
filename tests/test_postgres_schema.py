"""PostgreSQL's baseline against SQLite's migrated schema, read from both catalogs; its migration history,
its "not now" errors as StoreBusy, and peewee's models on it. Redis: the debounce primitive (SET NX PX).

A real PostgreSQL and Redis each (workers/bench/servers.py, one per run); a fresh database per test.
"""

from __future__ import annotations

import os
import re
import threading

import pytest
from conftest import ROOT, wait_until

from models.migrations.deferred import list_steps, pending_steps, run_deferred
from models.migrations.runner import (
    migrate,
    migration_names,
    migration_status,
    pending_migrations,
    schema_is_current,
)
from models.store.database import StoreBusy, db, open_database, write_tx

# The `cluster` extra (make's venv has it): without it these tests skip, as without the servers; under
# CI they fail on the import instead.
if not os.environ.get("CI"):
    pytest.importorskip("psycopg", reason="needs the cluster extra: pip install -e '.[cluster]'")
    pytest.importorskip("redis", reason="needs the cluster extra: pip install -e '.[cluster]'")
import psycopg  # noqa: E402

TYPE_FAMILIES = {
    "INTEGER": "integer",
    "bigint": "integer",
    "REAL": "real",
    "double precision": "real",
    "TEXT": "text",
    "text": "text",
}
# SQLite's implicit rowid, which deferred.py orders by, is a real column on PostgreSQL (schema.py).
POSTGRES_ONLY_COLUMNS = {("deferred_step", "rowid")}
ON_DELETE = {"a": "NO ACTION", "n": "SET NULL", "c": "CASCADE", "r": "RESTRICT", "d": "SET DEFAULT"}


def normalized(expression: str | None) -> str | None:
    """A default or an index predicate as both dialects mean it: no casts, no outer parentheses."""
    if expression is None:
        return None
    text = re.sub(r"::(text|bigint|integer|double precision|numeric)\b", "", expression.strip())
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    return text


def sqlite_schema(conn) -> dict:
    tables = {}
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for table in names:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        columns = {
            name: (TYPE_FAMILIES[kind], bool(notnull), normalized(default))
            for _, name, kind, notnull, default, _ in info
        }
        primary_key = tuple(name for *_, name in sorted((pk, name) for _, name, _, _, _, pk in info if pk))
        uniques, indexes = set(), {}
        for _, index, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})").fetchall():
            index_columns = tuple(row[2] for row in conn.execute(f"PRAGMA index_info({index})").fetchall())
            if origin == "u":
                uniques.add(index_columns)
            elif origin == "c":
                sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (index,)).fetchone()[0]
                where = sql.split(" WHERE ", 1)[1] if partial else None
                indexes[index] = (bool(unique), index_columns, normalized(where))
        foreign_keys = set()
        for row in conn.execute(f"PRAGMA foreign_key_list({table})").fetchall():
            _, _, target, source, target_column, _, on_delete, _ = row
            foreign_keys.add(((source,), target, (target_column,), on_delete))
        tables[table] = dict(
            columns=columns,
            primary_key=primary_key,
            uniques=uniques,
            indexes=indexes,
            foreign_keys=foreign_keys,
        )
    return tables


SQL_PG_COLUMNS = """
SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity
FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position
"""
SQL_PG_CONSTRAINTS = """
SELECT c.conrelid::regclass::text, c.contype, c.conindid,
    ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k(n, i)
          JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),
    c.confrelid::regclass::text,
    ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY AS k(n, i)
          JOIN pg_attribute AS a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i),
    c.confdeltype
FROM pg_constraint AS c JOIN pg_namespace AS s ON s.oid = c.connamespace
WHERE s.nspname = 'public' AND c.contype IN ('p', 'u', 'f')
"""
SQL_PG_INDEXES = """
SELECT t.relname, i.relname, x.indisunique,
    ARRAY(SELECT pg_get_indexdef(x.indexrelid, k + 1, true)
          FROM generate_subscripts(x.indkey, 1) AS k ORDER BY k),
    pg_get_expr(x.indpred, x.indrelid)
FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid JOIN pg_class AS t ON t.oid = x.indrelid
JOIN pg_namespace AS s ON s.oid = t.relnamespace
WHERE s.nspname = 'public' AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = x.indexrelid)
"""


def postgres_schema(database) -> dict:
    tables: dict = {}

    def table(name):
        return tables.setdefault(
            name, dict(columns={}, primary_key=(), uniques=set(), indexes={}, foreign_keys=set())
        )

    for name, column, kind, nullable, default, _identity in database.execute_sql(SQL_PG_COLUMNS).fetchall():
        if (name, column) not in POSTGRES_ONLY_COLUMNS:
            table(name)["columns"][column] = (TYPE_FAMILIES[kind], nullable == "NO", normalized(default))
    for name, kind, _, columns, target, target_columns, on_delete in database.execute_sql(
        SQL_PG_CONSTRAINTS
    ).fetchall():
        if kind == "p":
            table(name)["primary_key"] = tuple(columns)
        elif kind == "u":
            table(name)["uniques"].add(tuple(columns))
        else:
            table(name)["foreign_keys"].add(
                (tuple(columns), target, tuple(target_columns), ON_DELETE[on_delete])
            )
    for name, index, unique, columns, where in database.execute_sql(SQL_PG_INDEXES).fetchall():
        table(name)["indexes"][index] = (unique, tuple(columns), normalized(where))
    return tables


@pytest.fixture
def postgres(postgres_url):
    """The test's PostgreSQL database, migrated, as `db`."""
    open_database(postgres_url)
    migrate(db)
    yield db
    db.close()


def test_the_baseline_has_sqlite_migrated_schema_table_by_table(tmp_path, postgres):
    from models.store.sqlite.database import connect_sqlite

    sqlite = connect_sqlite(tmp_path / "lanner.db")  # Beside `db`, which is PostgreSQL here.
    try:
        migrate(sqlite)
        expected = sqlite_schema(sqlite.connection())
    finally:
        sqlite.close()
    found = postgres_schema(postgres)
    assert sorted(found) == sorted(expected)
    differences = {
        (table, aspect): (found[table][aspect], wanted)
        for table in expected
        for aspect, wanted in expected[table].items()
        if found[table][aspect] != wanted
    }
    assert differences == {}


def test_migrating_twice_changes_nothing_and_every_migration_reads_applied(postgres):
    before = postgres_schema(postgres)
    assert migrate(postgres) == []
    assert postgres_schema(postgres) == before
    assert pending_migrations(postgres) == []
    assert [state.name for state in migration_status(postgres)] == migration_names()
    assert all(state.applied_at for state in migration_status(postgres))
    assert schema_is_current(postgres)
    # The baseline has what 0004 and 0005 leave to deferred steps on SQLite: none is pending.
    assert [(step.name, step.state) for step in list_steps(postgres)] == [("rollup_backfill", "done")]
    assert pending_steps(postgres) == [] and run_deferred(postgres) == []


def test_a_new_postgres_database_reads_unmigrated(postgres_url):
    open_database(postgres_url)
    try:
        assert not schema_is_current(db)
        assert pending_migrations(db) == migration_names()
    finally:
        db.close()


def test_constraints_sqlite_states_in_checks_and_collations_hold_on_postgres(postgres):
    insert_user = (
        "INSERT INTO app_user (name, role, password_hash, created_at, updated_at) VALUES (%s, %s, 'x', 0, 0)"
    )
    postgres.execute_sql(insert_user, ("Alice", "admin"))
    # COLLATE NOCASE: names differing only in case are one name, found either way.
    with pytest.raises(Exception, match="duplicate key"):
        postgres.execute_sql(insert_user, ("ALICE", "buyer"))
    assert postgres.execute_sql("SELECT name FROM app_user WHERE name = %s", ("aLiCe",)).fetchall() == [
        ("Alice",)
    ]
    with pytest.raises(Exception, match="app_user_role_check"):
        postgres.execute_sql(insert_user, ("bob", "root"))
    with pytest.raises(Exception, match="duplicate key"):  # One spool position per node.
        postgres.execute_sql(
            "INSERT INTO spool_node (name, segment, byte_offset, updated_at) VALUES ('main', 2, 0, 0)"
        )


def test_a_write_whose_connection_the_server_ends_raises_store_busy(postgres, postgres_server):
    backend = postgres.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
    with pytest.raises(StoreBusy) as refused:
        with write_tx(postgres):
            postgres.execute_sql("UPDATE meta SET value = 'x' WHERE key = 'config_version'")
            with postgres_server.admin() as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
            postgres.execute_sql("UPDATE meta SET value = 'y' WHERE key = 'config_version'")
    message = str(refused.value)
    assert message.startswith("The database cannot take this write now (") and "\n" not in message
    assert message.endswith("try again in a moment.")
    # Nothing was written: the transaction died with its connection.
    postgres.close()
    postgres.connect()
    assert postgres.execute_sql("SELECT value FROM meta WHERE key = 'config_version'").fetchone() == ("1",)


def test_a_connection_the_server_ended_is_replaced_at_its_next_use(postgres, postgres_server):
    """A PostgreSQL restart or failover ends every process's connection: the statement that finds it gone
    is "not now" (a postback's 503, the flusher's retried round), and the next one connects again."""
    from models.store.database import STORE_ERRORS

    for _ in range(2):  # Ended between statements, then in the middle of a write.
        backend = postgres.connection().execute("SELECT pg_backend_pid()").fetchone()[0]
        with postgres_server.admin() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        with pytest.raises(STORE_ERRORS):
            postgres.connection().execute("SELECT value FROM meta WHERE key = 'config_version'").fetchone()
        assert postgres.connection().execute("SELECT pg_backend_pid()").fetchone()[0] != backend
    with write_tx(postgres):
        postgres.connection().execute("UPDATE meta SET value = '2' WHERE key = 'config_version'")
    backend = postgres.connection().execute("SELECT pg_backend_pid()").fetchone()[0]
    with pytest.raises(StoreBusy):
        with write_tx(postgres):
            with postgres_server.admin() as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
            postgres.connection().execute("UPDATE meta SET value = '3' WHERE key = 'config_version'")
    with write_tx(postgres):
        postgres.connection().execute("UPDATE meta SET value = '4' WHERE key = 'config_version'")
    stored = postgres.connection().execute("SELECT value FROM meta WHERE key = 'config_version'").fetchone()
    assert stored == ("4",)


def test_a_click_goes_on_while_the_database_cannot_be_read_and_the_worker_connects_again(
    postgres, postgres_server, tmp_path
):
    """Cluster mode's PostgreSQL away (docs/SCALING.md, "When something fails"): a web worker routes from
    the campaigns it holds and spools the click; it asks the database again a second later."""
    from conftest import Clock

    from models.admin.services import create_campaign
    from models.clicks.tracker import ClickTracker
    from models.clicks.visit import Visit

    create_campaign(postgres, "Away", "away", offer_url="https://away.example/?c={subid}")
    clock = Clock(1_800_000_000.0)
    tracker = ClickTracker(
        postgres,
        spool_dir=tmp_path / "spool",
        segment_bytes=1 << 20,
        uniqueness_hours=24,
        debounce_seconds=2,
        clock=clock,
    )
    try:
        lost = tracker.conn
        backend = lost.execute("SELECT pg_backend_pid()").fetchone()[0]
        with postgres_server.admin() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        decisions = []
        for n in range(3):  # The lost connection, then within the second: the database is not asked.
            clock.advance(0.3)
            visit = Visit(ip=f"198.51.100.{n}", user_agent="UA")
            decisions.append(tracker.track(tracker.campaign("away"), visit))
        assert all(d.subid and d.location.startswith("https://away.example/") for d in decisions)
        assert tracker.conn is lost
        clock.advance(1.0)
        tracker.track(tracker.campaign("away"), Visit(ip="198.51.100.9", user_agent="UA"))
        assert tracker.conn is not lost  # Asked again: a new connection.
        lines = sum(path.read_bytes().count(b"\n") for path in (tmp_path / "spool").glob("clicks.*.log"))
        assert lines == 4
    finally:
        tracker.close()


def test_a_write_refused_by_a_read_only_server_raises_store_busy(postgres):
    postgres.execute_sql("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")  # As on a standby.
    with pytest.raises(StoreBusy, match="read-only transaction"):
        with write_tx(postgres):
            postgres.execute_sql("UPDATE meta SET value = 'x' WHERE key = 'config_version'")


def test_a_row_lock_not_granted_within_lock_timeout_raises_store_busy(postgres, postgres_url):
    postgres.execute_sql("SET lock_timeout = '50ms'")
    with psycopg.connect(postgres_url) as other:  # Another node's transaction holds the row.
        other.execute("UPDATE meta SET value = 'other' WHERE key = 'config_version'")
        with pytest.raises(StoreBusy, match="lock timeout"):
            with write_tx(postgres):  # On the raw connection, as every store runs its statements.
                postgres.connection().execute("UPDATE meta SET value = 'x' WHERE key = 'config_version'")
        other.rollback()
    with write_tx(postgres):  # The connection is usable again: the refused transaction was rolled back.
        postgres.execute_sql("UPDATE meta SET value = 'x' WHERE key = 'config_version'")


def test_the_loser_of_a_deadlock_gets_store_busy(postgres, postgres_url):
    for key in ("a", "b"):
        postgres.execute_sql("INSERT INTO meta (key, value) VALUES (%s, '')", (key,))
    postgres.execute_sql("SET deadlock_timeout = '10ms'")  # This session checks, so it is the one refused.
    other = psycopg.connect(postgres_url)
    other.execute("SET deadlock_timeout = '60s'")
    other.execute("UPDATE meta SET value = 'other' WHERE key = 'b'")
    other_pid = other.info.backend_pid
    blocked = threading.Thread(
        target=lambda: other.execute("UPDATE meta SET value = 'other' WHERE key = 'a'")
    )
    try:
        with pytest.raises(StoreBusy, match="deadlock detected"):
            with write_tx(postgres):
                postgres.execute_sql("UPDATE meta SET value = 'x' WHERE key = 'a'")
                blocked.start()
                wait_until(
                    lambda: postgres.execute_sql(
                        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (other_pid,)
                    ).fetchone()[0],
                    10,
                    "the other transaction to wait for the row",
                )
                postgres.connection().execute("UPDATE meta SET value = 'x' WHERE key = 'b'")  # A store's way.
        blocked.join(timeout=10)
        other.commit()  # The other side got both rows once this one gave up.
    finally:
        other.close()
    assert postgres.execute_sql("SELECT value FROM meta WHERE key IN ('a', 'b')").fetchall() == [
        ("other",),
        ("other",),
    ]


def test_a_write_to_a_server_that_is_not_there_raises_store_busy(tmp_path):
    from models.store.postgres.database import LannerPostgresqlDatabase

    nowhere = LannerPostgresqlDatabase(f"postgresql://lanner@/lanner?host={tmp_path}&connect_timeout=2")
    with pytest.raises(StoreBusy, match="The database cannot take this write now"):
        with write_tx(nowhere):
            nowhere.execute_sql("SELECT 1")


def test_a_mistake_in_a_statement_is_not_store_busy(postgres):
    with pytest.raises(Exception) as failed:
        with write_tx(postgres):
            postgres.execute_sql("UPDATE no_such_table SET x = 1")
    assert not isinstance(failed.value, StoreBusy)
    assert "no_such_table" in str(failed.value)


def test_peewee_models_write_and_read_rows_on_postgres(postgres):
    from models.tables.account import AuditEntry, CampaignShare, User
    from models.tables.campaign import Campaign, Stream

    user = User.create(name="Buyer", role="buyer", password_hash="h", created_at=1, updated_at=2)
    campaign = Campaign.create(alias="summer", name="Summer <sale>", owner_id=user.id)
    Stream.create(campaign=campaign, name="main")
    CampaignShare.create(campaign_id=campaign.id, user_id=user.id, may_edit=1, created_at=3)
    AuditEntry.create(
        created_at=2**41, actor="cli", entity="campaign", entity_id=campaign.id, action="create"
    )

    assert User.get(User.name == "buyer").id == user.id  # Case-insensitive, as on SQLite.
    stored = Campaign.get_by_id(campaign.id)
    assert (stored.name, stored.uniqueness_hours, stored.owner_id) == ("Summer <sale>", 24.0, user.id)
    assert [stream.name for stream in stored.streams] == ["main"]
    assert CampaignShare.get(campaign_id=campaign.id, user_id=user.id).may_edit == 1
    assert AuditEntry.get().created_at == 2**41  # Unix ms past 2**31: BIGINT.


def test_every_model_field_is_a_column_of_the_postgres_table(postgres):
    import importlib
    import pkgutil

    import models.tables
    from models.tables.base import BaseModel

    columns = {}
    for name, column, *_ in postgres.execute_sql(SQL_PG_COLUMNS).fetchall():
        columns.setdefault(name, set()).add(column)
    checked = 0
    for info in pkgutil.iter_modules(models.tables.__path__):
        module = importlib.import_module(f"models.tables.{info.name}")
        for model in vars(module).values():
            if isinstance(model, type) and issubclass(model, BaseModel) and model is not BaseModel:
                fields = {field.column_name for field in model._meta.sorted_fields}
                assert fields <= columns[model._meta.table_name], model.__name__
                checked += 1
    assert checked >= 10


# -- Redis: the primitive cross-node debounce is built on -------------------------------------


def test_set_nx_px_lets_exactly_one_of_many_concurrent_clients_claim_a_visitor(redis_url):
    import redis

    clients = [redis.Redis.from_url(redis_url) for _ in range(8)]  # Eight connections: eight nodes' workers.
    won, start = [], threading.Barrier(32)

    def claim(n: int) -> None:
        start.wait()
        if clients[n % 8].set("debounce:visitor", f"subid-{n}", nx=True, px=60_000):
            won.append(n)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(won) == 1
    assert clients[0].get("debounce:visitor") == f"subid-{won[0]}".encode()
    assert 0 < clients[0].pttl("debounce:visitor") <= 60_000
    # Once the window has passed (the key expired), the next click claims it again.
    clients[0].pexpire("debounce:visitor", 1)
    wait_until(lambda: not clients[0].exists("debounce:visitor"), 10, "the debounce key to expire")
    assert clients[1].set("debounce:visitor", "subid-next", nx=True, px=60_000)
    for client in clients:
        client.close()


def test_the_postgres_store_is_not_loaded_where_sqlite_is_used():
    import subprocess
    import sys

    probe = (
        "import sys, tempfile, pathlib; from models.store.database import open_database, db; "
        "from models.migrations.runner import migrate; "
        "open_database(pathlib.Path(tempfile.mkdtemp()) / 'x.db'); migrate(db); "
        "print(sorted(name for name in sys.modules if name.startswith('models.store.postgres')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    # (peewee itself imports psycopg when it is installed; Lanner's PostgreSQL code stays out.)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_lanner_process_on_sqlite_never_loads_the_postgresql_driver(env, tmp_path):
    """peewee imports psycopg whenever it is installed (~11 MB and ~130 ms a process): `lanner` hides it
    unless the database is PostgreSQL's."""
    import subprocess
    import sys

    from models.store.drivers import hide_postgres_drivers

    script = (
        "import sys, cli\n"
        "try:\n    cli.main(['db', 'status'])\nexcept SystemExit:\n    pass\n"
        "import peewee\n"
        "print(sys.modules.get('psycopg') is None, peewee.psycopg is None)\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True)
    assert shown.stdout.split()[-2:] == ["True", "True"], shown.stdout + shown.stderr
    assert "psycopg" in sys.modules  # This test process loaded it (the PostgreSQL tests use it) ...
    assert hide_postgres_drivers("sqlite:///x.db") is False  # ... so it is too late to hide it here.
    assert hide_postgres_drivers("postgresql://host/db") is False
