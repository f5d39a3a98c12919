"""The closed vocabularies of the domain, in one module with no imports.

The CLI's options (click.Choice), the services' checks and the tables name these; the CLI imports
this module when it starts, so it must stay free of imports (no Peewee in `lanner serve`'s master).
"""

from __future__ import annotations

CAMPAIGN_STATUSES = ("active", "paused", "archived")
OFFER_STATUSES = ("active", "paused", "archived")
NETWORK_STATUSES = ("active", "archived")  # An archived affiliate network's postbacks still count.
# Which status changes a network's postbacks may make: the usual forward ones, or any (a network that
# corrects itself either way); and how it sends rebills (models/conversions/postbacks.py).
NETWORK_STATUS_CHANGES = ("forward", "any")
NETWORK_REBILLS = ("own_tid", "repeat_sale")
ROTATIONS = ("position", "weight")
STREAM_TYPES = ("intercepting", "regular", "fallback")
STREAM_ACTIONS = ("offers", "redirect", "html", "not_found", "campaign")
STREAM_STATUSES = ("active", "disabled", "deleted")
OFFER_ROTATIONS = ("weight", "unvisited", "bandit_cr", "bandit_epc")
# A lander's bandit_cr is its click-through to the offer (LP CTR); bandit_epc its earnings per click.
LANDER_ROTATIONS = ("weight", "bandit_cr", "bandit_epc")
# The rate a split test's verdict judges: CR (conversions / clicks), or a lander's LP CTR (LP clicks /
# lander views).
SPLIT_TEST_METRICS = ("cr", "lp_ctr")
REDIRECT_TYPES = ("http", "meta", "js")  # A 302, or a 200 page with a meta refresh / a script.
DEFAULT_ACTIONS = ("not_found", "redirect", "blank")  # When no stream matches.
FILTER_MODES = ("and", "or")
# What the traffic source charges: per click, per unique click, per thousand clicks, per lead or
# sale, or a share of revenue. A click URL's `cost=` parameter overrides the per-click models.
COST_MODELS = ("cpc", "cpuc", "cpm", "cpa", "cps", "revshare")
SUB_ID_SLOTS = 30  # sub_id_1 .. sub_id_30 on every click.
# A conversion's status; a network's other words are mapped to these (README, "Statuses").
CONVERSION_STATUSES = ("lead", "sale", "rejected", "rebill", "trash")
# The ad platforms whose conversion APIs a connection sends to (models/conversions/platforms/), and a
# connection's states: a paused one queues nothing new and holds what it had queued until resumed.
PLATFORMS = ("meta", "tiktok", "google_ads")
CONNECTION_STATUSES = ("active", "paused")
SPEND_PLATFORMS = ("meta", "propellerads", "tiktok")  # Spend pulled from (models/reporting/spend/).
SPEND_SYNC_STATES = ("running", "done", "failed")
POSTBACK_METHODS = ("GET", "POST")  # How an outbound postback is sent.
SOURCE_STATUSES = ("active", "archived")  # An archived traffic source stays on its campaigns; none picks it.
DOMAIN_STATUSES = ("active", "archived")  # An archived domain answers as an unknown host; its cert stays.
# What a received postback became, as logged and answered.
POSTBACK_VERDICTS = (
    "created",
    "updated",
    "duplicate",
    "refused",
    "parked",
    "expired",
    "invalid",
    "forbidden",
    "failed",
)
REPORT_PRESETS = (
    "today",
    "yesterday",
    "last_7_days",
    "last_30_days",
    "this_week",
    "this_month",
    "last_month",
    "all_time",
)
# Accounts (models/accounts/): what a user may do, and what an API key lets its holder do.
ROLES = ("admin", "buyer", "viewer")
API_KEY_SCOPES = ("read", "write")
