"""The click pipeline in-process, on a real migrated SQLite file, with a controllable clock."""

from __future__ import annotations

import pytest

from models.admin.services import add_stream, create_campaign, create_offer, update_stream
from models.clicks.record import (
    CLICK_COLUMNS,
    JOURNAL_COLUMNS,
    LOCATION,
    ROUTING_COLUMNS,
    decode_line,
    encode_line,
    line_tail,
    new_subid,
    peek_line,
    ua_hash,
)
from models.clicks.spool import flush_spool, list_segments, remove_flushed_segments
from models.clicks.visit import Visit

HOUR_MS = 3_600_000
ROUTING_VALUES = ["DE", "BE", "Berlin", "mobile", "Android", "Chrome Mobile", "de", "shoes", "3+ o4"]


@pytest.fixture
def campaign_alias(db):
    create_campaign(db, "Test", "test", offer_url="https://offer.example/lp?click={subid}&s={stream_id}")
    return "test"


def flush(db, settings):
    return flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)


def stored(db, subid):
    cursor = db.connection().execute(
        "SELECT is_unique_global, is_unique_campaign, is_unique_stream FROM click WHERE subid = ?", (subid,)
    )
    return cursor.fetchone()


def visit(ip="198.51.100.1", ua="Mozilla/5.0 (X11) Firefox/120"):
    return Visit(ip=ip, user_agent=ua)


def test_ua_hash_matches_php_crc32_vectors():
    # printf("%u", crc32($s)) in PHP (docs example and standard CRC-32 check values).
    assert ua_hash("The quick brown fox jumped over the lazy dog.") == 2191738434
    assert ua_hash("123456789") == 0xCBF43926
    assert ua_hash("") == 0
    assert ua_hash("The quick brown fox jumps over the lazy dog") == 0x414FA339
    assert ua_hash("a") == 0xE8B7BE43
    assert ua_hash("hello world") == 222957957


def test_subids_are_unique_and_time_ordered():
    subids = [new_subid(1_800_000_000_000 + i // 10) for i in range(20_000)]
    assert len(set(subids)) == len(subids)
    assert subids[::10] == sorted(subids[::10])
    assert all(len(s) == 17 and s.isalnum() and s.islower() or s.isdigit() for s in subids)


def test_journal_record_follows_click_columns(make_tracker, campaign_alias, db, settings):
    tracker = make_tracker()
    decision = tracker.track(tracker.campaign(campaign_alias), visit())
    line = next(settings.spool_dir.glob("clicks.*.log")).read_bytes().splitlines(keepends=True)[-1]
    record = decode_line(line)
    assert dict(zip(CLICK_COLUMNS, record, strict=False))["subid"] == decision.subid
    assert len(record) == len(JOURNAL_COLUMNS) + 2 and record[LOCATION] == decision.location


def test_journal_line_round_trips_hostile_text():
    texts = [
        "UA\twith\\tabs\nand\rbreaks",
        "ref\\n",
        "s\u00fcrce",
        "",
        *[f"v{n}\t" for n in range(30)],
        *ROUTING_VALUES,
        "https://x/?a=b",
    ]
    tail = line_tail("0123456789abcdefg", 3, None, 7, 0.015, True, texts)
    line = encode_line("2001:db8::1", 4294967295, 1_800_000_000_123, (1, 0, 1), tail)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert peek_line(line) == ("2001:db8::1", 4294967295, 1_800_000_000_123)
    record = dict(zip((*JOURNAL_COLUMNS, "location"), decode_line(line), strict=False))
    assert (
        record["user_agent"] == texts[0] and record["referrer"] == texts[1] and record["source"] == texts[2]
    )
    assert [record[f"sub_id_{n}"] for n in range(1, 31)] == texts[4:34]
    assert (record["stream_id"], record["offer_id"], record["cost"], record["is_bot"]) == (None, 7, 0.015, 1)
    assert (record["is_unique_global"], record["is_unique_campaign"], record["is_unique_stream"]) == (1, 0, 1)
    assert [record[column] for column in ROUTING_COLUMNS] == ROUTING_VALUES
    assert record["location"] == "https://x/?a=b"


def test_a_journal_line_of_the_previous_release_still_lands(db, settings):
    """Workers of the release before migration 0002 may append while it is applied (an upgrade)."""
    texts = ["Mozilla/5.0 old", "", "src", "", *[""] * 30, "https://o.example/"]
    # That release's tail: no lander_id, no ROUTING_COLUMNS, no domain.
    tail = ("0123456789abcdefg\t1\t2\t3\t0.0\t0\t" + "\t".join(texts)).encode()
    line = encode_line("192.0.2.1", 7, 1_800_000_000_000, (1, 1, 1), tail)
    record = dict(zip((*JOURNAL_COLUMNS, "location"), decode_line(line), strict=False))
    assert record["source"] == "src" and record["location"] == "https://o.example/"
    assert [record[column] for column in ROUTING_COLUMNS] == [""] * len(ROUTING_COLUMNS)


@pytest.mark.parametrize("broken", [b"", b"no newline", b"a\tb\n", b"\xff\xfe\n"])
def test_broken_journal_lines_are_refused(broken):
    with pytest.raises(ValueError):
        decode_line(broken)


def test_same_ip_other_ua_gets_its_own_stored_subid(make_tracker, campaign_alias, db, settings):
    tracker = make_tracker()
    campaign = tracker.campaign(campaign_alias)
    first = tracker.track(campaign, visit(ua="UA one"))
    second = tracker.track(campaign, visit(ua="UA two"))
    assert first.subid != second.subid and not second.is_repeat
    assert flush(db, settings).inserted == 2
    assert stored(db, first.subid) == (1, 1, 1)
    assert stored(db, second.subid) == (1, 1, 1)


def test_repeat_within_debounce_reuses_subid_and_location(make_tracker, campaign_alias, db, settings, clock):
    tracker = make_tracker()
    campaign = tracker.campaign(campaign_alias)
    first = tracker.track(campaign, visit())
    clock.advance(1.9)
    again = tracker.track(campaign, visit())
    assert again.is_repeat and (again.subid, again.location) == (first.subid, first.location)
    clock.advance(1.0)
    later = tracker.track(campaign, visit())
    assert not later.is_repeat and later.subid != first.subid
    assert flush(db, settings).inserted == 2


def test_debounce_sees_clicks_of_another_worker_not_yet_flushed(make_tracker, campaign_alias, db, clock):
    one, two = make_tracker(), make_tracker()
    first = one.track(one.campaign(campaign_alias), visit())
    clock.advance(0.5)
    again = two.track(two.campaign(campaign_alias), visit())
    assert again.is_repeat and again.location == first.location


def test_debounce_after_restart_finds_flushed_click_in_database(
    make_tracker, campaign_alias, db, settings, clock
):
    first_worker = make_tracker()
    first = first_worker.track(first_worker.campaign(campaign_alias), visit())
    flush(db, settings)
    clock.advance(0.5)
    restarted = make_tracker()  # Replays only the unflushed journal: the click is in the database.
    again = restarted.track(restarted.campaign(campaign_alias), visit())
    assert again.is_repeat and again.subid == first.subid
    assert flush(db, settings).inserted == 0


def test_debounce_reads_a_held_click_back_from_a_sealed_segment(make_tracker, campaign_alias, clock):
    # One line seals a segment: the first click's line is in a segment the worker has left.
    tracker = make_tracker(segment_bytes=1)
    campaign = tracker.campaign(campaign_alias)
    first = tracker.track(campaign, visit())
    tracker.track(campaign, visit(ip="198.51.100.2"))
    assert tracker.journal.segment > 1
    clock.advance(1.0)
    reads = []
    read_line = tracker.journal.read_line
    tracker.journal.read_line = lambda *position: reads.append(position) or read_line(*position)
    again = tracker.track(campaign, visit())
    assert again.is_repeat and (again.subid, again.location) == (first.subid, first.location)
    clock.advance(0.5)
    third = tracker.track(campaign, visit())
    assert third.is_repeat and third.subid == first.subid
    assert len(reads) == 1  # The second repeat is answered from the record read for the first.


def test_debounce_asks_the_database_once_a_held_clicks_segment_is_removed(
    make_tracker, campaign_alias, db, settings, clock
):
    tracker = make_tracker(segment_bytes=1)
    campaign = tracker.campaign(campaign_alias)
    clock.advance(5.0)  # Past the start, when a worker asks the database anyway (memory not complete).
    first = tracker.track(campaign, visit())
    tracker.track(campaign, visit(ip="198.51.100.2"))
    assert flush(db, settings).inserted == 2
    oldest = min(list_segments(settings.spool_dir))
    assert tracker.journal.read_line(oldest, 0).startswith(b"198.51.100.1\t")
    clock.advance(1.0)
    tracker.refresh()  # Closes the sealed segments that landed...
    assert remove_flushed_segments(db, settings.spool_dir) >= 1  # ...which the flusher then removes.
    assert tracker.journal.read_line(oldest, 0) is None
    again = tracker.track(campaign, visit())
    assert again.is_repeat and (again.subid, again.location) == (first.subid, first.location)
    assert flush(db, settings).inserted == 0


@pytest.mark.parametrize("flushed_between", [False, True], ids=["from-memory", "from-database"])
def test_uniqueness_window_boundary_in_all_scopes(make_tracker, db, settings, clock, flushed_between):
    offer = create_offer(db, "O", "https://offer.example/?c={subid}")
    create_campaign(db, "A", "a", offer_id=offer.id, uniqueness_hours=1)
    create_campaign(db, "B", "b", offer_id=offer.id, uniqueness_hours=1)
    tracker = make_tracker(uniqueness_hours=2)
    a, b = tracker.campaign("a"), tracker.campaign("b")
    first = tracker.track(a, visit())
    assert (first.is_unique_global, first.is_unique_campaign, first.is_unique_stream) == (True, True, True)

    def step(seconds, campaign):
        if flushed_between:
            flush(db, settings)
        clock.advance(seconds)
        tracker.refresh()
        return tracker.track(campaign, visit())

    inside = step(3600 - 5, a)  # Inside both windows: a repeat everywhere.
    assert (inside.is_unique_global, inside.is_unique_campaign, inside.is_unique_stream) == (
        False,
        False,
        False,
    )
    other = step(3, b)  # Seen globally, never in campaign b.
    assert (other.is_unique_global, other.is_unique_campaign, other.is_unique_stream) == (False, True, True)
    past_campaign = step(3600 + 1, a)  # Campaign window (1 h) passed, global (2 h) not.
    assert (past_campaign.is_unique_global, past_campaign.is_unique_campaign) == (False, True)
    assert past_campaign.is_unique_stream
    past_global = step(2 * 3600 + 1, b)
    assert (past_global.is_unique_global, past_global.is_unique_campaign) == (True, True)
    flush(db, settings)
    for decision in (first, inside, other, past_campaign, past_global):
        expected = (decision.is_unique_global, decision.is_unique_campaign, decision.is_unique_stream)
        assert stored(db, decision.subid) == tuple(int(flag) for flag in expected)


def test_heavy_repeater_beyond_the_scan_limit_is_still_seen_in_each_scope(make_tracker, db, settings, clock):
    from models.store.hotpath import VISITOR_HISTORY_LIMIT

    offer = create_offer(db, "O", "https://offer.example/?c={subid}")
    create_campaign(db, "A", "a", offer_id=offer.id)
    create_campaign(db, "B", "b", offer_id=offer.id)
    tracker = make_tracker()
    tracker.track(tracker.campaign("b"), visit())
    for _ in range(VISITOR_HISTORY_LIMIT + 6):  # Newer clicks elsewhere push b's out of the scan.
        clock.advance(3)
        tracker.track(tracker.campaign("a"), visit())
    flush(db, settings)
    clock.advance(5)
    tracker.refresh()  # Forget the flushed clicks in memory: the database must answer.
    assert len(tracker.index) == 0
    again = tracker.track(tracker.campaign("b"), visit())
    assert (again.is_unique_global, again.is_unique_campaign, again.is_unique_stream) == (False, False, False)


def test_stream_scope_counts_the_stream_not_the_campaign(make_tracker, db, settings, clock, campaign_alias):
    tracker = make_tracker()
    campaign = tracker.campaign(campaign_alias)
    first_stream = campaign.regular[0].id
    offer = create_offer(db, "Second", "https://second.example/?c={subid}")
    second_stream = add_stream(db, campaign_alias, offers=[(offer.id, 100)]).id
    tracker.track(campaign, visit())
    update_stream(db, first_stream, status="disabled")
    clock.advance(5)
    tracker.refresh()
    moved = tracker.track(tracker.campaign(campaign_alias), visit())
    assert moved.stream_id == second_stream
    assert (moved.is_unique_campaign, moved.is_unique_stream) == (False, True)


def test_visitor_probes_read_the_covering_visitor_key_index(db, backend):
    from models.store.database import read_tx
    from models.store.hotpath import visitor_probe

    probe = visitor_probe(db.connection())
    assert probe.by_key
    key = -123
    for sql, params, covering in (
        (probe._history, (key, 0), True),
        (probe._seen, (key, 0, 0, 1, 1), True),
        (probe._last_click, (key, 0, 1, "ua"), False),  # subid and user_agent are in the table.
    ):
        if backend == "sqlite":  # INDEXED BY pins the index: the plan is SQLite's answer on any data.
            plan = [row[-1] for row in db.execute_sql("EXPLAIN QUERY PLAN " + sql, params).fetchall()]
            on_clicks = [step for step in plan if " click " in f"{step} "]
            assert on_clicks, plan
            for step in on_clicks:
                assert step.startswith("SEARCH click USING"), plan
                assert "INDEX click_visitor_key (visitor_key=? AND created_at>?)" in step, plan
                assert ("COVERING INDEX" in step) is covering, plan
            continue
        # PostgreSQL has no hint: with scans of the whole table priced out (an empty table costs
        # nothing to scan), the plan says whether the index answers the probe, and from itself alone.
        with read_tx(db):
            db.execute_sql("SET LOCAL enable_seqscan = off")
            db.execute_sql("SET LOCAL enable_bitmapscan = off")
            plan = [row[0] for row in db.connection().execute("EXPLAIN " + sql, params).fetchall()]
        scans = [step for step in plan if " on click " in step]
        assert scans, plan
        for step in scans:
            assert "using click_visitor_key on click" in step, plan
            assert ("Index Only Scan" in step) is covering, plan


def test_unknown_campaign_is_none(make_tracker, campaign_alias):
    assert make_tracker().campaign("nope") is None


def test_flush_is_idempotent_when_killed_between_batches(
    make_tracker, campaign_alias, db, settings, clock, env
):
    import subprocess
    import sys

    tracker = make_tracker()
    campaign = tracker.campaign(campaign_alias)
    subids = []
    for n in range(500):
        subids.append(tracker.track(campaign, visit(ip=f"10.1.{n // 250}.{n % 250}")).subid)
    script = (
        "import os, signal\n"
        "from settings import load_settings\n"
        "from models.store.database import db, open_database\n"
        "from models.clicks.spool import flush_spool\n"
        "s = load_settings()\n"
        "open_database(s.database_location)\n"
        "def die(result):\n"
        "    if result.inserted >= 150: os.kill(os.getpid(), signal.SIGKILL)\n"
        "flush_spool(db, s.spool_dir, s.spool_segment_bytes, batch_size=50, on_batch=die)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(settings.data_dir.parent.parent))
    assert killed.returncode == -9
    landed = db.execute_sql("SELECT count(*) FROM click").fetchone()[0]
    assert landed == 150  # Three committed batches, nothing from the one being killed.
    result = flush(db, settings)
    assert result.inserted == 350 and result.duplicates == 0
    rows = db.execute_sql("SELECT subid, count(*) FROM click GROUP BY subid HAVING count(*) > 1").fetchall()
    assert rows == []
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)


def test_idle_worker_never_writes_to_a_landed_segment(make_tracker, campaign_alias, db, settings, clock):
    from models.clicks.spool import list_segments, remove_flushed_segments

    busy, idle = make_tracker(segment_bytes=2000), make_tracker(segment_bytes=2000)
    first = idle.track(idle.campaign(campaign_alias), visit(ua="idle first"))
    subids = [first.subid]
    for n in range(40):  # Several segments fill up while `idle` serves nothing.
        subids.append(busy.track(busy.campaign(campaign_alias), visit(ua=f"busy {n}")).subid)
        if n % 10 == 9:
            flush_spool(db, settings.spool_dir, 2000)
            remove_flushed_segments(db, settings.spool_dir)
    assert 1 not in list_segments(settings.spool_dir) and 2 not in list_segments(settings.spool_dir)
    clock.advance(5)
    subids.append(idle.track(idle.campaign(campaign_alias), visit(ua="idle again")).subid)
    flush_spool(db, settings.spool_dir, 2000)
    stored = {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()}
    assert stored == set(subids)


@pytest.mark.parametrize("damage", ["deleted", "replaced by an empty file"])
def test_a_spool_segment_removed_by_hand_loses_no_later_click(
    make_tracker, campaign_alias, db, settings, damage
):
    """The database says "segment 1, flushed up to byte N"; the file is gone or empty on restart."""
    from models.clicks.spool import segment_path

    first = make_tracker()
    landed = [first.track(first.campaign(campaign_alias), visit(ua=f"before {n}")).subid for n in range(5)]
    flush(db, settings)
    first.close()
    path = segment_path(settings.spool_dir, 1)
    path.unlink()
    if damage != "deleted":
        path.touch()
    tracker = make_tracker()  # A restart.
    later = [tracker.track(tracker.campaign(campaign_alias), visit(ua=f"after {n}")).subid for n in range(5)]
    flush(db, settings)
    flush(db, settings)  # The first pass may only step over the damaged segment.
    stored = {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()}
    assert stored == set(landed + later)


def test_flush_after_lost_position_inserts_nothing_twice(make_tracker, campaign_alias, db, settings):
    tracker = make_tracker()
    campaign = tracker.campaign(campaign_alias)
    for n in range(20):
        tracker.track(campaign, visit(ua=f"UA {n}"))
    assert flush(db, settings).inserted == 20
    db.execute_sql("UPDATE spool_node SET byte_offset = 0")  # As if the position was never saved.
    again = flush(db, settings)
    assert (again.inserted, again.duplicates) == (0, 20)


def test_a_batch_lands_each_click_once_and_returns_only_the_new_rows(
    make_tracker, campaign_alias, db, settings
):
    """ClickStore.insert as the flusher calls it: a replayed line and a line twice in one batch land
    once, only the new rows come back (only they reach the caps), and the key is the visitor's."""
    from models.clicks.record import IP, SUBID, UA_HASH, decode_row, visitor_key
    from models.clicks.spool import segment_path
    from models.store.clicks import ClickStore
    from models.store.database import write_tx

    tracker = make_tracker()
    campaign = tracker.campaign(campaign_alias)
    for n in range(4):
        tracker.track(campaign, visit(ip=f"198.51.100.{n + 1}", ua=f"UA {n}"))
    lines = segment_path(settings.spool_dir, tracker.journal.segment).read_bytes().splitlines(keepends=True)
    rows = [decode_row(line) for line in lines]
    with write_tx(db):
        store = ClickStore(db.connection())
        assert store.insert(rows[:2]) == rows[:2]
        assert store.insert([rows[1], rows[2], rows[2], rows[3]]) == [rows[2], rows[3]]
        assert store.insert([rows[0]]) == [] and store.insert([]) == []
    stored = db.connection().execute("SELECT subid, visitor_key FROM click ORDER BY id").fetchall()
    assert stored == [(row[SUBID], visitor_key(row[IP], row[UA_HASH])) for row in rows]


def test_the_postgresql_probes_say_not_now_on_a_lost_connection_and_answer_on_the_next(postgres_migrated_url):
    from models.store.postgres.database import PostgresUnavailable, connect_postgres
    from models.store.postgres.hotpath import VisitorProbe

    database = connect_postgres(postgres_migrated_url)
    try:
        kept, fresh = VisitorProbe(by_key=True), VisitorProbe(by_key=True)
        conn = database.connection()
        assert kept.history(conn, (-1,), 0) == []  # Its cursor is made now, and kept.
        conn.close()  # As a server restart leaves it.
        for probe in (kept, fresh):  # With a cursor on the lost connection, and making one on it.
            with pytest.raises(PostgresUnavailable):
                probe.history(conn, (-1,), 0)
        conn = database.connection()
        assert not conn.closed
        for probe in (kept, fresh):
            assert probe.history(conn, (-1,), 0) == []
            assert probe.seen(conn, (-1,), 0, 0, 1, 1) == (False, False, False)
            assert probe.last_click(conn, (-1,), 0, 1, "ua") is None
    finally:
        database.close()
