"""A time series per selected report row (models/reporting/series.py) equals a count made here from the
raw clicks and conversions, by local hour and day in a half-hour-offset timezone across its DST night,
read from the columnar history plus the clicks it has not copied yet; the API and the CLI give the same
series, and bad requests get a 400. On both backends."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import falcon.testing
import pytest

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import ReportError, ReportQuery
from models.reporting.series import MAX_SERIES_ROWS, run_series
from workers.bench.generate import generate_clicks

RECEIVED = Received("GET", "127.0.0.1", "test")
ADELAIDE = ZoneInfo("Australia/Adelaide")  # +9:30, +10:30 from 02:00 on 2026-10-04 (a 23-hour day).
END = int(datetime(2026, 10, 5, 12, tzinfo=UTC).timestamp() * 1000)
NOW = END / 1000 + 86_400


@pytest.fixture
def clicks(db, settings) -> HistoryFiles:
    """500 clicks over the four days before END, 90 converted (some twice), copied into the history;
    then 80 more it has not copied yet."""
    generate_clicks(db, 500, 4, campaigns=2, seed=5, end_ms=END, zone_count=6)
    run_deferred(db)
    rng = random.Random(8)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in rng.sample(subids, 90):
        params = {
            "subid": subid,
            "status": rng.choice(["lead", "sale"]),
            "payout": f"{rng.uniform(1, 30):.2f}",
        }
        recorder.record(parse_postback(params), RECEIVED)
        if rng.random() < 0.3:
            recorder.record(parse_postback({**params, "status": "sale", "payout": "9.5"}), RECEIVED)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    generate_clicks(db, 80, 2, campaigns=2, seed=6, end_ms=END, zone_count=6)
    return files


def counted(db, groups: tuple[str, ...], time_group: str, start_ms: int, end_ms: int) -> dict:
    """(group values..., local label) -> [clicks, conversions, cost, revenue], from the raw rows."""
    sums: dict[tuple, list] = defaultdict(lambda: [0, 0, 0.0, 0.0])

    def label(ms: int) -> str:
        local = datetime.fromtimestamp(ms / 1000, ADELAIDE)
        return local.date().isoformat() if time_group == "day" else local.strftime("%Y-%m-%d %H:00")

    columns = ", ".join(groups)
    for *values, created, cost in db.execute_sql(f"SELECT {columns}, created_at, cost FROM click").fetchall():
        if start_ms <= created < end_ms:
            entry = sums[(*map(str, values), label(created))]
            entry[0] += 1
            entry[2] += cost
    conversions = db.execute_sql(
        f"SELECT {', '.join('c.' + g for g in groups)}, c.created_at, cv.status, cv.report_payout, cv.cost "
        "FROM conversion cv JOIN click c ON c.id = cv.click_id"
    ).fetchall()
    for *values, created, status, payout, cost in conversions:
        if start_ms <= created < end_ms:
            entry = sums[(*map(str, values), label(created))]
            entry[1] += status in ("lead", "sale", "rebill")
            entry[2] += cost or 0
            entry[3] += (payout or 0) if status in ("sale", "rebill") else 0
    return sums


def busiest(db, groups: tuple[str, ...], count: int) -> list[tuple[str, ...]]:
    rows = db.execute_sql(f"SELECT {', '.join(groups)} FROM click").fetchall()
    return [tuple(map(str, key)) for key, _ in Counter(rows).most_common(count)]


def test_a_rows_series_equals_its_raw_clicks_by_local_day_and_hour_across_a_dst_night(db, clicks):
    # --to is inclusive: three days by day, two by hour.
    for since, until, time_group in (
        ("2026-10-02", "2026-10-05", "day"),
        ("2026-10-03", "2026-10-04", "hour"),
    ):
        check_series(db, clicks, since, until, time_group)


def check_series(db, clicks, since: str, until: str, time_group: str) -> None:
    groups_of = {"day": ("sub_id_1",), "hour": ("country", "sub_id_1")}
    groups = groups_of[time_group]
    rows = busiest(db, groups, 3)
    query = ReportQuery(group_by=groups, since=since, until=until, timezone=ADELAIDE.key)
    series = run_series(db, query, rows, now=NOW, history=clicks)
    start = int(datetime.fromisoformat(since).replace(tzinfo=ADELAIDE).timestamp() * 1000)
    end = int((datetime.fromisoformat(until) + timedelta(days=1)).replace(tzinfo=ADELAIDE).timestamp() * 1000)
    expected = counted(db, groups, time_group, start, end)
    assert series.time_group == time_group
    assert series.sources == ["history"]  # Its copy and the 80 clicks it has not copied yet.
    labels = [label for label, _ in series.buckets]
    if time_group == "day":
        assert labels == ["2026-10-02", "2026-10-03", "2026-10-04", "2026-10-05"]
        widths = [b - a for (_, a), (_, b) in zip(series.buckets, series.buckets[1:], strict=False)]
        assert widths == [86_400_000, 86_400_000, 82_800_000]  # The 4th had 23 hours.
    else:  # 02:00 never happened on the 4th: 47 local hours, each beginning half past a UTC hour.
        assert len(labels) == 47 and "2026-10-04 02:00" not in labels
        assert all(start_ms % 3_600_000 == 1_800_000 for _, start_ms in series.buckets)
    assert len(series.lines) == 3
    seen_clicks = 0
    for row, line in zip(rows, series.lines, strict=True):
        assert tuple(line.key[g] for g in groups) == row
        for index, label in enumerate(labels):
            clicks_, conversions, cost, revenue = expected.get((*row, label), [0, 0, 0.0, 0.0])
            assert line.values["clicks"][index] == clicks_, (row, label)
            assert line.values["conversions"][index] == conversions, (row, label)
            assert line.values["cost"][index] == pytest.approx(cost, abs=1e-6)
            assert line.values["revenue"][index] == pytest.approx(revenue, abs=1e-6)
            assert line.values["profit"][index] == pytest.approx(revenue - cost, abs=1e-6)
            seen_clicks += clicks_
    assert seen_clicks > 20 and any(sum(line.values["conversions"]) for line in series.lines)


def test_the_series_api_and_cli_answer_the_same_and_refuse_bad_requests_with_400(
    db, settings, clicks, lanner
):
    from app import create_admin_app
    from models.conversions.postbacks import read_secret

    client = falcon.testing.TestClient(create_admin_app(settings, db=db))
    key = {"X-Api-Key": read_secret(db, "api_key")}
    base = {"group": "country,sub_id_1", "from": "2026-10-01", "to": "2026-10-06", "timezone": ADELAIDE.key}
    pairs = busiest(db, ("country", "sub_id_1"), 2)
    rows = [json.dumps(pair) for pair in pairs]

    def get(headers=None, **params):
        query = {**base, **params}
        return client.simulate_get("/api/v1/reports/series", params=query, headers={**key, **(headers or {})})

    answer = get(row=rows)
    assert answer.status_code == 200, answer.text
    expected = run_series(
        db,
        ReportQuery(
            group_by=("country", "sub_id_1"), since="2026-10-01", until="2026-10-06", timezone=ADELAIDE.key
        ),
        pairs,
        history=clicks,
    )
    assert answer.json == json.loads(json.dumps(expected.as_json()))
    as_csv = get(headers={"Accept": "text/csv"}, row=rows)
    assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith("text/csv")
    lines = as_csv.text.splitlines()
    assert lines[0] == "country,sub_id_1,day,clicks,conversions,cost,revenue,profit,roi"
    assert len(lines) == 1 + 2 * len(expected.buckets)
    day = expected.buckets[0][0]
    assert lines[1].startswith(f"{pairs[0][0]},{pairs[0][1]},{day},{expected.lines[0].values['clicks'][0]},")

    refusals = {
        "an unknown dimension": dict(group="zone_size", row="1"),
        "an absurd range": dict(group="sub_id_1", row="1", **{"from": "1970-01-01", "to": "9999-01-01"}),
        "too many rows": dict(group="sub_id_1", row=[str(n) for n in range(MAX_SERIES_ROWS + 1)]),
        "a row that is not a pair": dict(row="US"),
        "no row": {},
        "a day grouping": dict(group="day", row="2026-10-02"),
        "a row outside the filter": dict(group="sub_id_1", row="1", **{"f.sub_id_1": "2"}),
    }
    for what, params in refusals.items():
        refused = get(**params)
        assert refused.status_code == 400, (what, refused.text)
        assert refused.json["description"].endswith("."), what

    cli = lanner(
        "report", "-g", "sub_id_1", "--from", "2026-10-01", "--to", "2026-10-06", "--timezone", ADELAIDE.key,
        "--series", pairs[0][1], "--json",
    )  # fmt: skip
    single = run_series(
        db,
        ReportQuery(group_by=("sub_id_1",), since="2026-10-01", until="2026-10-06", timezone=ADELAIDE.key),
        [(pairs[0][1],)],
        history=clicks,
    )
    assert json.loads(cli.stdout) == json.loads(json.dumps(single.as_json()))
    too_many = lanner("report", "-g", "sub_id_1", *[f"--series={n}" for n in range(21)], check=False)
    assert too_many.returncode == 1 and f"at most {MAX_SERIES_ROWS} rows" in too_many.stderr
    with pytest.raises(ReportError):
        run_series(db, ReportQuery(group_by=("sub_id_1",)), [("1", "2")])
