"""Peewee models only: the tables' columns, constraints and indexes."""
