"""Issue 19 item 7: every migration upgrades a store holding an older release's data without losing a row.

For each revision below the head, on SQLite and PostgreSQL: migrate an empty store to that revision, fill every
table it has with the rows of ``tests.support.revision_fixtures`` (generated here, no database files in git),
upgrade to the head, and compare every table column by column with what it held before; then a real
``subgate serve`` on the upgraded store serves the old data: queue messages with their acks and delivery counts,
a durable subscription's backlog, a unicode queue, and a user's login.
"""

from __future__ import annotations

from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, MetaData, inspect, select

from subgate.storage.db import alembic_config, make_engine, schema_status, session_factory, upgrade
from subgate.storage.permissions import assign_role
from tests.support.jms import DURABLE, QUEUE, JmsWire
from tests.support.jms.errors import SaslFailed
from tests.support.revision_fixtures import PASSWORD, QUEUE_BODIES, TOPIC_BODIES, UNICODE_QUEUE, rows_at
from tests.support.server import SubgateProcess

SCRIPT = ScriptDirectory.from_config(alembic_config("sqlite://"))
HEAD = SCRIPT.get_current_head()
OLDER = sorted(r.revision for r in SCRIPT.walk_revisions() if r.revision != HEAD)
SERVED_ON_POSTGRES = {OLDER[0], OLDER[-1]}  # the oldest and the newest; SQLite serves every revision


def fill(engine: Engine, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Insert the rows through the tables as they are at this revision (reflected, not the head's models)."""
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            if rows.get(table.name):
                conn.execute(table.insert(), rows[table.name])


def snapshot(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table but alembic_version, ordered by primary key, as column -> value."""
    metadata = MetaData()
    metadata.reflect(engine)
    found = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            if table.name != "alembic_version":
                ordered = select(table).order_by(*table.primary_key.columns)
                found[table.name] = [dict(row._mapping) for row in conn.execute(ordered)]
    return found


def drain_bodies(consumer: Any) -> list[tuple[Any, int]]:
    got = []
    for _ in range(20):
        consumer.drain(timeout=15)
        batch = consumer.take_buffered()
        if not batch:
            return got
        for received in batch:
            received.accept()
            body = received.body
            got.append((bytes(body) if isinstance(body, memoryview) else body, received.delivery_count))
        consumer.top_up()
    raise AssertionError("the consumer never ran dry")


@pytest.mark.parametrize("revision", OLDER)
def test_upgrade_keeps_every_row_and_the_server_serves_them(store_url, revision, tmp_path):
    upgrade(store_url, revision)
    engine = make_engine(store_url)
    try:
        rows = rows_at(revision)
        assert set(rows) == set(inspect(engine).get_table_names()) - {"alembic_version"}, "a table without fixture"
        fill(engine, rows)
        before = snapshot(engine)
        assert {table: len(found) for table, found in before.items()} == {t: len(r) for t, r in rows.items()}
        upgrade(store_url)
        assert schema_status(engine) == (HEAD, HEAD)
        after = snapshot(engine)
        for table, old_rows in before.items():
            kept = [{column: row[column] for column in old_rows[0]} for row in after[table]]
            assert kept == old_rows, f"{table} changed in the upgrade from {revision}"
        if revision < "0003":  # no grants before 0003: the upgraded store's users need one, as docs/permissions.md says
            with session_factory(engine).begin() as session:
                assign_role(session, "admin", "alice")
    finally:
        engine.dispose()
    if store_url.startswith("postgresql") and revision not in SERVED_ON_POSTGRES:
        return
    server = SubgateProcess(store_url, tmp_path).start()
    try:
        check_served(server, revision)
    finally:
        server.stop()


def check_served(server: SubgateProcess, revision: str) -> None:
    with pytest.raises(SaslFailed):
        JmsWire.connect(server.address, user="alice", password="wrong")
    with JmsWire.connect(server.address, client_id="legacy-app", user="alice", password=PASSWORD) as jms:
        session = jms.session()
        assert drain_bodies(session.consumer("legacy.q", QUEUE)) == [
            (QUEUE_BODIES[2], 3),
            (QUEUE_BODIES[4], 0),
            (QUEUE_BODIES[5], 0),
        ]
        assert drain_bodies(session.consumer(UNICODE_QUEUE, QUEUE)) == [("привет ✓", 0)]
        if revision >= "0002":
            backlog = drain_bodies(session.consumer("legacy/t", DURABLE, name="legacy-sub"))
            assert backlog == [(TOPIC_BODIES[6], 0), (TOPIC_BODIES[7], 0), (TOPIC_BODIES[8], 0)]
