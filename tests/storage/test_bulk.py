"""storage.bulk on SQLite and PostgreSQL: every row of a batch lands once, whatever the batch size (SQLite splits
it into statements of a few bounded sizes; PostgreSQL copies it), with every field as SQLAlchemy reads it back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from subgate.storage.bulk import insert_acks, insert_messages, sqlite_statement_sizes
from subgate.storage.models import Ack, AckCursor, JournalMessage
from tests.storage.test_journal import T0, new_message


@pytest.mark.parametrize("count", [1, 3, 17, 64, 65, 200, 256, 341, 1000])
def test_every_message_of_a_batch_lands_once_in_order(engine, count):
    messages = [new_message(i, expires_ms=T0 + 10_000 if i % 2 else None) for i in range(1, count + 1)]
    with engine.begin() as conn:
        insert_messages(conn, messages)
    with engine.connect() as conn:
        rows = conn.execute(select(JournalMessage.__table__).order_by(JournalMessage.id)).all()
    assert [r.id for r in rows] == list(range(1, count + 1))
    last = rows[-1]
    assert (last.publisher_seq, last.bookmark, last.payload) == (count, f"c1/snd|{count}|", f"payload-{count}".encode())
    assert last.ts.timestamp() * 1000 == pytest.approx(T0 + count, abs=1)
    assert (last.expires_at is None) == (count % 2 == 0)


def test_times_read_back_exactly_across_second_boundaries(engine):
    # Rows in and out of the same second, out of order: each time is the row's own (SQLite: the second's text is
    # formatted once and cached).
    stamps = [T0 + 437 * k for k in (0, 1, 2, 3, 9, 4, 200, 5)] + [0, 999, 1000]
    messages = [new_message(i, ts_ms=ms, deliver_ms=ms + 1) for i, ms in enumerate(stamps, start=1)]
    with engine.begin() as conn:
        insert_messages(conn, messages)
    with engine.connect() as conn:
        rows = conn.execute(select(JournalMessage.__table__).order_by(JournalMessage.id)).all()

    def ms(value: datetime) -> int:
        return round((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp() * 1000)

    assert [ms(r.ts) for r in rows] == stamps
    assert [ms(r.deliver_at) for r in rows] == [t + 1 for t in stamps]


def test_acks_are_written_once_each_even_when_repeated(engine):
    with engine.begin() as conn:
        conn.execute(
            AckCursor.__table__.insert().values(
                id=1, owner_kind="queue", owner="q", address="q", low_water=0, updated_at=datetime.now(UTC)
            )
        )
        insert_acks(conn, [(1, m) for m in range(1, 300)] + [(1, 5), (1, 7)])
    with engine.connect() as conn:
        acked = conn.execute(select(Ack.message_id).order_by(Ack.message_id)).scalars().all()
    assert acked == list(range(1, 300))


def test_a_duplicate_journal_id_fails_the_whole_batch_as_an_integrity_error(engine):
    with engine.begin() as conn:
        insert_messages(conn, [new_message(1)])
    with pytest.raises(IntegrityError), engine.begin() as conn:
        insert_messages(conn, [new_message(i) for i in range(2, 300)] + [new_message(1)])
    with engine.connect() as conn:
        assert conn.execute(select(JournalMessage.id)).scalars().all() == [1]  # nothing of the failed batch


def test_sqlite_statements_at_most_two_for_a_usual_batch_and_few_shapes_in_all():
    assert sqlite_statement_sizes(0, 2520) == []
    assert [sqlite_statement_sizes(n, 2520) for n in (1, 7, 8, 25, 64)] == [[1], [7], [8], [24, 1], [64]]
    assert sqlite_statement_sizes(65, 2520) == [64, 1]
    assert sqlite_statement_sizes(200, 2520) == [128, 64, 8]
    assert sqlite_statement_sizes(1000, 2520) == [256, 256, 256, 128, 64, 40]
    assert sqlite_statement_sizes(60, 50) == [48, 8, 4]
    shapes: set[int] = set()
    for total in range(1, 1200):
        for most in (2520, 76, 50):  # 32766 or 999 variables over a 13-column row; a smaller limit still
            sizes = sqlite_statement_sizes(total, most)
            assert sum(sizes) == total and max(sizes) <= most
            assert total > 64 or most < 64 or len(sizes) <= 2
            shapes.update(sizes)
    assert len(shapes) <= 17  # 1..7, 8..64 by 8, 128 and 256: what sqlite3's statement cache holds per table
