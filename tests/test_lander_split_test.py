"""A lander split test judged on LP CTR (LP clicks / lander views) on a real migrated store (both
backends): clicks through the in-process pipeline, LP clicks and conversions the test chooses so that the
landers' LP CTR and CR point opposite ways, landed by the flusher's code; the verdict and its numbers
checked against the mixture SPRT worked out here from the counts, in the model, the CLI, the admin API
and the panel."""

from __future__ import annotations

import json
import math
import time
from collections import Counter

import pytest
from conftest import Clock, InProcessApp, request
from landers import lander_campaign
from test_bandit_rotation import RECEIVED
from test_lander_step import land, visit
from test_panel import PASSWORD, get, log_in

from models.accounts.users import add_user
from models.conversions.postbacks import ConversionRecorder, parse_postback, read_secret
from models.reporting.splittest import NO_WINNER_YET, WINNER, SplitTestError, split_test

REMOTE = "https://lp{n}.example/?sid={{subid}}&go={{offer}}"
PHI = 0.0025  # The prior variance docs/optimisation-rotation.md states.


def by_hand_p_value(views_a: int, lp_a: int, views_b: int, lp_b: int) -> float:
    """The always-valid p-value of the normal-mixture SPRT on the pooled two-proportion z, as the docs
    write it: 1 / (sqrt(nu / (nu + phi)) * exp(phi z^2 / (2 (nu + phi))))."""
    pooled = (lp_a + lp_b) / (views_a + views_b)
    nu = 1 / views_a + 1 / views_b
    z2 = (lp_a / views_a - lp_b / views_b) ** 2 / (pooled * (1 - pooled) * nu)
    return min(1.0, 1 / (math.sqrt(nu / (nu + PHI)) * math.exp(PHI * z2 / (2 * (nu + PHI)))))


def send(tracker, count: int, first: int) -> list:
    campaign = tracker.campaign("lpt")
    return [tracker.track(campaign, visit(n)) for n in range(first, first + count)]


def go_on(tracker, decisions, through: dict[int, int], converted: dict[int, int], seen: Counter) -> list:
    """Of each lander's views (counted on in `seen`), every `through[lander]`-th clicks on to the offer,
    and every `converted[lander]`-th of those that did is to convert: their subids."""
    to_convert = []
    for decision in decisions:
        lander = decision.lander_id
        seen[("views", lander)] += 1
        if seen[("views", lander)] % through[lander]:
            continue
        assert tracker.lp_click(decision.subid) is not None
        seen[("lp", lander)] += 1
        if seen[("lp", lander)] % converted[lander] == 0:
            seen[("leads", lander)] += 1
            to_convert.append(decision.subid)
    return to_convert


def convert(db, subids: list) -> None:
    recorder = ConversionRecorder(db, park_ms=0)
    for subid in subids:
        outcome = recorder.record(parse_postback({"subid": subid, "tid": subid, "status": "lead"}), RECEIVED)
        assert outcome.verdict == "created", outcome


@pytest.fixture
def lander_test(db, make_tracker, settings):
    """Two landers at even weights: lander one sends every 2nd visitor on (50 % LP CTR) and one in 20 of
    those converts; lander two sends every 8th on (12.5 %), and each of those converts."""
    made = lander_campaign(db, "lpt", [{"url": REMOTE.format(n=n)} for n in range(2)])
    one, two = made["lander_ids"]
    tracker = make_tracker()
    seen: Counter = Counter()
    through, converted = {one: 2, two: 8}, {one: 20, two: 1}
    for first, count in ((0, 24), (24, 376)):
        decisions = send(tracker, count, first)
        land(settings)
        to_convert = go_on(tracker, decisions, through, converted, seen)
        land(settings)
        convert(db, to_convert)
        if first == 0:
            early = split_test(db, made["stream_id"], arm_kind="lander")
    return {**made, "one": one, "two": two, "seen": seen, "early": early}


def test_a_lander_test_is_judged_on_lp_ctr_no_winner_yet_at_first_then_the_lander_that_clicks_through(
    db, lander_test, settings, monkeypatch
):
    one, two, seen = lander_test["one"], lander_test["two"], lander_test["seen"]
    early = lander_test["early"]
    assert early.metric == "lp_ctr" and early.verdict == NO_WINNER_YET and early.winner is None
    assert early.sentence.startswith("No winner yet") and "LP CTR" in early.sentence
    assert sum(arm.lp_views for arm in early.arms) == 24

    test = split_test(db, lander_test["stream_id"], arm_kind="lander")
    assert test.metric == "lp_ctr" and test.verdict == WINNER and test.winner == one == test.leader
    leader, other = test.arms
    assert (leader.id, other.id) == (one, two)
    for arm in test.arms:
        views, lp = seen[("views", arm.id)], seen[("lp", arm.id)]
        assert (arm.lp_views, arm.lp_clicks, arm.clicks) == (views, lp, views)
        assert arm.lp_ctr == round(lp / views * 100, 4)
        assert arm.conversions == seen[("leads", arm.id)]
    assert sum(arm.lp_views for arm in test.arms) == 400
    expected = by_hand_p_value(other.lp_views, other.lp_clicks, leader.lp_views, leader.lp_clicks)
    assert other.p_value == pytest.approx(expected, abs=1e-6) and other.p_value <= test.pair_alpha
    assert other.difference == pytest.approx(leader.lp_ctr - other.lp_ctr, abs=1e-3)
    assert 0 < other.low < other.difference < other.high and other.is_behind
    assert test.sentence.startswith(f"Winner: lander {one} ({leader.lp_ctr:g} % LP CTR)")

    # Read from the columnar history (no rollup keeps the lander), as every surface does: the same test.
    from models.reporting import splittest
    from models.reporting.history import HistoryFiles, append_history

    files = HistoryFiles.of(settings)
    append_history(db, files)
    read: list[list[str]] = []

    def spied(*args, **kwargs):
        report = run_report(*args, **kwargs)
        read.append(report.sources)
        return report

    run_report = splittest.run_report
    monkeypatch.setattr(splittest, "run_report", spied)
    from_history = split_test(db, lander_test["stream_id"], arm_kind="lander", history=files)
    monkeypatch.undo()
    assert read and "history" in read[0], read
    assert (from_history.arms, from_history.verdict, from_history.winner) == (test.arms, test.verdict, one)

    # On CR the same landers rank the other way round: the metric decides the verdict.
    assert other.cr > leader.cr
    by_cr = split_test(db, lander_test["stream_id"], arm_kind="lander", metric="cr")
    assert by_cr.metric == "cr" and by_cr.leader == two and "% CR" in by_cr.sentence
    with pytest.raises(SplitTestError, match="LP CTR judges landers; an offer test is judged on its CR"):
        split_test(db, lander_test["stream_id"], metric="lp_ctr")
    with pytest.raises(SplitTestError, match="judges CR or LP CTR"):
        split_test(db, lander_test["stream_id"], arm_kind="lander", metric="epc")


def test_the_cli_the_api_and_the_panel_show_the_lander_verdict_on_lp_ctr(db, lander_test, lanner, env):
    stream_id, one, two = lander_test["stream_id"], lander_test["one"], lander_test["two"]
    shown = json.loads(lanner("stream", "split-test", str(stream_id), "--landers", "--json").stdout)
    assert shown["metric"] == "lp_ctr" and shown["verdict"] == WINNER and shown["winner"] == one
    table = lanner("stream", "split-test", str(stream_id), "--landers").stdout
    assert "lp_ctr" in table.splitlines()[0] and f"Winner: lander {one}" in table
    assert "the leader's LP CTR minus the arm's" in table
    by_cr = json.loads(
        lanner("stream", "split-test", str(stream_id), "--landers", "--metric", "cr", "--json").stdout
    )
    assert by_cr["metric"] == "cr" and by_cr["leader"] == two
    refused = lanner("stream", "split-test", str(stream_id), "--metric", "lp_ctr", check=False)
    assert refused.returncode == 1 and "LP CTR judges landers" in refused.stderr

    from app import create_admin_app
    from settings import load_settings

    admin = InProcessApp(create_admin_app(load_settings(env), db=db), Clock(time.time()))
    key = {"X-Api-Key": read_secret(db, "api_key")}
    path = f"/api/v1/streams/{stream_id}/split-test"
    status, _, body = request(admin, path + "?arms=lander", key)
    answer = json.loads(body)
    assert status == 200 and answer["metric"] == "lp_ctr" and answer["winner"] == one
    assert [arm["lp_views"] for arm in answer["arms"]] == [arm["lp_views"] for arm in shown["arms"]]
    status, _, body = request(admin, path + "?arms=lander&metric=cr", key)
    assert status == 200 and json.loads(body)["leader"] == two
    for query in ("?metric=lp_ctr", "?arms=lander&metric=epc"):
        status, _, body = request(admin, path + query, key)
        assert status == 400, (query, body)

    add_user(db, "anna", "admin", PASSWORD)
    cookie = log_in(admin)
    page = get(
        admin, f"/panel/campaigns/{lander_test['campaign_id']}/streams/{stream_id}?split=landers", cookie
    )[2]
    assert f"Winner: lander {one}" in page and "Leader − it (LP CTR, points)" in page
    table = page.split('id="split-test-lander"', 1)[1].split("</table>", 1)[0]
    leader = shown["arms"][0]
    assert f">{leader['lp_views']:,}<" in table and f">{leader['lp_ctr']:.2f} %<" in table
