"""Conversions sent to the ad platforms' conversion APIs (issue 30): Meta's Conversions API, TikTok's
Events API, Google Ads' offline click conversions.

A connection (models/conversions/platforms/connections.py) maps conversion statuses to a platform's
events; each event is a row of the outbound postback queue (models/store/deliveries.py), sent in
batches by models/conversions/platforms/sending.py through one module per platform (meta.py,
tiktok.py, google_ads.py), each of which only builds a request and reads the answer.
"""
