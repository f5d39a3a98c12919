"""Local times on DST nights: one rule for skipped and repeated times in reports, `cost set` and the logs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from models.admin.services import create_campaign
from models.clicks.record import CLICK_COLUMNS, new_subid, ua_hash
from models.migrations.deferred import run_deferred
from models.reporting.reports import ReportQuery, run_report
from models.reporting.rollups import RollupDelta
from models.reporting.timerange import local_instant

BERLIN = ZoneInfo("Europe/Berlin")


def utc_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def add_clicks(db, campaign_id: int, moments: list[int]) -> None:
    """Clicks at `moments` (UTC ms), in the click table and the rollups, as the spool flusher lands them."""
    for created in moments:
        db.connection().execute(
            "INSERT INTO click (subid, created_at, campaign_id, stream_id, offer_id, ip, user_agent, "
            "ua_hash) VALUES (?, ?, ?, 1, 1, '192.0.2.1', 'ua', ?)",
            (new_subid(created), created, campaign_id, ua_hash("ua")),
        )
    delta = RollupDelta()
    delta.add_clicks([list(row) for row in db.execute_sql(f"SELECT {', '.join(CLICK_COLUMNS)} FROM click")])
    delta.apply(db.connection())


@pytest.fixture
def berlin_campaign(db):
    run_deferred(db)  # The rollups are live before any click, so every click below is added to them.
    return create_campaign(
        db, "Berlin", "berlin", offer_url="https://o.example/?s={subid}", timezone="Europe/Berlin"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-29T02:30", "2026-03-29T01:00"),  # Skipped: the instant the clocks jump to 03:00 CEST.
        ("2026-03-29T02:00", "2026-03-29T01:00"),
        ("2026-03-29T01:59", "2026-03-29T00:59"),
        ("2026-03-29T03:00", "2026-03-29T01:00"),
        ("2026-10-25T02:30", "2026-10-25T00:30"),  # Repeated: the first (summer) occurrence.
        ("2026-10-25T02:30+01:00", "2026-10-25T01:30"),  # An offset picks the second.
    ],
)
def test_a_skipped_time_is_the_jump_and_a_repeated_one_its_first_occurrence(text, expected):
    assert local_instant(text, BERLIN, is_end=False) == utc_ms(expected)


def test_a_day_whose_midnight_is_skipped_starts_when_the_clocks_jump():
    santiago = ZoneInfo("America/Santiago")  # 2026-09-06 00:00 -> 01:00.
    assert local_instant("2026-09-06", santiago, is_end=False) == utc_ms("2026-09-06T04:00")
    assert local_instant("2026-09-05", santiago, is_end=True) == utc_ms("2026-09-06T04:00")


def test_a_report_to_a_skipped_time_ends_where_the_clocks_jump(db, berlin_campaign):
    # 01:30 CET, then 03:15 and 03:45 CEST: after the jump, so after 02:30 on the wall clock.
    add_clicks(
        db,
        berlin_campaign.id,
        [utc_ms("2026-03-29T00:30"), utc_ms("2026-03-29T01:15"), utc_ms("2026-03-29T01:45")],
    )
    for source in ("auto", "raw"):
        until = run_report(
            db,
            ReportQuery(
                group_by=("hour",),
                since="2026-03-29",
                until="2026-03-29T02:30",
                timezone="Europe/Berlin",
                source=source,
            ),
        )
        assert [(row["hour"], row["clicks"]) for row in until.rows] == [("2026-03-29 01:00", 1)], source
        since = run_report(
            db,
            ReportQuery(
                group_by=("hour",),
                since="2026-03-29T02:30",
                until="2026-03-29",
                timezone="Europe/Berlin",
                source=source,
            ),
        )
        assert [(row["hour"], row["clicks"]) for row in since.rows] == [("2026-03-29 03:00", 2)], source


def test_click_list_to_a_skipped_time_follows_the_same_rule(db, berlin_campaign, lanner):
    add_clicks(db, berlin_campaign.id, [utc_ms("2026-03-29T00:30"), utc_ms("2026-03-29T01:15")])
    args = ("--from", "2026-03-29", "--to", "2026-03-29T02:30", "--timezone", "Europe/Berlin", "--json")
    listed = json.loads(lanner("click", "list", *args).stdout)
    assert [row["created_at"] for row in listed] == ["2026-03-29T01:30:00.000+01:00"]


def test_cost_set_over_dst_days_spreads_over_the_clicks_of_the_local_period(db, berlin_campaign, lanner):
    fall_back = [
        utc_ms("2026-10-24T21:59"),
        *(utc_ms("2026-10-24T22:30") + n * 3_600_000 for n in range(25)),
        utc_ms("2026-10-25T23:00"),
    ]
    spring = [utc_ms("2026-03-29T00:30"), utc_ms("2026-03-29T01:15"), utc_ms("2026-03-29T01:45")]
    add_clicks(db, berlin_campaign.id, fall_back + spring)
    out = lanner(
        "cost",
        "set",
        "--campaign",
        "berlin",
        "--from",
        "2026-10-25",
        "--to",
        "2026-10-25",
        "--timezone",
        "Europe/Berlin",
        "--amount",
        "50",
    ).stdout
    assert "over 25 clicks (2 USD each)" in out  # The 25-hour day: every hour's click, none outside.
    out = lanner(
        "cost",
        "set",
        "--campaign",
        "berlin",
        "--from",
        "2026-03-29T02:30",
        "--to",
        "2026-03-29T04:00",
        "--timezone",
        "Europe/Berlin",
        "--amount",
        "3",
    ).stdout
    assert "over 2 clicks (1.5 USD each)" in out  # 03:15 and 03:45 CEST, after the jump.
    costs = dict(db.execute_sql("SELECT created_at, cost FROM click").fetchall())
    assert [costs[moment] for moment in spring] == [0, 1.5, 1.5]
    assert costs[fall_back[0]] == costs[fall_back[-1]] == 0 and {costs[m] for m in fall_back[1:-1]} == {2}


def test_the_fall_back_day_has_25_hours_the_repeated_one_labelled_by_its_offsets(db, berlin_campaign):
    # One click in each hour of 2026-10-25 in Berlin (22:00 UTC the day before to 23:00 UTC), n + 1 in hour n.
    moments = [
        utc_ms("2026-10-24T22:10") + hour * 3_600_000 + n * 60_000
        for hour in range(25)
        for n in range(hour + 1)
    ]
    add_clicks(db, berlin_campaign.id, moments)
    expected = [
        *((f"2026-10-25 0{hour}:00", hour + 1) for hour in (0, 1)),
        ("2026-10-25 02:00+02:00", 3),
        ("2026-10-25 02:00+01:00", 4),
        *((f"2026-10-25 {hour:02d}:00", hour + 2) for hour in range(3, 24)),
    ]
    for source in ("auto", "raw"):
        report = run_report(
            db,
            ReportQuery(
                group_by=("hour",),
                since="2026-10-25",
                until="2026-10-25",
                timezone="Europe/Berlin",
                source=source,
            ),
        )
        assert [(row["hour"], row["clicks"]) for row in report.rows] == expected, source
    assert run_report(
        db, ReportQuery(group_by=("hour",), since="2026-10-25", until="2026-10-25", timezone="Europe/Berlin")
    ).sources == ["rollup_campaign_hour"]
    day = run_report(
        db, ReportQuery(group_by=("day",), since="2026-10-25", until="2026-10-25", timezone="Europe/Berlin")
    )
    assert [(row["day"], row["clicks"]) for row in day.rows] == [("2026-10-25", len(moments))]
