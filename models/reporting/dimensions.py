"""The click dimensions a report groups and filters by: each name and the click column it reads.

models/reporting/reports.py decides with these which source can answer a report; the report store
(models/store/sqlite/reports.py) writes its SQL from them, so a name it does not know never
becomes an identifier.
"""

from __future__ import annotations

from models.choices import SUB_ID_SLOTS

# Grouping / filter name -> the click column it reads.
DIMENSION_COLUMNS: dict[str, str] = {
    "campaign": "campaign_id",
    "stream": "stream_id",
    "offer": "offer_id",
    "source": "source",
    "country": "country",
    "device": "device_type",
    "os": "os",
    "browser": "browser",
    "language": "language",
    **{f"sub_id_{n}": f"sub_id_{n}" for n in range(1, SUB_ID_SLOTS + 1)},
    "referrer_domain": "referrer",  # The referrer URL's host without "www.".
}
# The dimensions that are ids of a campaign, stream or offer: their filters take integers, and a
# conversion keeps its own copy of them (indexed), which its filters read.
ID_GROUPS = ("campaign", "stream", "offer")
