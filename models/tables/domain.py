"""Domains: the host names campaigns are served on, their parked root campaign and certificate."""

from __future__ import annotations

import time

from peewee import AutoField, BigIntegerField, ForeignKeyField, IntegerField, ObjectIdAccessor, TextField

from models.tables.base import BaseModel
from models.tables.campaign import Campaign


def _now_ms() -> int:
    return int(time.time() * 1000)


class Domain(BaseModel):
    id = AutoField()
    name = TextField(unique=True)  # Lowercased, no port, no trailing dot.
    root_campaign_id = IntegerField(null=True)  # The campaign `GET /` on this domain runs; NULL: none.
    is_https = IntegerField(default=1)  # Get (and renew) a certificate, serve HTTPS.
    redirect_http = IntegerField(default=0)  # Plain HTTP answers 301 to HTTPS (once a cert exists).
    status = TextField(default="active")  # active, archived
    cert_state = TextField(default="none")  # none, valid, failed
    cert_expires_at = BigIntegerField(null=True)  # UTC ms, from the certificate itself.
    cert_error = TextField(default="")  # certbot's last words when it failed.
    created_at = BigIntegerField(default=_now_ms)
    updated_at = BigIntegerField(default=_now_ms)


class CampaignDomain(BaseModel):
    id = AutoField()
    campaign = ForeignKeyField(Campaign, backref="domain_links", column_name="campaign_id")
    domain = ForeignKeyField(Domain, backref="campaign_links", column_name="domain_id")
    campaign_id: ObjectIdAccessor  # The columns' values, which peewee adds for the foreign keys.
    domain_id: ObjectIdAccessor
    position = IntegerField(default=0)  # The first is the campaign URL shown.

    class Meta:
        table_name = "campaign_domain"
        indexes = ((("campaign", "domain"), True),)
