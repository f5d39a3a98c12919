"""Numbered migrations, `NNNN_slug.py`, each exposing `apply(db)`; run by models/migrations/runner.py."""
