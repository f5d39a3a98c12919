"""Conversion histories (workers/bench/histories.py, docs/RELIABILITY.md "Conversion histories").

The checker is shown able to fail first: hand-made histories with a double-counted tid, an illegal
transition, a lost accepted postback, a phantom row and a report total a cent off each give their anomaly.
Then real histories: 300 postbacks replayed from 8 threads against `lanner serve` and `lanner worker` on
SQLite and on PostgreSQL, and against two cluster nodes on one PostgreSQL and Redis while PostgreSQL is
stopped and started again; each must check clean.
"""

from __future__ import annotations

import json

import pytest

from workers.bench.histories import (
    ConversionRow,
    Operation,
    check_history,
    generate_history,
    recount,
)

SUBID = "0" * 9 + "abcdefgh"
OTHER = "0" * 9 + "zzzzzzzz"


def sent(
    index: int, tid: str, status: str, verdict: str, conversion_id: int | None, *, at: float = 0, subid=SUBID
):
    """An operation sent at `at` (ms apart) and answered 200 with `verdict`."""
    body = json.dumps({"verdict": verdict, "detail": "", "conversion_id": conversion_id})
    return Operation(index, subid, tid, status, sent_at=at, answered_at=at + 0.5, code=200, body=body)


def row(id: int, tid: str, status: str, original: str, payout: float | None = 10.0, subid=SUBID, offer=1):
    return ConversionRow(id, subid, tid, status, original, payout, 1, offer)


def reports_of(rows: list[ConversionRow]) -> dict[str, list[dict]]:
    """The reports a correct tracker shows for `rows`."""
    return {
        group: [{group: key, **sums} for key, sums in recount(rows, group).items()]
        for group in ("campaign", "offer")
    }


def good_history() -> tuple[list[Operation], list[ConversionRow]]:
    history = [
        sent(0, "t1", "lead", "created", 1, at=0),
        sent(1, "t1", "sale", "updated", 1, at=1),
        sent(2, "t1", "sale", "duplicate", 1, at=2),
        sent(3, "t1", "lead", "refused", 1, at=3),
        sent(4, "t2", "rebill", "created", 2, at=4),
        sent(5, "t3", "sale", "parked", None, at=5, subid=OTHER),
        Operation(6, SUBID, "t4", "sale", sent_at=6, answered_at=7, code=503, body="{}"),
    ]
    return history, [row(1, "t1", "sale", "lead"), row(2, "t2", "rebill", "rebill", 4.5)]


def kinds(anomalies) -> list[str]:
    return sorted(anomaly.kind for anomaly in anomalies)


def test_a_correct_history_checks_clean():
    history, rows = good_history()
    assert check_history(history, rows, reports_of(rows), clicks=[SUBID]) == []


def test_a_double_counted_tid_is_an_anomaly_naming_its_operations():
    history, rows = good_history()
    history.append(sent(7, "t1", "sale", "created", 3, at=8))
    rows.append(row(3, "t1", "sale", "sale"))
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert "double-counted" in kinds(anomalies)
    double = next(a for a in anomalies if a.kind == "double-counted")
    assert {0, 1, 7} <= set(double.operations)


def test_an_illegal_transition_accepted_is_an_anomaly():
    history, rows = good_history()
    history.append(sent(7, "t1", "lead", "updated", 1, at=8))  # A sale sent back to lead, and accepted.
    rows[0] = row(1, "t1", "lead", "lead")
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert "illegal transition" in kinds(anomalies)
    assert any({1, 7} <= set(a.operations) for a in anomalies if a.kind == "illegal transition")


def test_a_change_accepted_before_an_earlier_status_was_even_sent_is_an_anomaly():
    history = [sent(0, "t1", "lead", "created", 1, at=0), sent(1, "t1", "sale", "updated", 1, at=1)]
    history.append(
        sent(2, "t1", "rejected", "updated", 1, at=0.2)
    )  # Rejected, answered before the sale was sent...
    history[1].status = "sale"
    rows = [row(1, "t1", "rejected", "lead")]
    anomalies = check_history(history, rows, reports_of(rows))
    assert kinds(anomalies) == ["illegal transition"]
    assert anomalies[0].operations == [2, 1]


def test_a_lost_accepted_postback_is_an_anomaly():
    history, rows = good_history()
    del rows[1]  # The rebill answered `created` is not stored.
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert kinds(anomalies) == ["lost"]
    assert anomalies[0].operations == [4]


def test_an_accepted_status_a_row_went_back_on_is_lost():
    history, rows = good_history()
    rows[0] = row(1, "t1", "lead", "lead")  # Answered `updated` to sale, but still a lead.
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert "lost" in kinds(anomalies)


def test_a_row_no_postback_asked_for_is_a_phantom():
    history, rows = good_history()
    rows.append(row(9, "t9", "sale", "sale"))
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert kinds(anomalies) == ["phantom"]


def test_a_refusal_of_a_change_still_allowed_is_an_anomaly():
    history, rows = good_history()
    history.append(sent(7, "t1", "rejected", "refused", 1, at=9))  # sale → rejected is allowed.
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert kinds(anomalies) == ["wrongly refused"]


def test_a_report_total_one_cent_off_is_an_anomaly():
    history, rows = good_history()
    reports = reports_of(rows)
    reports["offer"][0]["revenue"] += 0.01
    anomalies = check_history(history, rows, reports, clicks=[SUBID])
    assert kinds(anomalies) == ["report total"]
    assert "revenue" in anomalies[0].detail and anomalies[0].operations
    # Another report by the same group (read from the raw rows) is held to the same recount.
    reports = {**reports_of(rows), "campaign:raw": reports_of(rows)["campaign"]}
    reports["campaign:raw"][0]["leads"] -= 1
    [anomaly] = check_history(history, rows, reports, clicks=[SUBID])
    assert anomaly.kind == "report total" and anomaly.detail.startswith("campaign:raw 1: leads")


def test_a_server_error_is_an_anomaly_and_try_again_is_not():
    history, rows = good_history()
    history.append(Operation(7, SUBID, "t5", "sale", sent_at=9, answered_at=9.5, code=500, body="{}"))
    anomalies = check_history(history, rows, reports_of(rows), clicks=[SUBID])
    assert kinds(anomalies) == ["unexpected answer"]


def test_a_change_stored_though_answered_try_again_checks_clean_once_its_retry_is_a_duplicate():
    """The database went away during the commit: the change was stored, its answer lost (503). The
    retry is answered `duplicate`: the change counts as accepted. A `duplicate` of a first sending
    accepts nothing: a status no postback was answered `updated` for is still an anomaly."""
    history, rows = good_history()
    rows[0] = row(1, "t1", "rejected", "lead")
    lost = Operation(7, SUBID, "t1", "rejected", sent_at=9, answered_at=9.5, code=503, body="{}")
    retry = sent(8, "t1", "rejected", "duplicate", 1, at=10)
    retry.is_retry, retry.retry_of = True, 7
    assert check_history([*history, lost, retry], rows, reports_of(rows), clicks=[SUBID]) == []
    plain = sent(7, "t1", "rejected", "duplicate", 1, at=10)
    assert kinds(check_history([*history, plain], rows, reports_of(rows), clicks=[SUBID])) == [
        "illegal transition"
    ]


def test_a_lead_without_a_tid_adopted_by_its_sale_with_one_checks_clean():
    history = [sent(0, "", "lead", "created", 1, at=0), sent(1, "t7", "sale", "updated", 1, at=1)]
    rows = [row(1, "t7", "sale", "lead")]
    assert check_history(history, rows, reports_of(rows), clicks=[SUBID]) == []


def test_a_parked_postback_is_judged_by_the_verdict_it_was_settled_with():
    history = [sent(0, "t1", "sale", "parked", None, at=0)]
    history[0].word = "approved"
    rows = [row(1, "t1", "sale", "sale")]
    settled = [(SUBID, "t1", "approved", "created", 1)]
    assert check_history(history, rows, reports_of(rows), clicks=[SUBID], settled=settled) == []
    # Never matched although its click landed: lost. Matched, but its row is gone: lost too.
    assert kinds(check_history(history, [], reports_of([]), clicks=[SUBID])) == ["lost"]
    assert kinds(check_history(history, [], reports_of([]), clicks=[SUBID], settled=settled)) == ["lost"]
    # Its click never landed: parked is all it can be.
    assert check_history(history, [], reports_of([]), clicks=[]) == []


def test_the_generator_makes_every_kind_of_postback():
    subids = [f"{n:017d}" for n in range(20)]
    plan = generate_history(subids, 600, seed=3)
    assert len(plan) == 600 and [op.index for op in plan] == list(range(600))
    statuses = {op.status for op in plan}
    assert statuses == {"lead", "sale", "rejected", "trash", "rebill"}
    assert (
        any(op.is_retry for op in plan) and any(op.network for op in plan) and any(op.in_url for op in plan)
    )
    assert {op.currency for op in plan} >= {"", "USD", "EUR", "GBP"}
    assert any(op.subid not in subids for op in plan)  # Unknown subids.
    keys = [(op.subid, op.tid) for op in plan]
    assert len(set(keys)) < len(keys)  # A tid sent more than once.
    rebilled = {}
    for op in plan:
        if op.status == "rebill":
            rebilled.setdefault(op.subid, set()).add(op.tid)
    assert max(len(tids) for tids in rebilled.values()) > 1
    assert any(op.tid == "" for op in plan)  # A lead without a tid, its sale with one.
    assert any(a.params() == b.params() for a, b in zip(plan, plan[1:], strict=False))  # Sent at once.
    late = ["0" * 9 + "latelate"]
    first = generate_history(subids, 600, seed=3, late=late)[:60]
    assert sum(op.subid in late for op in first) > 30  # Postbacks soon after their click.
    assert generate_history(subids, 600, seed=3) == plan  # A seed repeats its history.


# -- real histories ---------------------------------------------------------------------------------


def _run(db, ports: list[int], *, outage=None, operations: int = 300):
    from models.conversions.postbacks import read_secret
    from workers.bench.historyrun import run_history

    result = run_history(db, ports, read_secret(db, "postback_key"), operations=operations, outage=outage)
    verdicts = result.stats["verdicts"]
    assert result.stats["operations"] >= operations
    # The history did what it is for: conversions made, changed, refused, repeated and parked.
    assert all(verdicts.get(v, 0) > 0 for v in ("created", "updated", "duplicate", "refused", "parked")), (
        verdicts
    )
    return result


@pytest.mark.long
def test_a_history_on_one_box_checks_clean(backend, db, start_server, start_consumer):
    server = start_server(workers=2)
    start_consumer()
    result = _run(db, [server.port])
    assert result.anomalies == [], "\n".join(f"{a.kind}: {a.detail}" for a in result.anomalies)


@pytest.mark.long
@pytest.mark.xdist_group("cluster")
def test_a_history_on_two_nodes_checks_clean_across_a_postgresql_restart(
    postgres_server, postgres_template, redis_server, tmp_path
):
    from cluster_nodes import two_nodes

    from models.store.database import db
    from workers.bench.historyrun import Outage

    with two_nodes(tmp_path, postgres_server, postgres_template, redis_server) as (nodes, _):
        outage = Outage(postgres_server, after=100)
        result = _run(db, [node.web.port for node in nodes], outage=outage)
        assert [event for event, _ in outage.timeline] == ["stopped", "started"]
        assert result.stats["try_again"] > 0  # The nodes said so while PostgreSQL was away.
        assert result.anomalies == [], "\n".join(
            f"{a.kind}: {a.detail}" for a in result.anomalies
        ) + "\n".join(node.logs for node in nodes)
