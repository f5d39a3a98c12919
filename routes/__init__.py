"""Falcon resources, the HTTP edge: the campaign URL (click.py), postbacks and pixels (postback.py),
the report API (api.py), health (health.py) and the error handler (errors.py). They parse and answer;
the domain (models/) decides."""
