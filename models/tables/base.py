"""The Peewee base model, bound to the process's database proxy (models/store/database.py)."""

from peewee import Model

from models.store.database import db


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
