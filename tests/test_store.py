"""The store's one write seam: write_tx() holds the write lock from its start and turns the
database's refusals into StoreBusy, with nothing written."""

from __future__ import annotations

import sqlite3

import pytest


def other_writer(settings) -> sqlite3.Connection:
    conn = sqlite3.connect(settings.database_path, isolation_level=None, timeout=0)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def campaign_count(db) -> int:
    return db.execute_sql("SELECT COUNT(*) FROM campaign").fetchone()[0]


# What another connection holds so that a new campaign's INSERT must wait, the short wait this test's
# connection then gives up after, and the refusal it gives up with: SQLite's write lock and busy
# timeout; PostgreSQL's lock on the table (which has no database-wide write lock) and lock_timeout.
REFUSALS = {
    "sqlite": ("PRAGMA busy_timeout = 50", "database is locked"),
    "postgresql": ("SET lock_timeout = 50", "canceling statement due to lock timeout"),
}


def hold_campaign_writes(backend, settings):
    if backend == "sqlite":
        return other_writer(settings)
    import psycopg

    holder = psycopg.connect(settings.database_url)
    holder.execute("LOCK TABLE campaign IN EXCLUSIVE MODE")  # Readers pass, writers wait.
    return holder


def test_a_write_refused_by_a_held_lock_raises_store_busy_and_writes_nothing(db, settings, backend):
    from models.admin.services import create_campaign
    from models.store.database import StoreBusy, write_tx

    short_wait, refusal = REFUSALS[backend]
    db.execute_sql(short_wait)
    holder = hold_campaign_writes(backend, settings)
    try:
        with pytest.raises(StoreBusy) as refused:
            with write_tx(db):
                create_campaign(db, "Locked", "locked", offer_url="https://offer.example/")
    finally:
        holder.rollback()
        holder.close()
    assert refusal in str(refused.value.cause)
    assert "try again" in str(refused.value)
    assert campaign_count(db) == 0
    with write_tx(db):  # The connection is usable again: no transaction was left open.
        create_campaign(db, "Free", "free", offer_url="https://offer.example/")
    assert campaign_count(db) == 1


@pytest.mark.sqlite_only  # SQLite's BEGIN IMMEDIATE; PostgreSQL locks rows as they are written.
def test_write_tx_takes_the_write_lock_at_its_start(db, settings):
    from models.store.database import write_tx

    with write_tx(db):
        # A read-only start would let another writer in until the first write, then deadlock.
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other_writer(settings)


def test_an_error_inside_write_tx_rolls_back_and_is_not_store_busy(db):
    from models.admin.services import create_campaign
    from models.store.database import write_tx

    with pytest.raises(ZeroDivisionError):
        with write_tx(db):
            create_campaign(db, "Undone", "undone", offer_url="https://offer.example/")
            raise ZeroDivisionError  # Any exception: the campaign just written must be undone.
    assert campaign_count(db) == 0


def test_a_nested_write_tx_is_a_savepoint(db):
    from models.admin.services import create_campaign
    from models.store.database import write_tx

    with write_tx(db):
        create_campaign(db, "Kept", "kept", offer_url="https://offer.example/")
        with pytest.raises(ValueError):
            with write_tx(db):
                create_campaign(db, "Dropped", "dropped", offer_url="https://offer.example/")
                raise ValueError("undo the inner one only")
    assert campaign_count(db) == 1


# SQLite's busy timeout; a PostgreSQL connection has no lock_timeout to give up after.
@pytest.mark.sqlite_only
def test_the_cli_answers_store_busy_with_its_sentence(lanner, settings):
    holder = other_writer(settings)
    try:
        # After SQLite's busy timeout (5 s) the command gives up with one sentence.
        done = lanner(
            "campaign",
            "create",
            "Busy",
            "--alias",
            "busy",
            "--offer-url",
            "https://offer.example/",
            check=False,
        )
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 1, done.stderr
    assert "database cannot take this write now" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_raw_connection_says_whether_a_transaction_is_open(db):
    """What the flusher asks after a failed round, to roll back what the failure left open."""
    from models.store.database import write_tx

    connection = db.connection()
    assert not connection.in_transaction
    with write_tx(db):
        connection.execute("SELECT COUNT(*) FROM meta").fetchall()
        assert connection.in_transaction
    assert not connection.in_transaction


def test_the_database_tells_its_own_size_in_either_dialect(db):
    """`lanner status`'s size of a PostgreSQL database; SQLite's counts its file's pages."""
    from models.store.maintenance import MaintenanceStore

    size = MaintenanceStore(db.connection()).database_bytes()
    assert isinstance(size, int) and size > 0
