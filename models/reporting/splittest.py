"""A stream's split test: its offers (or landers) side by side with a verdict that peeking cannot fool.

The arms are the stream's offers (or landers) that have clicks in the range, with their clicks,
conversions (leads and sales, at most one a click: a rebill is not another conversion of the click) and
conversion rate, read as any report is (models/reporting/reports.py); a lander also with its views
(clicks sent to it), LP clicks (those that went on to the offer) and LP CTR. The verdict is on one
metric: an offer's CR; a lander's LP CTR by default, as landers are chosen to make visitors click
through (its CR on request, `metric="cr"`). The leader is the arm with the best rate; it is the winner
once the mixture SPRT (models/reporting/sequential.py) tells it apart from every other arm, each pair at
alpha divided by the number of pairs of the test (Bonferroni: the leader is chosen from the same
numbers). Until then the verdict is "no winner yet", which is an answer: keep the test running. Arms
the leader beats already are marked behind.

The guarantee: with equal rates, the chance that this verdict EVER names a winner, however often it is
read, is at most alpha (5 %); docs/optimisation-rotation.md shows it by simulation, beside the naive
z-test that picks a false winner in most tests read every 100 clicks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from peewee import Database

from models.errors import LannerError, NotFoundError
from models.reporting.history import HistoryFiles
from models.reporting.reports import ReportQuery, run_report
from models.reporting.sequential import ALPHA, judge
from models.tables.campaign import Stream

ARM_KINDS = ("offer", "lander")
# The rate a verdict judges: (trials, successes) of an arm, and its name in a sentence.
# The keys are models/choices.py's SPLIT_TEST_METRICS (the CLI's and the API's choices).
METRICS = {"cr": ("clicks", "conversions", "CR"), "lp_ctr": ("lp_views", "lp_clicks", "LP CTR")}
DEFAULT_METRIC = {"offer": "cr", "lander": "lp_ctr"}
WINNER, NO_WINNER_YET = "winner", "no_winner_yet"


class SplitTestError(LannerError, ValueError):
    """A split test that cannot be made; the message is one sentence for the user."""


class SplitTestNotFound(SplitTestError, NotFoundError):
    """No such stream."""


@dataclass
class Arm:
    id: int
    name: str
    clicks: int
    conversions: int
    cr: float | None  # Percent.
    # A lander's: clicks sent to it, those that went on to the offer, the share that did (percent); None
    # for an offer.
    lp_views: int | None = None
    lp_clicks: int | None = None
    lp_ctr: float | None = None
    # Against the leader (None for the leader itself): the leader's rate (of the test's metric) minus this
    # arm's, in points,
    # with its always-valid p-value and confidence sequence (points).
    difference: float | None = None
    p_value: float | None = None
    low: float | None = None
    high: float | None = None
    is_behind: bool = False  # The leader beats it already.


@dataclass
class SplitTest:
    stream_id: int
    stream_name: str
    arm_kind: str  # offer, lander
    metric: str  # The rate the verdict judges: cr, lp_ctr.
    verdict: str  # winner, no_winner_yet
    sentence: str
    alpha: float
    pair_alpha: float  # alpha over the number of pairs compared.
    leader: int | None
    winner: int | None
    arms: list[Arm] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "arms": [asdict(arm) for arm in self.arms]}


def _points(value: float) -> float:
    return round(value * 100, 4)


def split_test(
    db: Database,
    stream_id: int,
    *,
    arm_kind: str = "offer",
    metric: str | None = None,
    since: str | None = None,
    until: str | None = None,
    timezone: str = "UTC",
    alpha: float = ALPHA,
    now: float | None = None,
    history: HistoryFiles | None = None,
) -> SplitTest:
    """The stream's split test over [since, until) (local dates in `timezone`; all its clicks by default),
    judged on `metric` (the arm kind's default: an offer's CR, a lander's LP CTR). `history`: the
    columnar history's files, which a lander test reads (no rollup keeps the lander); None: the row
    store's clicks."""
    if arm_kind not in ARM_KINDS:
        raise SplitTestError(f"A split test compares offers or landers, not {arm_kind!r}.")
    metric = metric or DEFAULT_METRIC[arm_kind]
    if metric not in METRICS:
        raise SplitTestError(f"A split test judges CR or LP CTR (cr, lp_ctr), not {metric!r}.")
    if metric == "lp_ctr" and arm_kind != "lander":
        # An offer is chosen at the LP click, after the lander's view: it has no LP CTR of its own.
        raise SplitTestError("LP CTR judges landers; an offer test is judged on its CR.")
    trials, successes, metric_name = METRICS[metric]
    stream = Stream.get_or_none(Stream.id == stream_id)
    if stream is None or stream.status == "deleted":
        raise SplitTestNotFound(f"There is no stream {stream_id}.")
    report = run_report(
        db,
        ReportQuery(
            group_by=(arm_kind,),
            filters={"stream": (str(stream_id),)},
            since=since,
            until=until,
            timezone=timezone,
        ),
        now=now,
        history=history,
    )
    arms = []
    for row in report.rows:
        if row[arm_kind] is None or not row["clicks"] or not row[trials]:
            continue
        conversions = min(row["leads"] + row["sales"], row["clicks"])
        arm = Arm(
            row[arm_kind],
            row.get(f"{arm_kind}_name") or "",
            row["clicks"],
            conversions,
            round(conversions / row["clicks"] * 100, 4),
        )
        if arm_kind == "lander":
            views = row["lp_views"]
            arm.lp_views, arm.lp_clicks = views, min(row["lp_clicks"], views)
            arm.lp_ctr = round(arm.lp_clicks / views * 100, 4) if views else None
        arms.append(arm)
    judgement = judge([(getattr(arm, trials), getattr(arm, successes)) for arm in arms], alpha)
    arms = [arms[i] for i in judgement.order]
    pair_alpha = judgement.pair_alpha
    test = SplitTest(
        stream.id, stream.name, arm_kind, metric, NO_WINNER_YET, "", alpha, pair_alpha, None, None, arms
    )
    if len(arms) < 2:
        counted = "views" if metric == "lp_ctr" else "clicks"
        test.sentence = (
            f"No winner yet: a split test needs {counted} on two {arm_kind}s or more; "
            f"this stream has them on {len(arms)}."
        )
        return test
    leader = arms[0]
    test.leader = leader.id
    for arm, pair in zip(arms[1:], judgement.pairs, strict=True):
        arm.difference = _points(pair.difference)
        arm.p_value = round(pair.p_value, 6)
        arm.low, arm.high = _points(pair.low), _points(pair.high)
        arm.is_behind = pair.is_decided and pair.difference > 0
    behind = [arm for arm in arms[1:] if arm.is_behind]
    rate = getattr(leader, metric)
    if judgement.is_winner:
        test.verdict, test.winner = WINNER, leader.id
        test.sentence = (
            f"Winner: {arm_kind} {leader.id} ({rate:g} % {metric_name}) beats every other arm "
            f"(always-valid p ≤ {pair_alpha:g} each; the verdict holds however often it is read)."
        )
    else:
        ahead = f"{arm_kind} {leader.id} leads with {rate:g} % {metric_name}, but "
        waiting = len(arms) - 1 - len(behind)
        test.sentence = (
            f"No winner yet: {ahead}{waiting} other arm(s) could still be as good; keep the test running."
        )
    return test
