"""Lanner's data layer: the Peewee database handle, models, hot-path SQL and migrations."""

from models.database import db, open_database

__all__ = ["db", "open_database"]
