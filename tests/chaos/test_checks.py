"""The crash harness's checks as pure functions, and its store integrity check on a hand-made SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from subgate.storage.models import Ack, AckCursor, Base, JournalMessage
from tests.chaos.checks import Delivery, Settled, check_drain, compare_snapshot, resolve_in_doubt
from tests.chaos.store_checks import integrity_problems
from tests.support.store_rows import cursor_row, message_row

KILL, WINDOW = 100.0, 1.0


def drain(expected=(), settled=None, forbidden=(), deliveries=()):
    return check_drain(set(expected), settled or {}, set(forbidden), list(deliveries), KILL, WINDOW)


def test_everything_expected_redelivered_is_fine():
    assert drain(["a", "b"], deliveries=[Delivery("a", 0), Delivery("b", 0)]) == []


def test_a_confirmed_message_neither_accepted_nor_redelivered_is_lost():
    assert drain(["a", "b"], deliveries=[Delivery("a", 0)]) == [
        "b lost: confirmed to its publisher, never accepted, not redelivered"
    ]


@pytest.mark.parametrize("accepted_at", [KILL - 0.5, KILL - 5.0])
def test_an_accepted_message_need_not_come_back(accepted_at):
    assert drain(["a"], {"a": Settled(accepted_at=accepted_at)}) == []


def test_an_accept_inside_the_window_may_be_forgotten():
    assert drain(["a"], {"a": Settled(accepted_at=KILL - 0.5)}, deliveries=[Delivery("a", 0)]) == []


def test_an_accept_before_the_window_must_not_be_forgotten():
    problems = drain(["a"], {"a": Settled(accepted_at=KILL - 3.0)}, deliveries=[Delivery("a", 0)])
    assert problems == ["a redelivered 3.00s after its accept"]


def test_the_same_message_twice_in_one_pass_is_a_duplicate():
    assert drain(["a"], deliveries=[Delivery("a", 0), Delivery("a", 0)]) == ["a delivered 2 times in one pass"]


def test_a_rolled_back_transaction_must_not_arrive():
    assert drain(forbidden=["tx-1"], deliveries=[Delivery("tx-1", 0)]) == [
        "tx-1 delivered but its transaction was not committed"
    ]


@pytest.mark.parametrize(
    ("settled", "count", "ok"),
    [
        (Settled(failed_at=[KILL - 5.0]), 1, True),  # the failure was persisted
        (Settled(failed_at=[KILL - 5.0]), 0, False),  # ... and forgotten
        (Settled(failed_at=[KILL - 0.1]), 0, True),  # inside the window: may be forgotten
        (Settled(failed_at=[KILL - 0.1]), 1, True),
        (Settled(failed_at=[KILL - 0.1]), 2, False),  # more than ever settled
        (Settled(floor=2), 2, True),  # what an earlier restart showed stays
        (Settled(floor=2), 1, False),
        (Settled(), 0, True),  # delivered, never settled, then the crash: count 0
    ],
)
def test_delivery_counts(settled, count, ok):
    assert (drain(["a"], {"a": settled}, deliveries=[Delivery("a", count)]) == []) is ok


def test_an_in_doubt_transaction_is_all_or_nothing():
    assert resolve_in_doubt(["t1", "t2"], []) == (False, [])
    assert resolve_in_doubt(["t1", "t2"], ["t1", "t2", "x"]) == (True, [])
    committed, problems = resolve_in_doubt(["t1", "t2"], ["t1"])
    assert committed and problems == ["transaction half there: ['t1'] arrived, ['t2'] did not"]


def test_snapshots_compare_rows():
    assert compare_snapshot("users", [("a", "h")], [("a", "h")]) == []
    assert compare_snapshot("users", [("a", "h")], [("a", "h2")]) == [
        "users: row lost ('a', 'h')",
        "users: row appeared ('a', 'h2')",
    ]


def test_integrity_finds_acks_of_missing_rows(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = sa.create_engine(url)
    Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(JournalMessage), [message_row(1)])
        conn.execute(sa.insert(AckCursor), [cursor_row(1, "s1")])
        conn.execute(sa.insert(Ack), [{"cursor_id": 1, "message_id": 1}])
    engine.dispose()
    assert integrity_problems(url) == []
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.insert(Ack), [{"cursor_id": 1, "message_id": 7}])
    engine.dispose()
    assert integrity_problems(url) == ["1 acks of no journal row"]
