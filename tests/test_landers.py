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


def test_a_stream_with_landers_sends_clicks_to_them_by_weight_and_chooses_no_offer(db, make_tracker, settings):
    made = lander_campaign(db, "weighed", [{"url": REMOTE, "weight": 75}, {"kind": "local", "folder": "shoe", "weight": 25}])
    tracker = make_tracker()
    campaign = tracker.campaign("weighed")
    decisions = [tracker.track(campaign, visit(n, host="t.example:8080", domain="t.example")) for n in range(400)]
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
    lines = [line for path in settings.spool_dir.glob("clicks.*.log") for line in path.read_bytes().splitlines()]
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
    assert not [line for p in settings.spool_dir.glob("clicks.*.log") for line in p.read_bytes().splitlines() if line.startswith(b"lp")]


def test_offer_cap_counts_at_the_lp_click(db, make_tracker, settings):
    made = lander_campaign(
        db,
        "capped",
        [{"url": REMOTE}],
        offers=[{"url": "https://capped.example/?s={subid}", "total_cap": 5}, {"url": "https://open.example/?s={subid}"}],
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
    texts = ["Mozilla/5.0 old", "", "src", "", *[""] * 30, *["DE", "", "", "", "", "", "de", "", "1+ o1"], "https://o.example/"]
    subids = [new_subid(), new_subid()]
    # That release's tail: no lander_id after offer_id, no domain after the location.
    tails = [(f"{subid}\t1\t1\t1\t0.0\t0\t" + "\t".join(texts)).encode() for subid in subids]
    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.spool_dir / "clicks.00000001.log", "ab") as journal:
        journal.write(encode_line("192.0.2.1", 7, 1_800_000_000_000, (1, 1, 1), tails[0]))
        journal.write(encode_line("192.0.2.2", 8, 1_800_000_000_001, (1, 1, 1), tails[1], key=12345))  # Keyed.
    result = flush_spool(database, settings.spool_dir, settings.spool_segment_bytes)
    assert (result.inserted, result.rejected) == (2, 0)
    assert stored("SELECT subid, lander_id, domain, country, visitor_key = 12345 FROM click ORDER BY id") == [
        (subids[0], None, "", "DE", 0),
        (subids[1], None, "", "DE", 1),
    ]


def test_journal_line_carries_lander_and_domain():
    texts = ["UA", "", "", "", *[""] * 39, "/landers/x/?subid=s"]
    subid = new_subid()
    line = encode_line("192.0.2.1", 1, 1_800_000_000_000, (1, 1, 1), line_tail(subid, 1, 2, None, 0.0, 0, texts, 9, "t.example"))
    record = decode_line(line)
    assert len(record) == len(JOURNAL_COLUMNS) + 2
    assert (record[LANDER_ID], record[JOURNAL_COLUMNS.index("domain")], record[LOCATION]) == (9, "t.example", texts[-1])


@pytest.mark.parametrize(
    "host, domain",
    [("Track.Example:8443", "track.example"), ("[2001:db8::1]:80", "[2001:db8::1]"), ("", ""),
     ("evil\tx", ""), ("a" * 300, "a" * 253), ("127.0.0.1", "127.0.0.1")],
)  # fmt: skip
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
    made = lander_campaign(db, "funnel", [{"url": REMOTE, "name": "Quiz"}, {"kind": "local", "folder": "q2", "name": "Story"}])
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
        assert {row["lander"]: (row["lander_name"], row["lp_views"], row["lp_clicks"]) for row in report.rows} == {
            made["lander_ids"][0]: ("Quiz", by_lander[made["lander_ids"][0]], clicked[made["lander_ids"][0]]),
            made["lander_ids"][1]: ("Story", by_lander[made["lander_ids"][1]], clicked[made["lander_ids"][1]]),
        }
        assert (report.total["clicks"], report.total["lp_views"], report.total["lp_clicks"], report.total["lp_ctr"]) == (
            15, 15, 9, 60.0,
        )
        offers = run_report(db, ReportQuery(group_by=("offer",), preset="all_time", source=source))
        assert {row["offer"]: (row["clicks"], row["lp_views"], row["lp_clicks"]) for row in offers.rows} == {
            None: (6, 6, 0),
            made["offer_ids"][0]: (9, 9, 9),
        }
    assert run_report(db, ReportQuery(group_by=("offer",), preset="all_time")).sources != ["raw"]
