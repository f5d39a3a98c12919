"""Spend pulled from traffic sources (issue 30, point 2): each spend connection's daily spend, read from
the platform's reporting API (meta.py, propellerads.py, tiktok.py: each builds its requests and reads
their answers into SpendRows, fetch.py's), mapped onto Lanner campaigns and a click parameter and
written as cost sets (sync.py); connections.py is the library the CLI, the API and the panel call.
"""
