"""The store's side of replay and retention (storage.replay, storage.retention), on both stores."""

from __future__ import annotations

from sqlalchemy import Engine, func, insert, select

from subgate.engine.records import ReplayRead, RetentionRun
from subgate.storage.bulk import insert_messages, utc_from_ms
from subgate.storage.models import Ack, AckCursor, JournalMessage, Publisher, table_of
from subgate.storage.replay import last_at_or_before, resolve_replay
from subgate.storage.retention import retain
from tests.storage.test_journal import T0, new_message


def journal(engine: Engine, seqs: list[int], address: str = "t", **fields: object) -> None:
    with engine.begin() as conn:
        insert_messages(conn, [new_message(seq, address, **fields) for seq in seqs])


def test_the_last_sequence_at_or_before_a_time_over_a_sparse_journal(engine: Engine):
    seqs = [1, 2, 5, 9, 10, 40, 41, 1000, 5000]
    journal(engine, seqs)  # ts = T0 + seq
    with engine.connect() as conn:
        assert last_at_or_before(conn, T0, 1) == 0  # before every row
        for seq in seqs:
            assert last_at_or_before(conn, T0 + seq, 1) == seq
        assert last_at_or_before(conn, T0 + 39, 1) == 10
        assert last_at_or_before(conn, T0 + 10**6, 1) == 5000


def test_bookmarks_are_found_by_publisher_and_seq_and_rows_counted_above_the_start(engine: Engine):
    journal(engine, [1, 2, 3])
    journal(engine, [4, 5], address="other")
    with engine.connect() as conn:
        answer = resolve_replay(conn, ReplayRead("t", (("c1/snd", 2), ("c1/snd", 99))))
    assert answer.found == {("c1/snd", 2): 2}
    assert (answer.oldest, answer.rows) == (1, 1)


def test_retention_deletes_old_rows_that_every_cursor_accepted_and_keeps_the_rest(engine: Engine):
    journal(engine, list(range(1, 11)))  # t: no cursor
    journal(engine, list(range(11, 21)), address="q")
    journal(engine, [21, 22], address="q", durable=False)
    with engine.begin() as conn:
        conn.execute(
            insert(table_of(AckCursor)).values(
                id=1, owner_kind="queue", owner="q", address="q", low_water=13, updated_at=utc_from_ms(T0)
            )
        )
        conn.execute(insert(table_of(Ack)).values([{"cursor_id": 1, "message_id": 15}]))
        first = retain(conn, RetentionRun(T0 + 18, 0, 5, stale_below=0))
        assert (first.deleted, first.reached, first.upto) == (5, 5, 18)
        rest = retain(conn, RetentionRun(T0 + 18, first.reached, 100, stale_below=21))
        assert (rest.reached, rest.upto) == (18, 18)
        left = [row[0] for row in conn.execute(select(JournalMessage.id).order_by(JournalMessage.id))]
    # t's rows up to 18 go; q keeps what its cursor has not accepted (14, 16, 17, 18 and everything newer); the
    # stale non-persistent rows are newer than the cut-off and stay.
    assert left == [14, 16, 17, 18, 19, 20, 21, 22]
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(table_of(Publisher))).scalar() == 0
