"""The lander step in-process (real migrated store, a controllable clock): routing to weighted landers,
the LP click's offer and its exactly-once line, the journal line's new fields and the previous
release's lines, the flusher landing LP clicks, rollups and reports."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from landers import lander_campaign

from models.clicks.record import (
    JOURNAL_COLUMNS,
    LANDER_ID,
    LOCATION,
    decode_line,
    encode_line,
    encode_lp_line,
    host_domain,
    line_tail,
    new_subid,
)
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.store.database import db as database


def visit(n: int = 1, **fields) -> Visit:
    return Visit(ip=f"10.0.{n // 256 % 256}.{n % 256}", user_agent=f"Mozilla/5.0 visitor {n}", **fields)


def stored(sql: str, params=()) -> list[tuple]:
    cursor = database.connection().execute(sql, params)
    try:
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def land(settings) -> None:
    flush_spool(database, settings.spool_dir, settings.spool_segment_bytes)


REMOTE = "https://lp.example/page?sid={subid}&c={country}&go={offer}"


def test_a_stream_with_landers_sends_clicks_to_them_by_weight_and_chooses_no_offer(
    db, make_tracker, settings
):
    made = lander_campaign(
        db, "weighed", [{"url": REMOTE, "weight": 75}, {"kind": "local", "folder": "shoe", "weight": 25}]
    )
    tracker = make_tracker()
    campaign = tracker.campaign("weighed")
    decisions = [
        tracker.track(campaign, visit(n, host="t.example:8080", domain="t.example")) for n in range(400)
    ]
    remote = [d for d in decisions if d.lander_id == made["lander_ids"][0]]
    local = [d for d in decisions if d.lander_id == made["lander_ids"][1]]
    assert len(remote) + len(local) == 400 and 240 < len(remote) < 360  # 75:25 of 400 (seeded).
    assert all(d.offer_id is None for d in decisions)
    first = urlsplit(remote[0].location)
    assert (first.netloc, parse_qs(first.query)["sid"]) == ("lp.example", [remote[0].subid])
    assert parse_qs(first.query)["go"] == [f"http://t.example:8080/lp/click?subid={remote[0].subid}"]
    assert local[0].location == f"/landers/shoe/?subid={local[0].subid}"
    land(settings)
    rows = stored("SELECT lander_id, offer_id, domain, lp_clicked_at FROM click")
    assert len(rows) == 400
    assert {row[0] for row in rows} == set(made["lander_ids"])
    assert {(row[1], row[2], row[3]) for row in rows} == {(None, "t.example", None)}


def test_lp_click_chooses_the_offer_once_and_lands_it_once(db, make_tracker, settings, clock):
    made = lander_campaign(db, "once", [{"url": REMOTE}])
    first, second = make_tracker(), make_tracker()
    decision = first.track(first.campaign("once"), visit(3, sub_ids=["zone7", *[""] * 29]))
    clock.advance(5)
    lp = second.lp_click(decision.subid)  # Another worker, the click not landed yet.
    assert lp is not None and not lp.is_repeat and lp.offer_id == made["offer_ids"][0]
    assert parse_qs(urlsplit(lp.location).query) == {"click": [decision.subid], "s1": ["zone7"]}
    again = first.lp_click(decision.subid)
    assert again.is_repeat and again.location == lp.location
    land(settings)
    assert stored("SELECT offer_id, lp_clicked_at FROM click") == [(lp.offer_id, 1_800_000_005_000)]
    restarted = make_tracker()  # Its journal replay and the row both know the LP click.
    assert restarted.lp_click(decision.subid).is_repeat
    lines = [
        line for path in settings.spool_dir.glob("clicks.*.log") for line in path.read_bytes().splitlines()
    ]
    assert sum(line.startswith(b"lp\t") for line in lines) == 1
    flush_spool(database, settings.spool_dir, settings.spool_segment_bytes)  # Nothing new.
    assert stored("SELECT COUNT(*) FROM click WHERE lp_clicked_at IS NOT NULL") == [(1,)]


def test_lp_click_of_a_landed_click_is_answered_from_the_database(db, make_tracker, settings, clock):
    lander_campaign(db, "landed", [{"url": REMOTE}])
    tracker = make_tracker()
    decision = tracker.track(tracker.campaign("landed"), visit(4))
    land(settings)
    clock.advance(60)
    fresh = make_tracker()
    lp = fresh.lp_click(decision.subid)
    assert lp is not None and not lp.is_repeat
    land(settings)
    assert stored("SELECT offer_id FROM click") == [(lp.offer_id,)]
    assert make_tracker().lp_click(decision.subid).is_repeat


def test_unknown_and_offer_clicks_have_no_lp_click(db, make_tracker, settings):
    from models.admin.services import create_campaign

    create_campaign(db, "Plain", "plain", offer_url="https://offer.example/?s={subid}")
    tracker = make_tracker()
    plain = tracker.track(tracker.campaign("plain"), visit(5))
    assert tracker.lp_click(plain.subid) is None
    land(settings)
    assert tracker.lp_click(plain.subid) is None
    assert tracker.lp_click(new_subid()) is None
    assert tracker.lp_click("not-a-subid") is None
    assert not [
        line
        for p in settings.spool_dir.glob("clicks.*.log")
        for line in p.read_bytes().splitlines()
        if line.startswith(b"lp")
    ]


def test_offer_cap_counts_at_the_lp_click(db, make_tracker, settings):
    made = lander_campaign(
        db,
        "capped",
        [{"url": REMOTE}],
        offers=[
            {"url": "https://capped.example/?s={subid}", "total_cap": 5},
            {"url": "https://open.example/?s={subid}"},
        ],
    )
    workers = [make_tracker(), make_tracker()]
    decisions = [workers[n % 2].track(workers[n % 2].campaign("capped"), visit(n + 10)) for n in range(20)]
    lps = [workers[(n + 1) % 2].lp_click(d.subid) for n, d in enumerate(decisions)]
    assert sum(lp.offer_id == made["offer_ids"][0] for lp in lps) == 5
    land(settings)
    assert stored("SELECT offer_id, COUNT(*) FROM click GROUP BY offer_id ORDER BY offer_id") == [
        (made["offer_ids"][0], 5),
        (made["offer_ids"][1], 15),
    ]
    counted = "SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = ?"
    assert stored(counted, (made["offer_ids"][0],)) == [(5,)]
    restarted = make_tracker()  # Counts from the database: the capped offer stays capped.
    more = restarted.track(restarted.campaign("capped"), visit(99))
    assert restarted.lp_click(more.subid).offer_id == made["offer_ids"][1]


def test_a_line_of_the_release_before_landers_still_lands(db, settings):
    """Workers of the previous release may append while 0016 is applied (an upgrade)."""
    from models.admin.services import create_campaign

    create_campaign(db, "Old", "old", offer_url="https://o.example/")
    texts = [
        "Mozilla/5.0 old",
        "",
        "src",
        "",
        *[""] * 30,
        *["DE", "", "", "", "", "", "de", "", "1+ o1"],
        "https://o.example/",
    ]
    subids = [new_subid(), new_subid()]
    # That release's tail: no lander_id after offer_id, no domain after the location.
    tails = [(f"{subid}\t1\t1\t1\t0.0\t0\t" + "\t".join(texts)).encode() for subid in subids]
    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.spool_dir / "clicks.00000001.log", "ab") as journal:
        journal.write(encode_line("192.0.2.1", 7, 1_800_000_000_000, (1, 1, 1), tails[0]))
        journal.write(
            encode_line("192.0.2.2", 8, 1_800_000_000_001, (1, 1, 1), tails[1], key=12345)
        )  # Keyed.
    result = flush_spool(database, settings.spool_dir, settings.spool_segment_bytes)
    assert (result.inserted, result.rejected) == (2, 0)
    assert stored("SELECT subid, lander_id, domain, country, visitor_key = 12345 FROM click ORDER BY id") == [
        (subids[0], None, "", "DE", 0),
        (subids[1], None, "", "DE", 1),
    ]


def test_journal_line_carries_lander_and_domain():
    texts = ["UA", "", "", "", *[""] * 39, "/landers/x/?subid=s"]
    subid = new_subid()
    line = encode_line(
        "192.0.2.1",
        1,
        1_800_000_000_000,
        (1, 1, 1),
        line_tail(subid, 1, 2, None, 0.0, 0, texts, 9, "t.example"),
    )
    record = decode_line(line)
    assert len(record) == len(JOURNAL_COLUMNS) + 2
    assert (record[LANDER_ID], record[JOURNAL_COLUMNS.index("domain")], record[LOCATION]) == (
        9,
        "t.example",
        texts[-1],
    )


@pytest.mark.parametrize(
    "host, domain",
    [
        ("Track.Example:8443", "track.example"),
        ("[2001:db8::1]:80", "[2001:db8::1]"),
        ("", ""),
        ("evil\tx", ""),
        ("a" * 300, "a" * 253),
        ("127.0.0.1", "127.0.0.1"),
    ],
)
def test_host_domain(host, domain):
    assert host_domain(host) == domain


def test_lp_line_round_trips():
    from models.clicks.record import decode_lp_line

    subid = new_subid()
    line = encode_lp_line(subid, 1_800_000_000_000, 4, "https://o.example/?a=b\tc")
    assert decode_lp_line(line) == (subid, 1_800_000_000_000, 4, "https://o.example/?a=b\tc")


def test_reports_count_lp_views_lp_clicks_and_ctr_by_lander_and_offer(db, make_tracker, settings, clock):
    from models.migrations.deferred import run_deferred
    from models.reporting.reports import ReportQuery, run_report

    run_deferred(db, pause=0)  # The rollups are live (a new database's backfill has nothing to add).
    made = lander_campaign(
        db, "funnel", [{"url": REMOTE, "name": "Quiz"}, {"kind": "local", "folder": "q2", "name": "Story"}]
    )
    tracker = make_tracker()
    decisions = [tracker.track(tracker.campaign("funnel"), visit(n + 500)) for n in range(12)]
    land(settings)  # Some LP clicks land on landed clicks, some with their click in the same batch.
    for decision in decisions[:5]:
        tracker.lp_click(decision.subid)
    clock.advance(3600 * 3)  # Later hours: the LP click moves its click in the rollups, not in a new hour.
    later = [tracker.track(tracker.campaign("funnel"), visit(n + 600)) for n in range(3)]
    for decision in [*decisions[5:8], later[0]]:
        tracker.lp_click(decision.subid)
    land(settings)
    by_lander = {lid: sum(d.lander_id == lid for d in (*decisions, *later)) for lid in made["lander_ids"]}
    clicked = {lid: sum(d.lander_id == lid for d in (*decisions[:8], later[0])) for lid in made["lander_ids"]}
    for source in ("auto", "raw"):
        report = run_report(db, ReportQuery(group_by=("lander",), preset="all_time", source=source))
        assert {
            row["lander"]: (row["lander_name"], row["lp_views"], row["lp_clicks"]) for row in report.rows
        } == {
            made["lander_ids"][0]: ("Quiz", by_lander[made["lander_ids"][0]], clicked[made["lander_ids"][0]]),
            made["lander_ids"][1]: (
                "Story",
                by_lander[made["lander_ids"][1]],
                clicked[made["lander_ids"][1]],
            ),
        }
        assert (
            report.total["clicks"],
            report.total["lp_views"],
            report.total["lp_clicks"],
            report.total["lp_ctr"],
        ) == (
            15,
            15,
            9,
            60.0,
        )
        offers = run_report(db, ReportQuery(group_by=("offer",), preset="all_time", source=source))
        assert {row["offer"]: (row["clicks"], row["lp_views"], row["lp_clicks"]) for row in offers.rows} == {
            None: (6, 6, 0),
            made["offer_ids"][0]: (9, 9, 9),
        }
    assert run_report(db, ReportQuery(group_by=("offer",), preset="all_time")).sources != ["raw"]


def test_a_conversion_before_the_lp_click_moves_to_the_offer_with_its_click(
    db, make_tracker, settings, clock
):
    """A postback can come before the LP click lands (a fast network, a slow flusher): the conversion
    keeps its own copy of the click's offer, and the rollups move it with the click."""
    from test_reports import cube_differences

    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
    from models.migrations.deferred import run_deferred
    from models.reporting.reports import ReportQuery, run_report

    run_deferred(db, pause=0)
    made = lander_campaign(db, "early", [{"url": REMOTE}])
    tracker = make_tracker()
    decision = tracker.track(tracker.campaign("early"), visit(700))
    land(settings)
    recorder = ConversionRecorder(db, park_ms=3_600_000, clock=clock)
    received = Received("GET", "198.51.100.9", "GET /postback?test")
    recorder.record(parse_postback({"subid": decision.subid, "status": "sale", "payout": "7.5"}), received)
    assert tracker.lp_click(decision.subid).offer_id == made["offer_ids"][0]
    land(settings)
    assert stored("SELECT offer_id FROM conversion") == [(made["offer_ids"][0],)]
    for source in ("auto", "raw"):
        report = run_report(db, ReportQuery(group_by=("offer",), preset="all_time", source=source))
        # (The rollups keep the emptied "no offer" row the click moved from: all its counts 0.)
        counted = [r for r in report.rows if r["clicks"] or r["conversions"]]
        assert [(r["offer"], r["clicks"], r["sales"], r["revenue"], r["lp_clicks"]) for r in counted] == [
            (made["offer_ids"][0], 1, 1, 7.5, 1)
        ]
    assert all(rows == [] for rows in cube_differences(db).values())


# The funnels' in-memory bound the two outage tests give their trackers: a quarter of the product's
# FUNNELS_IN_MEMORY (8,192), so they cross it with a quarter of the clicks (SPILL_MOVES, 1,024, is half).
FUNNEL_BOUND = 2048


def lp_lines(settings) -> list[bytes]:
    return [
        line
        for path in settings.spool_dir.glob("clicks.*.log")
        for line in path.read_bytes().splitlines()
        if line.startswith(b"lp\t")
    ]


def test_a_stopped_flusher_leaves_lander_clicks_bounded_in_memory_and_every_lp_click_answered(
    db, make_tracker, settings, clock
):
    made = lander_campaign(
        db,
        "outage",
        [{"url": REMOTE}],
        offers=[{"url": "https://a.example/?s={subid}"}, {"url": "https://b.example/?s={subid}"}],
    )
    # 5,000 clicks cross FUNNEL_BOUND ~2.4 times over, as 20,000 cross the product's FUNNELS_IN_MEMORY.
    tracker = make_tracker(funnels_in_memory=FUNNEL_BOUND)
    count = 5_000
    subids = []
    for n in range(count):  # 50 s at 100 funnels/s, nothing flushed.
        subids.append(tracker.track(tracker.campaign("outage"), visit(n)).subid)
        clock.advance(0.01)
    funnels = tracker.funnels
    assert len(funnels.clicks) <= FUNNEL_BOUND, len(funnels.clicks)
    assert funnels.spilled_clicks == count - len(funnels.clicks)
    # A worker started now replays the journal into the same two tiers.
    late = make_tracker(funnels_in_memory=FUNNEL_BOUND)
    assert len(late.funnels.clicks) <= FUNNEL_BOUND
    assert late.funnels.spilled_clicks == count - len(late.funnels.clicks)

    first = {}
    for subid in subids:  # The oldest ones are on disk only: each is still found, and gets an offer.
        lp = tracker.lp_click(subid)
        assert lp is not None and not lp.is_repeat, subid
        assert lp.offer_id in made["offer_ids"] and f"s={subid}" in lp.location
        first[subid] = (lp.offer_id, lp.location)
        clock.advance(0.001)
    assert {offer for offer, _ in first.values()} == set(made["offer_ids"])
    assert len(funnels.lp_clicks) <= FUNNEL_BOUND, len(funnels.lp_clicks)
    assert funnels.spilled_lp_clicks == count - len(funnels.lp_clicks)
    assert subids[0] not in funnels.lp_clicks and subids[0] not in funnels.clicks
    for worker in (tracker, late):  # Again, on either worker: the first offer, nothing written.
        for subid in subids[:300] + subids[-300:]:
            again = worker.lp_click(subid)
            assert again.is_repeat and (again.offer_id, again.location) == first[subid], subid
    assert len(lp_lines(settings)) == count
    assert len(late.funnels.lp_clicks) <= FUNNEL_BOUND  # It read the other worker's LP lines.
    assert late.funnels.spilled_lp_clicks == count - len(late.funnels.lp_clicks)

    land(settings)
    rows = stored("SELECT subid, offer_id FROM click WHERE lp_clicked_at IS NOT NULL")
    assert dict(rows) == {subid: offer for subid, (offer, _) in first.items()}
    clock.advance(1)
    for worker in (tracker, late):  # The flusher passed them all: memory and the file are emptied.
        worker.refresh()
        held = worker.funnels
        assert (len(held.clicks), len(held.lp_clicks)) == (0, 0)
        assert (held.spilled_clicks, held.spilled_lp_clicks, held._spill) == (0, 0, None)
        assert worker.lp_click(subids[0]).is_repeat  # From the row now.
    assert len(lp_lines(settings)) == count


def test_when_the_disk_refuses_lander_clicks_they_stay_in_memory_and_lp_clicks_are_answered(
    db, make_tracker, settings, clock, caplog
):
    import logging
    import os

    made = lander_campaign(db, "refused", [{"url": REMOTE}])
    tracker = make_tracker(funnels_in_memory=FUNNEL_BOUND)
    blocker = settings.spool_dir / f"funnels.{os.getpid()}.db"
    blocker.mkdir(parents=True)  # The file's name is taken: it cannot be created.
    count = FUNNEL_BOUND + 2000
    with caplog.at_level(logging.ERROR, logger="models.clicks.funnels"):
        subids = [tracker.track(tracker.campaign("refused"), visit(n)).subid for n in range(count)]
    assert "kept in memory" in caplog.text
    assert caplog.text.count("kept in memory") == 1  # Throttled: one line, not one per click.
    funnels = tracker.funnels
    assert len(funnels.clicks) == count and funnels.spilled_clicks == 0
    lp = tracker.lp_click(subids[0])
    assert lp is not None and not lp.is_repeat and lp.offer_id == made["offer_ids"][0]
    assert tracker.lp_click(subids[0]).is_repeat

    blocker.rmdir()
    clock.advance(61)  # Past the retry's wait: the oldest move to disk again.
    more = [tracker.track(tracker.campaign("refused"), visit(count + n)).subid for n in range(10)]
    assert funnels.spilled_clicks > 0 and len(funnels.clicks) < count + 10
    for subid in (subids[1], subids[-1], more[-1]):
        assert not tracker.lp_click(subid).is_repeat and tracker.lp_click(subid).is_repeat
    assert len(lp_lines(settings)) == 4


def test_the_disk_tier_forgets_what_the_flusher_passed_row_by_row(tmp_path, clock):
    from models.clicks.funnels import SPILL_MOVES, FunnelIndex

    funnels = FunnelIndex(tmp_path, clock, in_memory=2 * SPILL_MOVES)  # Moves 1,024 at 2,048.
    try:
        for n in range(3 * SPILL_MOVES):
            funnels.add_click(f"s{n}", (1, n))
            funnels.add_lp_click(f"s{n}", (2, n), n, f"https://o.example/{n}")
        assert funnels.spilled_clicks == funnels.spilled_lp_clicks == 2 * SPILL_MOVES
        assert funnels.click("s0") == (1, 0) and funnels.lp_click("s5") == ((2, 5), 5, "https://o.example/5")
        funnels.prune((1, 100))  # Part of the lander clicks landed: their rows go, no LP click's.
        assert funnels.spilled_clicks == 2 * SPILL_MOVES - 100 and funnels.click("s99") is None
        assert funnels.click("s100") == (1, 100) and funnels.spilled_lp_clicks == 2 * SPILL_MOVES
        funnels.prune((2, 10))  # All the lander clicks, some LP clicks.
        assert funnels.spilled_clicks == 0 and len(funnels.clicks) == 0 and funnels.click("s2000") is None
        assert funnels.spilled_lp_clicks == 2 * SPILL_MOVES - 10 and funnels.lp_click("s9") is None
        assert funnels.lp_click("s10")[1] == 10
        funnels.prune((3, 0))
        assert funnels._spill is None and funnels.spilled_lp_clicks == 0 and not funnels.lp_clicks
    finally:
        funnels.close()
