"""A user's column sets and the report builder's remembered grouping (migration 0030), as Peewee
models: models/reporting/columnsets.py reads and writes them."""

from __future__ import annotations

from peewee import AutoField, BigIntegerField, IntegerField, TextField

from models.tables.base import BaseModel


class ColumnSet(BaseModel):
    id = AutoField()
    user_id = BigIntegerField()
    page = TextField()  # A page of models/reporting/columnpages.py (reports, campaigns, ...).
    name = TextField()  # Unique per user and page, case as given.
    columns = TextField()  # The column keys in the order shown, comma-separated.
    sort = TextField(default="")  # Up to two keys, `-` for descending: "-profit,clicks".
    groups = TextField(default="")  # The report builder's levels, comma-separated ('' elsewhere).
    is_default = IntegerField(default=0)  # At most one per user and page.
    created_at = BigIntegerField()

    class Meta:
        table_name = "column_set"
        indexes = ((("user_id", "page", "name"), True),)


class ReportMemory(BaseModel):
    user_id = BigIntegerField(primary_key=True)
    groups = TextField()  # The last levels the user showed, comma-separated.
    updated_at = BigIntegerField()

    class Meta:
        table_name = "report_memory"
