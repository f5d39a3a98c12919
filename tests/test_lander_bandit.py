"""Smart rotation of a stream's landers on a real migrated store (both backends): clicks through the
in-process pipeline, LP clicks at rates the test chooses, landed by the flusher's code; the minutely
refresh; then the click path by the landers' shares, and the shares in the CLI, the admin API and
the panel."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from conftest import Clock, InProcessApp, request
from landers import lander_campaign
from test_lander_step import land, visit
from test_panel import PASSWORD, get, log_in

from models.accounts.users import add_user
from models.admin.services import AdminError, update_stream
from models.conversions.postbacks import read_secret
from models.reporting.bandits import refresh_bandits, stream_shares
from models.routing.bandit import EXPLORATION

REMOTE = "https://lp{n}.example/?sid={{subid}}&go={{offer}}"


def send(tracker, count: int, first: int) -> list:
    campaign = tracker.campaign("lpb")
    return [tracker.track(campaign, visit(n)) for n in range(first, first + count)]


def click_through(tracker, decisions, every: dict[int, int]) -> Counter:
    """An LP click for every `every[lander]`-th click sent to each lander; the LP clicks per lander."""
    seen: Counter = Counter()
    made: Counter = Counter()
    for decision in decisions:
        seen[decision.lander_id] += 1
        if seen[decision.lander_id] % every[decision.lander_id] == 0:
            assert tracker.lp_click(decision.subid) is not None
            made[decision.lander_id] += 1
    return made


def test_a_lander_bandit_sends_most_clicks_to_the_lander_that_clicks_through_best_once_refreshed(
    db, make_tracker, settings, clock, monkeypatch
):
    made = lander_campaign(db, "lpb", [{"url": REMOTE.format(n=n)} for n in range(3)])
    one, two, three = made["lander_ids"]
    stream_id = made["stream_id"]
    update_stream(db, stream_id, lander_rotation="bandit_cr")
    tracker = make_tracker()
    first = send(tracker, 300, 0)  # No state yet: even shares.
    by_lander = Counter(d.lander_id for d in first)
    assert set(by_lander) == {one, two, three} and min(by_lander.values()) >= 60, by_lander
    assert all(d.offer_id is None and d.route.split()[1:3] == ["t", f"l{d.lander_id}"] for d in first)
    lp_clicks = click_through(tracker, first, {one: 20, two: 2, three: 20})  # 5 %, 50 %, 5 % LP CTR.
    land(settings)
    assert refresh_bandits(db) == 1
    state = {row["lander"]: row for row in stream_shares(db, stream_id, "lander")}
    assert {lander: row["conversions"] for lander, row in state.items()} == {
        lander: lp_clicks[lander] for lander in (one, two, three)
    }
    assert sum(row["clicks"] for row in state.values()) == 300
    assert state[two]["best_probability"] > 0.99 and state[two]["share"] > 0.9
    # The worker's refresh reads the landers' numbers from the columnar history (no rollup keeps the
    # lander): the same numbers, from the history, not the row store's clicks.
    from models.reporting import bandits
    from models.reporting.history import HistoryFiles, append_history

    files = HistoryFiles.of(settings)
    append_history(db, files)
    read: list[list[str]] = []

    def spied(*args, **kwargs):
        report = run_report(*args, **kwargs)
        read.append(report.sources)
        return report

    run_report = bandits.run_report
    monkeypatch.setattr(bandits, "run_report", spied)
    assert refresh_bandits(db, history=files) == 1
    again = {row["lander"]: row for row in stream_shares(db, stream_id, "lander")}
    assert {lander: (row["clicks"], row["conversions"]) for lander, row in again.items()} == {
        lander: (row["clicks"], row["conversions"]) for lander, row in state.items()
    }
    assert any("history" in sources for sources in read), read
    monkeypatch.undo()
    assert min(row["share"] for row in state.values()) >= round(EXPLORATION / 3, 4)  # The floor.
    assert stream_shares(db, stream_id) == []  # Its offers rotate by weight: no offer state.
    clock.advance(5)  # The worker looks at bandit_version every 2 s: no restart, no config change.
    second = Counter(d.lander_id for d in send(tracker, 300, 300))
    assert second[two] >= 240, second  # ~93 % expected.
    assert second[one] > 0 and second[three] > 0  # Still explored.


def test_a_paused_lander_gets_no_share_a_bad_rotation_is_refused_and_leaving_the_bandit_forgets(db, settings):
    from workers.runtime.tasks import create_huey

    made = lander_campaign(
        db,
        "lpb",
        [{"url": REMOTE.format(n=0)}, {"url": REMOTE.format(n=1), "weight": 0}, {"url": REMOTE.format(n=2)}],
    )
    one, _, three = made["lander_ids"]
    stream_id = made["stream_id"]
    with pytest.raises(AdminError, match="Lander rotation"):
        update_stream(db, stream_id, lander_rotation="unvisited")
    update_stream(db, stream_id, lander_rotation="bandit_epc")
    create_huey(settings, immediate=True).refresh_bandits()  # The minutely task, run as its consumer would.
    state = stream_shares(db, stream_id, "lander")
    assert sorted(row["lander"] for row in state) == [one, three]
    assert all(abs(row["share"] - 0.5) < 0.1 for row in state)  # No clicks: even odds.
    update_stream(db, stream_id, lander_rotation="weight")
    assert refresh_bandits(db) == 0
    assert stream_shares(db, stream_id, "lander") == []


def test_the_cli_and_the_api_set_the_lander_rotation_and_show_its_shares(db, lanner, env):
    made = lander_campaign(db, "lpb", [{"url": REMOTE.format(n=n)} for n in range(2)])
    stream_id = made["stream_id"]
    lanner("stream", "update", str(stream_id), "--lander-rotation", "bandit_cr")
    refresh_bandits(db)
    shown = json.loads(lanner("stream", "split-test", str(stream_id), "--landers", "--json").stdout)
    assert [row["lander"] for row in shown["bandit"]] == made["lander_ids"]
    assert shown["bandit"] == stream_shares(db, stream_id, "lander")

    from app import create_admin_app
    from settings import load_settings

    admin = InProcessApp(create_admin_app(load_settings(env), db=db), Clock(time.time()))
    key = {"X-Api-Key": read_secret(db, "api_key")}
    status, _, body = request(admin, f"/api/v1/streams/{stream_id}/split-test?arms=lander", key)
    answer = json.loads(body)
    assert status == 200 and answer["lander_rotation"] == "bandit_cr" and answer["arm_kind"] == "lander"
    assert [row["lander"] for row in answer["bandit"]] == made["lander_ids"]
    status, _, body = request(admin, f"/api/v1/streams/{stream_id}/split-test", key)
    assert status == 200 and json.loads(body)["bandit"] == []  # The offers' side: none.
    headers = {**key, "Content-Type": "application/json"}
    for rotation, expected in (("bandit_epc", 200), ("unvisited", 400)):
        body = json.dumps({"lander_rotation": rotation}).encode()
        status, _, answered = request(admin, f"/api/v1/streams/{stream_id}", headers, "PATCH", body)
        assert status == expected, answered
    status, _, body = request(admin, f"/api/v1/streams/{stream_id}", key)
    assert status == 200 and json.loads(body)["lander_rotation"] == "bandit_epc"
    # The panel's stream editor: the rotation chosen, the landers' shares as stored.
    add_user(db, "anna", "admin", PASSWORD)
    status, _, page = get(admin, f"/panel/campaigns/{made['campaign_id']}/streams/{stream_id}", log_in(admin))
    assert status == 200 and "<option selected>bandit_epc</option>" in page
    table = page.split('id="lander-bandit-shares"', 1)[1].split("</table>", 1)[0]
    assert all(f"<td>#{lander}</td>" in table for lander in made["lander_ids"])
