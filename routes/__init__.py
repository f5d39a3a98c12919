"""Falcon resources: the campaign URL (click), health, and the error handlers."""
