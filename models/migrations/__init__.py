"""Numbered migrations, `NNNN_slug.py`, each exposing `apply(db)`; run by models/migrate.py."""
