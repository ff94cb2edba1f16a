"""The retention plan (``subgate.pipeline.retention``) on hand-built frames, and the plan applied to real stores
by ``subgate journal compact --plan`` (``storage.compaction``), refused once positions changed under it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from click.testing import CliRunner
from pyspark.testing import assertDataFrameEqual

from subgate.cli.main import main
from subgate.pipeline import lag, retention
from subgate.pipeline.jobs import run_retention
from subgate.pipeline.readers import jdbc_store
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import Ack, AckCursor, JournalMessage
from tests.pipeline.frames import BIG, NOW, acks, ago, cursors, journal, message, subscriptions
from tests.pipeline.test_readers import journal_row

PLAN_SCHEMA = (
    "topic STRING, kind STRING, consumers BIGINT, rows BIGINT, bytes BIGINT, delete_through BIGINT, "
    "free_rows BIGINT, free_bytes BIGINT"
)
DAY = 86_400


def test_the_plan_stops_at_the_first_row_too_young_or_unaccepted_per_address(spark):
    rows = journal(
        spark,
        message(BIG + 1, "a", ts=ago(3 * DAY)),
        message(BIG + 2, "a", ts=ago(3 * DAY)),  # the queue holds it: a stops below it
        message(BIG + 3, "a", ts=ago(3 * DAY)),  # accepted, but above a held row: kept
        message(BIG + 4, "b", ts=ago(3 * DAY)),  # no consumers: by age alone
        message(BIG + 5, "b", ts=ago(DAY / 2)),  # too young
        message(BIG + 6, "b", ts=ago(3 * DAY)),  # old enough, but above a young row: kept
        message(BIG + 7, "c", ts=ago(DAY / 2)),  # nothing of c may go
        message(BIG + 8, "d", ts=ago(3 * DAY), durable=False),  # unaccepted non-persistent: held too
    )
    consumer = lag.consumers(
        subscriptions(spark, (1, "durable", True, "x", "s", "d", 2)),
        cursors(spark, (1, "queue", "a", "a", BIG), (2, "subscription", "x.s", "d", 0)),
    )
    plan = retention.retention_plan(rows, consumer, acks(spark, (1, BIG + 1), (1, BIG + 3)), ago(DAY))
    expected = spark.createDataFrame(
        [
            ("a", "topic", 1, 3, 300, BIG + 1, 1, 100),
            ("b", "topic", 0, 3, 300, BIG + 4, 1, 100),
            ("c", "topic", 0, 1, 100, None, 0, 0),
            ("d", "topic", 1, 1, 100, None, 0, 0),
        ],
        PLAN_SCHEMA,
    )
    assertDataFrameEqual(plan, expected, checkRowOrder=True)


def test_an_empty_journal_plans_nothing(spark):
    consumer = lag.consumers(subscriptions(spark), cursors(spark))
    assertDataFrameEqual(
        retention.retention_plan(journal(spark), consumer, acks(spark), NOW), spark.createDataFrame([], PLAN_SCHEMA)
    )


def compact(store_url: str, plan_path) -> tuple[int, str]:
    result = CliRunner().invoke(
        main, ["journal", "compact", "--plan", str(plan_path), "--batch", "2", "--store", store_url, "--json"]
    )
    return result.exit_code, result.stdout + result.stderr


def test_a_plan_is_applied_in_batches_and_refused_once_a_new_cursor_appears(spark, store_url, tmp_path):
    upgrade(store_url)
    old, later = ago(3 * DAY), ago(60)
    engine = make_engine(store_url)
    with engine.begin() as conn:
        rows = [journal_row(i, i, old) for i in range(1, 8)] + [journal_row(8, 8, later)]
        conn.execute(sa.insert(JournalMessage), [{**r, "address": "q", "node_kind": "queue"} for r in rows])
        conn.execute(sa.insert(AckCursor).values(id=1, owner_kind="queue", owner="q", address="q", low_water=4,
                                                 updated_at=old))  # fmt: skip
        conn.execute(sa.insert(Ack), [{"cursor_id": 1, "message_id": 5}, {"cursor_id": 1, "message_id": 7}])
    store = jdbc_store(store_url)
    result = run_retention(spark, store, datetime.now(UTC), DAY * 1000)
    assert [(r["topic"], r["delete_through"], r["free_rows"]) for r in result.rows] == [("q", 5, 5)]
    plan = tmp_path / "retention-plan.json"
    plan.write_text(json.dumps(result.plan))
    assert result.plan["cursors"] == [{"id": 1, "owner": "q", "address": "q", "low_water": 4}]

    assert compact(store_url, plan) == (0, '{"deleted": 5}\n')
    with engine.connect() as conn:
        assert list(conn.scalars(sa.select(JournalMessage.id).order_by(JournalMessage.id))) == [6, 7, 8]
    with engine.begin() as conn:
        conn.execute(sa.insert(AckCursor).values(id=2, owner_kind="queue", owner="q2", address="q", low_water=0,
                                                 updated_at=later))  # fmt: skip
    code, output = compact(store_url, plan)
    assert code == 1 and "'q2' (cursor 2) was created after it" in output
    engine.dispose()
