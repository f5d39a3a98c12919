"""The Peewee base model bound to the module-level `db`."""

from peewee import Model

from models.store.sqlite.database import db


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
