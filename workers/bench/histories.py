"""Conversion histories (issue 32): random postback histories, and an offline checker of what one did.

Jepsen/Elle in spirit, for postbacks. A **history** is every postback a client sent, in the order it
sent them, each with its send time, its answer (status code, body) and whether it was a retry. The
generator makes the plan (`generate_history`); the runner (workers/bench/historyrun.py) replays it
concurrently over HTTP and records the answers; `check_history` is a pure function of the recorded
history, the final conversion rows and the report rows, and returns the anomalies it finds:

- **double-counted**: a (subid, tid) held by more than one conversion row, or created twice;
- **illegal transition**: the statuses accepted for one conversion (`created`, `updated`) do not form one
  path of legal changes (models/conversions/postbacks.py ALLOWED_CHANGES), or contradict the order the
  client saw them answered in; a status a row holds that no accepted postback asked for;
- **lost**: a 2xx postback (created, updated, duplicate) whose effect is not in its row: the row is gone,
  or holds a status that is neither the postback's nor a legal successor of it;
- **wrongly refused**: a refusal of a change the row's final status still allows (statuses only move
  forward, so it was allowed when it was refused);
- **phantom**: a row no sent postback asked for (its subid, tid and first status), or a conversion for a
  subid that has no click;
- **unexpected answer**: an answer that is neither a 2xx nor "try again" (503 or no answer while a server
  is away), or a 2xx whose verdict is not one a postback can get;
- **report total**: a report total (by campaign, by offer: leads, sales, rejected, rebills, revenue) that is
  not the recount of the raw conversion rows.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from models.conversions.postbacks import ALLOWED_CHANGES, BUILTIN_ALIASES
from models.tables.conversion import LEAD, REBILL, REJECTED, SALE, TRASH

# Statuses only move forward: lead, then sale (a rebill starts there), then rejected or trash.
RANK = {LEAD: 0, SALE: 1, REBILL: 1, REJECTED: 2, TRASH: 2}
# What a network is told to try again with: a 503 (busy, or its database away), no answer at all (a node
# restarting), or a 502/504 of a proxy in front.
TRY_AGAIN = frozenset({0, 502, 503, 504})
ACCEPTING = frozenset({"created", "updated", "duplicate"})
VERDICTS_2XX = frozenset({"created", "updated", "duplicate", "refused", "parked"})
REPORT_METRICS = ("leads", "sales", "rejected", "rebills", "revenue")
CURRENCIES = ("USD", "EUR", "GBP")  # The runner sets a rate for each (USD is the report currency).
# The runner maps these words for network NETWORK (`lanner postback status map WORD STATUS --network`).
NETWORK = "histnet"
NETWORK_WORDS = {"ok1": SALE, "wait1": LEAD, "nope1": REJECTED}
# Words of each status a generated postback uses: the status itself, built-in aliases, the network's.
WORDS: dict[str, tuple[str, ...]] = {
    status: (status, *sorted(word for word, to in BUILTIN_ALIASES.items() if to == status)[:3])
    for status in (LEAD, SALE, REJECTED, TRASH, REBILL)
}


@dataclass
class Operation:
    """One postback sent (or to send): what it asked for and what it was answered."""

    index: int
    subid: str
    tid: str
    status: str  # The status its word maps to: what the checker expects of it.
    word: str = ""  # The `status` parameter as sent ("" sends none: a sale).
    payout: str = ""  # As sent ("": none, the offer's payout).
    currency: str = ""
    network: str = ""  # `from=`
    in_url: dict[str, str] = field(default_factory=dict)  # e.g. {"sale_status": "done"}
    method: str = "GET"
    is_retry: bool = False
    retry_of: int | None = None  # The index of the operation this one repeats.
    node: int = 0
    sent_at: float = 0.0  # time.monotonic() of the client
    answered_at: float = 0.0
    code: int = 0  # 0: no answer (a connection refused or cut).
    body: str = ""

    def params(self) -> dict[str, str]:
        params = {"subid": self.subid, "tid": self.tid}
        for name, value in (("status", self.word), ("payout", self.payout), ("currency", self.currency)):
            if value:
                params[name] = value
        if self.network:
            params["from"] = self.network
        return {**params, **self.in_url}

    @property
    def answer(self) -> dict[str, Any]:
        try:
            answer = json.loads(self.body)
        except ValueError:
            return {}
        return answer if isinstance(answer, dict) else {}

    @property
    def verdict(self) -> str:
        return str(self.answer.get("verdict", "")) if self.is_2xx else ""

    @property
    def conversion_id(self) -> int | None:
        value = self.answer.get("conversion_id")
        return value if isinstance(value, int) else None

    @property
    def is_2xx(self) -> bool:
        return 200 <= self.code < 300

    @property
    def is_try_again(self) -> bool:
        return self.code in TRY_AGAIN

    def again(self, index: int) -> Operation:
        """The same postback sent again, as a network retries (unsent)."""
        plan = {name: value for name, value in asdict(self).items() if name not in ANSWER_FIELDS}
        return Operation(**{**plan, "index": index, "is_retry": True, "retry_of": self.index})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        answer = f"{self.code} {self.verdict}".strip() if self.code else "no answer"
        retry = f" (retry of #{self.retry_of})" if self.is_retry else ""
        return f"#{self.index} {self.subid}/{self.tid} {self.status} → {answer}{retry}"


ANSWER_FIELDS = ("index", "is_retry", "retry_of", "node", "sent_at", "answered_at", "code", "body")


@dataclass(frozen=True)
class ConversionRow:
    """What the checker reads of one stored conversion."""

    id: int
    subid: str
    tid: str
    status: str
    original_status: str
    report_payout: float | None
    campaign_id: int | None
    offer_id: int | None


@dataclass
class Anomaly:
    kind: str
    detail: str
    operations: list[int] = field(default_factory=list)  # Indexes into the history.

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- the generator ------------------------------------------------------------------------------


def _unknown_subid(rng: random.Random) -> str:
    """A subid of Lanner's form that no click has (its time part is in 1970)."""
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    return "000000000" + "".join(rng.choice(alphabet) for _ in range(8))


def generate_history(
    subids: list[str], operations: int, *, seed: int = 0, late: list[str] | None = None
) -> list[Operation]:
    """A plan of `operations` postbacks over the clicks `subids` (unsent; the runner sends them in order,
    several at once). Leads that become sales, then rejected (or trash); sales straight away; rebills
    (each its own tid) sent close together for one subid; a tid reused for another status; exact repeats
    (a network's retry, or its duplicate); illegal orders (a rejected conversion approved, a sale sent
    back to lead, a lead become a rebill); postbacks for subids no click has; payouts in several
    currencies; words mapped by the built-in aliases, by the network's status maps and in the URL; the
    same postback several times in a row (sent at once, to different nodes); postbacks without a tid (a
    lead sent without one, its sale with one: the same conversion). `late`: clicks made just before the
    history, perhaps not landed yet, which its first tenth prefers (their postbacks may be parked, then
    matched when they land)."""
    rng = random.Random(seed)
    plan: list[Operation] = []
    live: list[tuple[str, str, str]] = []  # (subid, tid, the last status asked for)
    tids = iter(range(1, 1 << 30))

    def add(subid: str, tid: str, status: str, **extra: Any) -> Operation:
        op = Operation(len(plan), subid, tid, status, **extra)
        roll = rng.random()
        if status == REBILL or roll < 0.6:
            op.word = rng.choice(WORDS[status])
        elif roll < 0.75 and status in NETWORK_WORDS.values():
            op.word = next(word for word, to in NETWORK_WORDS.items() if to == status)
            op.network = NETWORK
        elif roll < 0.85:
            op.word = f"x{status}"  # Keitaro's in-URL map: `sale_status=xsale`.
            op.in_url = {f"{status}_status": f"other,{op.word}"}
        elif status == SALE:
            op.word = ""  # No status: a sale.
        else:
            op.word = status
        if rng.random() < 0.8:
            op.payout = f"{rng.randrange(1, 5000) / 100:.2f}"
            op.currency = rng.choice(("", *CURRENCIES))
        op.method = "POST" if rng.random() < 0.2 else "GET"
        plan.append(op)
        return op

    def new_tid() -> str:
        return f"t{next(tids)}"

    late = late or []
    untagged: set[str] = set()  # Subids sent a postback without a tid.
    while len(plan) < operations:
        roll = rng.random()
        subid = rng.choice(late if late and len(plan) < operations // 10 else subids)
        if rng.random() < 0.06 and subid not in untagged:  # A lead without a tid, then its sale with one.
            untagged.add(subid)
            add(subid, "", LEAD)
            add(subid, new_tid(), rng.choice((SALE, SALE, REJECTED)))
            continue
        if rng.random() < 0.04 and plan:  # The same postback at once, a few times (to different nodes).
            earlier = plan[-1]
            for _ in range(rng.randrange(2, 5)):
                plan.append(earlier.again(len(plan)))
                plan[-1].is_retry, plan[-1].retry_of = False, None
            continue
        if roll < 0.22 or not live:  # A new lead, or a sale straight away.
            status = LEAD if rng.random() < 0.6 else SALE
            tid = new_tid()
            add(subid, tid, status)
            live.append((subid, tid, status))
        elif roll < 0.52:  # The next legal step of a conversion asked for before.
            at = rng.randrange(len(live))
            subid, tid, last = live[at]
            following = sorted(ALLOWED_CHANGES.get(last, ())) or [last]
            status = rng.choice(following)
            add(subid, tid, status)
            live[at] = (subid, tid, status)
        elif roll < 0.62:  # Rebills: a burst for one subid, each with its own tid.
            subid = rng.choice(live)[0]
            for _ in range(rng.randrange(2, 5)):
                tid = new_tid()
                add(subid, tid, REBILL)
                live.append((subid, tid, REBILL))
        elif roll < 0.78 and plan:  # The same postback again: a retry, or the network's duplicate.
            earlier = plan[rng.randrange(max(0, len(plan) - 30), len(plan))]
            again = earlier.again(len(plan))
            again.is_retry = rng.random() < 0.5
            again.retry_of = earlier.index if again.is_retry else None
            plan.append(again)
        elif roll < 0.9:  # An illegal order: backwards, or sideways.
            subid, tid, last = rng.choice(live)
            backwards = [
                s for s in (LEAD, SALE, REBILL) if s != last and s not in ALLOWED_CHANGES.get(last, ())
            ]
            add(subid, tid, rng.choice(backwards))
        elif roll < 0.95:  # A tid already used, for another subid's click.
            other, tid, _ = rng.choice(live)
            subid = rng.choice([s for s in subids if s != other] or subids)
            add(subid, tid, SALE)
            live.append((subid, tid, SALE))
        else:  # A subid no click has: parked, and never matched.
            add(_unknown_subid(rng), new_tid(), SALE)
    return plan[:operations]


# -- the checker --------------------------------------------------------------------------------


def _reachable(old: str, new: str) -> bool:
    """`new` is `old`, or a status `old` may legally become (ALLOWED_CHANGES is transitively closed)."""
    return new == old or new in ALLOWED_CHANGES.get(old, frozenset())


def recount(rows: Iterable[ConversionRow], group: str) -> dict[int | None, dict[str, float]]:
    """The report metrics of `rows` per campaign or offer id, counted from the rows themselves."""
    totals: dict[int | None, dict[str, float]] = defaultdict(lambda: dict.fromkeys(REPORT_METRICS, 0))
    names = {LEAD: "leads", SALE: "sales", REJECTED: "rejected", REBILL: "rebills"}
    for row in rows:
        sums = totals[row.campaign_id if group == "campaign" else row.offer_id]
        if row.status in names:
            sums[names[row.status]] += 1
        if row.status in (SALE, REBILL):
            sums["revenue"] += row.report_payout or 0.0
    return totals


def _accept_indeterminate(history: list[Operation], accepted: dict[int, list[Operation]]) -> None:
    """A postback answered "try again" because its database went away during the commit may have been
    stored all the same (the commit's answer was lost, not the commit): its retry is then answered
    `duplicate`. Such a retry's status counts as accepted, from the first attempt's sending on, unless
    another postback already was for that conversion."""
    by_index = {op.index: op for op in history}
    for op in history:
        if op.verdict != "duplicate" or not op.is_retry or op.conversion_id is None:
            continue
        first = op
        while first.retry_of is not None and first.retry_of in by_index:
            first = by_index[first.retry_of]
        if first is op or any(other.status == op.status for other in accepted[op.conversion_id]):
            continue
        accepted[op.conversion_id].append(replace(op, sent_at=first.sent_at))


def check_history(
    history: list[Operation],
    rows: list[ConversionRow],
    reports: dict[str, list[dict[str, Any]]],
    *,
    clicks: Iterable[str] = (),
    settled: Iterable[tuple[str, str, str, str, int | None]] = (),
) -> list[Anomaly]:
    """Every anomaly of a replayed `history` against the final conversion `rows` and the report rows
    (`reports["campaign"]`, `reports["offer"]`: run_report's rows, each with its id under the group's
    name; `"campaign:raw"` and the like: another report by that group, e.g. read from the raw rows).
    `clicks`: the subids that have a click (a conversion of any other is a phantom). `settled`: the
    postback log's parked postbacks matched since, as (subid, tid, status word, verdict, conversion
    id): a postback answered `parked` whose click has landed is judged by the verdict it was settled with
    (at some time after it was sent)."""
    anomalies: list[Anomaly] = []
    by_id = {row.id: row for row in rows}
    clicked = set(clicks)
    matched: dict[tuple[str, str, str], list[tuple[str, int | None]]] = defaultdict(list)
    for subid, tid, word, verdict, conversion_id in settled:
        matched[(subid, tid, word)].append((verdict, conversion_id))
    history = list(history)
    for at, op in enumerate(history):
        if op.verdict == "parked" and op.subid in clicked:
            found = matched.get((op.subid, op.tid, op.word.lower()))
            if not found:
                anomalies.append(
                    Anomaly(
                        "lost",
                        f"{op.describe()}: its click landed, the postback was never matched",
                        [op.index],
                    )
                )
                continue
            verdict, conversion_id = found.pop(0)
            body = json.dumps({"verdict": verdict, "detail": "settled", "conversion_id": conversion_id})
            history[at] = replace(op, body=body, answered_at=math.inf)
    sent: dict[tuple[str, str], list[Operation]] = defaultdict(list)
    accepted: dict[int, list[Operation]] = defaultdict(list)  # conversion id -> created/updated
    for op in history:
        sent[(op.subid, op.tid)].append(op)
        if op.is_2xx and op.verdict not in VERDICTS_2XX:
            anomalies.append(Anomaly("unexpected answer", f"{op.describe()}: {op.body[:200]}", [op.index]))
        elif not op.is_2xx and not op.is_try_again:
            anomalies.append(Anomaly("unexpected answer", f"{op.describe()}: {op.body[:200]}", [op.index]))
        if op.verdict in ("created", "updated"):
            if op.conversion_id is None:
                anomalies.append(
                    Anomaly("unexpected answer", f"{op.describe()} names no conversion", [op.index])
                )
            else:
                accepted[op.conversion_id].append(op)
    _accept_indeterminate(history, accepted)

    # Each (subid, tid) counted once.
    keyed: dict[tuple[str, str], list[ConversionRow]] = defaultdict(list)
    for row in rows:
        keyed[(row.subid, row.tid)].append(row)
    for key, group in keyed.items():
        if len(group) > 1:
            ids = ", ".join(str(row.id) for row in group)
            ops = [op.index for op in sent.get(key, [])]
            anomalies.append(
                Anomaly("double-counted", f"{key[0]}/{key[1]} is in {len(group)} rows ({ids})", ops)
            )

    # The statuses accepted for each conversion: one path of legal changes, in the order answered.
    for conversion_id, ops in sorted(accepted.items()):
        indexes = [op.index for op in ops]
        created = [op for op in ops if op.verdict == "created"]
        if len(created) > 1:
            anomalies.append(
                Anomaly("double-counted", f"conversion {conversion_id} created {len(created)} times", indexes)
            )
        chain = sorted(ops, key=lambda op: (RANK.get(op.status, 9), op.verdict != "created"))
        statuses = [op.status for op in chain]
        if len(set(statuses)) < len(statuses):
            anomalies.append(
                Anomaly("illegal transition", f"conversion {conversion_id} accepted {statuses}", indexes)
            )
        elif created and chain[0].verdict != "created":
            anomalies.append(
                Anomaly(
                    "illegal transition",
                    f"conversion {conversion_id} created as {created[0].status}, then accepted {statuses}",
                    indexes,
                )
            )
        for before, after in zip(chain, chain[1:], strict=False):
            if after.status not in ALLOWED_CHANGES.get(before.status, frozenset()):
                anomalies.append(
                    Anomaly(
                        "illegal transition",
                        f"conversion {conversion_id}: {before.status} → {after.status} accepted",
                        [before.index, after.index],
                    )
                )
        for i, early in enumerate(chain):
            for late in chain[i + 1 :]:
                if late.answered_at < early.sent_at:  # Answered before the other was even sent.
                    anomalies.append(
                        Anomaly(
                            "illegal transition",
                            f"conversion {conversion_id}: {late.status} accepted, then {early.status}",
                            [late.index, early.index],
                        )
                    )
        row = by_id.get(conversion_id)
        if row is not None and chain and len(set(statuses)) == len(statuses):
            if row.status != chain[-1].status or (created and row.original_status != chain[0].status):
                anomalies.append(
                    Anomaly(
                        "illegal transition",
                        f"conversion {conversion_id} holds {row.original_status} → {row.status}, "
                        f"but the postbacks accepted {statuses}",
                        indexes,
                    )
                )

    # Nothing accepted is missing; nothing refused that was allowed.
    for op in history:
        if not op.is_2xx:
            continue
        row = by_id.get(op.conversion_id) if op.conversion_id is not None else None
        if op.verdict in ACCEPTING:
            if row is None or row.subid != op.subid or op.tid not in ("", row.tid):
                anomalies.append(
                    Anomaly("lost", f"{op.describe()}: conversion {op.conversion_id} not stored", [op.index])
                )
            elif not _reachable(op.status, row.status):
                anomalies.append(
                    Anomaly("lost", f"{op.describe()}: conversion {row.id} holds {row.status}", [op.index])
                )
        elif op.verdict == "refused" and row is not None and op.status in ALLOWED_CHANGES.get(row.status, ()):
            anomalies.append(
                Anomaly(
                    "wrongly refused", f"{op.describe()}: conversion {row.id} holds {row.status}", [op.index]
                )
            )

    # No phantoms: every row was asked for by a postback sent (any answer: a 503 may follow a commit).
    for row in rows:
        ops = sent.get((row.subid, row.tid), []) + (sent.get((row.subid, ""), []) if row.tid else [])
        asked = {op.status for op in ops}
        if row.original_status not in asked or row.status not in asked:
            anomalies.append(
                Anomaly(
                    "phantom",
                    f"conversion {row.id} {row.subid}/{row.tid} {row.original_status} → {row.status}: "
                    f"the postbacks sent asked for {sorted(asked) or 'nothing'}",
                    [op.index for op in ops],
                )
            )
        elif clicks and row.subid not in clicked:
            anomalies.append(Anomaly("phantom", f"conversion {row.id}: {row.subid} has no click", []))

    # Every report total is the recount of the raw rows.
    for name, report_rows in reports.items():
        group = name.split(":")[0]  # "offer:raw": the report by offer read from the raw rows.
        expected = recount(rows, group)
        got = {row.get(group): row for row in report_rows}
        for key in sorted(set(expected) | set(got), key=str):
            counted, reported = expected.get(key), got.get(key)
            for metric in REPORT_METRICS:
                want = counted[metric] if counted else 0
                have = reported.get(metric, 0) if reported else 0
                if abs((have or 0) - want) > 1e-6:
                    ops = [
                        op.index
                        for op in history
                        if op.verdict in ("created", "updated")
                        and (row := by_id.get(op.conversion_id or 0)) is not None
                        and (row.campaign_id if group == "campaign" else row.offer_id) == key
                    ]
                    anomalies.append(
                        Anomaly(
                            "report total",
                            f"{name} {key}: {metric} reported {have}, recounted {want:g}",
                            ops,
                        )
                    )
    return anomalies


def summarise(history: list[Operation], anomalies: list[Anomaly]) -> dict[str, Any]:
    """Counts of one checked history, for the bench's JSON and table."""
    verdicts: dict[str, int] = defaultdict(int)
    for op in history:
        verdicts[op.verdict or (str(op.code) if op.code else "no answer")] += 1
    kinds: dict[str, int] = defaultdict(int)
    for anomaly in anomalies:
        kinds[anomaly.kind] += 1
    samples = sorted({f"{op.code} {op.body[:160]}" for op in history if not op.is_2xx})[:5]
    return {
        "operations": len(history),
        "not_2xx_samples": samples,
        "retries": sum(op.is_retry for op in history),
        "try_again": sum(op.is_try_again for op in history),
        "verdicts": dict(sorted(verdicts.items())),
        "anomalies": len(anomalies),
        "anomaly_kinds": dict(sorted(kinds.items())),
    }
