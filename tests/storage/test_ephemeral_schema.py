"""The ephemeral store's schema (``storage.ephemeral.create_schema``: created from the models, stamped at head)
is the schema the migrations build: same tables, columns, indexes and revision."""

from __future__ import annotations

from sqlalchemy import inspect

from subgate.storage.db import make_engine, schema_status, upgrade
from subgate.storage.ephemeral import EphemeralStore, create_schema


def shape(url: str) -> dict:
    engine = make_engine(url)
    try:
        inspector = inspect(engine)
        return {
            table: (
                [(c["name"], str(c["type"]), c["nullable"], c["primary_key"]) for c in inspector.get_columns(table)],
                sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table)),
                sorted(str(u["column_names"]) for u in inspector.get_unique_constraints(table)),
                sorted(str(f["referred_table"]) for f in inspector.get_foreign_keys(table)),
            )
            for table in inspector.get_table_names()
        }
    finally:
        engine.dispose()


def test_created_schema_equals_the_migrated_one(tmp_path):
    created, migrated = f"sqlite:///{tmp_path / 'created.db'}", f"sqlite:///{tmp_path / 'migrated.db'}"
    create_schema(created)
    upgrade(migrated)
    assert shape(created) == shape(migrated)
    engine = make_engine(created)
    try:
        current, head = schema_status(engine)
    finally:
        engine.dispose()
    assert current == head is not None


def test_store_folder_is_removed(tmp_path):
    store = EphemeralStore(tmp_path)
    assert (store.folder / "subgate.db").exists()
    store.remove()
    assert not store.folder.exists()
