"""Landing pages: a page the visitor sees before the offer, and the landers a stream sends to."""

from __future__ import annotations

import time

from peewee import AutoField, BigIntegerField, ForeignKeyField, IntegerField, ObjectIdAccessor, TextField

from models.tables.base import BaseModel
from models.tables.campaign import Stream


def _now_ms() -> int:
    return int(time.time() * 1000)


class Lander(BaseModel):
    id = AutoField()
    name = TextField(unique=True)
    kind = TextField(default="remote")  # remote: `url` on the buyer's host; local: a zip under `folder`.
    url = TextField(default="")  # Remote: the page's URL template, with macros ({subid}, {offer}, ...).
    folder = TextField(default="")  # Local: its directory under DATA_DIR/landers (static files only).
    notes = TextField(default="")
    status = TextField(default="active")  # active, archived
    owner_id = IntegerField(null=True)  # A user (app_user); NULL: owned by nobody, admins only.
    created_at = BigIntegerField(default=_now_ms)
    updated_at = BigIntegerField(default=_now_ms)


class StreamLander(BaseModel):
    id = AutoField()
    stream = ForeignKeyField(Stream, backref="lander_links", column_name="stream_id")
    lander = ForeignKeyField(Lander, backref="stream_links", column_name="lander_id")
    stream_id: ObjectIdAccessor  # The columns' values, which peewee adds for the foreign keys.
    lander_id: ObjectIdAccessor
    weight = IntegerField(default=100)
    status = TextField(default="active")

    class Meta:
        table_name = "stream_lander"
        indexes = ((("stream", "lander"), True),)
