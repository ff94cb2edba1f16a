"""Publishers' high-water marks in the store (storage.high_water), on both stores: a publisher's row commits with
its first messages, the floor is written at most once a FLUSH_SECONDS, start-up takes the higher of the floor and
the rows, and deleting rows (retention) folds their seqs into the floor first."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.orm import Session

from subgate.engine.records import NewMessage, RetentionRun
from subgate.storage.bulk import insert_messages, utc_from_ms
from subgate.storage.compaction import PLAN_NAME, compact
from subgate.storage.high_water import FLUSH_SECONDS, MarkLedger, high_water_marks, write_pending
from subgate.storage.models import AckCursor, Publisher, table_of
from subgate.storage.retention import retain
from tests.storage.test_journal import T0, new_message


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def numbered(seq: int, publisher_id: str, publisher_seq: int, address: str = "q") -> NewMessage:
    m = new_message(seq, address, publisher_id=publisher_id, publisher_seq=publisher_seq)
    m.tracked = True
    return m


def commit(engine: Engine, ledger: MarkLedger, messages: Sequence[NewMessage], fail: bool = False) -> None:
    """One journal transaction as the writer runs it: rows, marks staged and perhaps written, then the outcome."""
    try:
        with engine.begin() as conn:
            insert_messages(conn, messages)
            ledger.stage(messages)
            ledger.write(conn)
            if fail:
                raise RuntimeError("the commit fails")
    except RuntimeError:
        ledger.abandoned()
        return
    ledger.committed()


def floors(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(select(Publisher.publisher_id, Publisher.last_seq)).all())


def marks(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return high_water_marks(session)


def test_a_publishers_row_commits_with_its_first_messages_and_the_floor_lags_at_most_a_flush(engine: Engine):
    clock = Clock()
    ledger = MarkLedger(clock)
    plain = new_message(1)  # numbered by the server: no row, no mark
    commit(engine, ledger, [plain, numbered(2, "feed", 7), numbered(3, "feed", 5)])
    assert floors(engine) == {"feed": 7}
    commit(engine, ledger, [numbered(4, "feed", 8), numbered(5, "feed", 9)])
    assert floors(engine) == {"feed": 7}  # known publisher, not due: the table is not written
    assert marks(engine) == {"feed": 9}  # the rows hold the mark
    commit(engine, ledger, [numbered(6, "other", 1)])  # a new publisher: written now, with the committed marks
    assert floors(engine) == {"feed": 9, "other": 1}
    commit(engine, ledger, [numbered(7, "feed", 10)])
    clock.now += FLUSH_SECONDS
    commit(engine, ledger, [numbered(8, "other", 2)])  # due: everything committed goes in
    assert floors(engine) == {"feed": 10, "other": 2}
    assert not ledger.pending()


def test_a_rolled_back_transaction_leaves_neither_a_row_nor_a_mark_behind(engine: Engine):
    ledger = MarkLedger(Clock())
    commit(engine, ledger, [numbered(1, "feed", 1)], fail=True)
    assert floors(engine) == {} and not ledger.pending()
    commit(engine, ledger, [numbered(1, "feed", 1)])  # the re-send: its row is written (the id is still new)
    assert floors(engine) == {"feed": 1}
    commit(engine, ledger, [numbered(2, "feed", 5)], fail=True)
    commit(engine, ledger, [numbered(2, "feed", 2)])
    assert ledger.pending() and floors(engine) == {"feed": 1}  # 2 waits; the rolled-back 5 is nowhere
    with engine.begin() as conn:
        ledger.write(conn, now=True)
    ledger.committed()
    assert floors(engine) == {"feed": 2} and marks(engine) == {"feed": 2}


def test_the_floor_takes_the_seqs_of_rows_retention_deletes(engine: Engine):
    ledger = MarkLedger(Clock())
    commit(engine, ledger, [numbered(1, "feed", 1)])
    commit(engine, ledger, [numbered(seq, "feed", seq * 10) for seq in range(2, 6)] + [new_message(6)])
    assert floors(engine) == {"feed": 1} and marks(engine) == {"feed": 50}
    with engine.begin() as conn:
        conn.execute(
            insert(table_of(AckCursor)).values(
                id=1, owner_kind="queue", owner="q", address="q", low_water=6, updated_at=utc_from_ms(T0)
            )
        )
        answer = retain(conn, RetentionRun(T0 + 100, 0, 100, stale_below=0))
    assert answer.deleted == 6
    assert floors(engine) == {"feed": 50} and marks(engine) == {"feed": 50}


@pytest.mark.parametrize("pending", [True, False])
def test_pending_says_whether_committed_marks_wait_for_the_table(engine: Engine, pending: bool):
    ledger = MarkLedger(Clock())
    commit(engine, ledger, [numbered(1, "feed", 1)])
    if pending:
        commit(engine, ledger, [numbered(2, "feed", 2)])
    assert ledger.pending() is pending


def test_the_floor_takes_the_seqs_of_rows_a_compaction_plan_deletes(engine: Engine):
    ledger = MarkLedger(Clock())
    commit(engine, ledger, [numbered(1, "feed", 3, address="t")])
    commit(engine, ledger, [numbered(seq, "feed", seq * 10, address="t") for seq in range(2, 5)])
    plan = {"plan": PLAN_NAME, "version": 1, "cursors": [], "delete": [{"topic": "t", "kind": "queue", "through": 4}]}
    assert compact(engine, plan, batch=2) == 4
    assert floors(engine) == {"feed": 40} and marks(engine) == {"feed": 40}


def test_the_writers_stop_writes_the_marks_that_wait(engine: Engine):
    ledger = MarkLedger(Clock())
    commit(engine, ledger, [numbered(1, "feed", 1)])
    commit(engine, ledger, [numbered(2, "feed", 9)])
    assert floors(engine) == {"feed": 1}
    write_pending(engine, ledger)
    assert floors(engine) == {"feed": 9} and not ledger.pending()
