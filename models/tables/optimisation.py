"""Labels and automation rules (migration 0025): the rows models/optimisation/ keeps."""

from __future__ import annotations

import time

from peewee import AutoField, BigIntegerField, IntegerField, TextField

from models.tables.base import BaseModel


def _now_ms() -> int:
    return int(time.time() * 1000)


class Label(BaseModel):
    id = AutoField()
    scope = TextField()  # campaign, source
    scope_id = BigIntegerField()  # The campaign's or the traffic source's id.
    slot = IntegerField()  # The sub_id slot the value is in (1..30).
    parameter = TextField()  # The name it was given by: zoneid, or sub_id_3.
    value = TextField()
    label = TextField()  # whitelist, blacklist
    rule_id = BigIntegerField(null=True)  # The rule that set it; NULL: set by hand.
    actor = TextField(default="")
    created_at = BigIntegerField(default=_now_ms)
    updated_at = BigIntegerField(default=_now_ms)


class Rule(BaseModel):
    id = AutoField()
    name = TextField(unique=True)
    campaign_ids = TextField()  # JSON list of ids.
    dimension = TextField()  # sub_id_N, a source's parameter name, offer, lander or stream.
    window_hours = IntegerField()
    is_today_excluded = IntegerField(default=0)  # The window ends at today's midnight in `timezone`.
    timezone = TextField(default="UTC")
    conditions = TextField()  # JSON list of [metric, operator, number].
    action = TextField()  # blacklist, whitelist, pause, pause_at_source, notify
    max_actions = IntegerField()  # At most this many actions a run.
    is_enabled = IntegerField(default=1)
    last_run_at = BigIntegerField(null=True)
    channel_id = BigIntegerField(null=True)  # The alert channel told of what it did (migration 0029).
    created_at = BigIntegerField(default=_now_ms)
    updated_at = BigIntegerField(default=_now_ms)


class RuleAction(BaseModel):
    id = AutoField()
    rule_id = BigIntegerField()
    campaign_id = BigIntegerField()
    target = TextField()  # The value (a zone id) or the stream/offer/lander id acted on.
    action = TextField()
    reason = TextField()  # The conditions, as they read when it acted.
    numbers = TextField()  # JSON: the report row's metrics then.
    undo = TextField()  # JSON: what puts it back (the label row, or the weights before).
    created_at = BigIntegerField(default=_now_ms)
    undone_at = BigIntegerField(null=True)
    undone_by = TextField(default="")
    # The alert that told of it; NULL: one is due (its rule has a channel); 0: none is.
    alert_id = BigIntegerField(null=True)
    # done; failed (the source refused: retried next run) or skipped (nothing to act through) (0031).
    state = TextField(default="done")
    answer = TextField(default="")  # What the source answered, or why it was not done.

    class Meta:
        table_name = "rule_action"
