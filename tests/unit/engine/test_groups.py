"""engine.groups and a queue's dispatch with message groups (JMSXGroupID): one consumer per group, in order."""

from __future__ import annotations

from subgate.engine.groups import CLOSE_SEQUENCE, GroupTable
from subgate.engine.memory import MemoryLimit
from subgate.engine.nodes import Message, Queue
from subgate.mapping.outcomes import settle_outcome
from tests.unit.engine.test_nodes import FakeConsumer

ACCEPT = settle_outcome("accepted")
RELEASE = settle_outcome("released")


def grouped(seq: int, group: str | None, group_seq: int | None = None) -> Message:
    return Message(seq, b"m%d" % seq, group=group, group_seq=group_seq)


def queue_with(*consumers: FakeConsumer) -> Queue:
    queue = Queue("q")
    for consumer in consumers:
        queue.add_consumer(consumer)
    return queue


def test_the_table_remembers_owners_least_recently_used_first_and_forgets_past_its_bound():
    table: GroupTable[str] = GroupTable(max_groups=2)
    table.delivered("a", "c1", 1)
    table.delivered("b", "c2", 1)
    table.delivered("a", "c1", 2)  # a is now the most recently used
    table.delivered("c", "c3", 1)  # b goes
    assert (table.owner("a"), table.owner("b"), table.owner("c")) == ("c1", None, "c3")
    assert table.forgotten == 1 and len(table) == 2
    table.delivered("a", "c1", CLOSE_SEQUENCE)
    assert table.owner("a") is None
    assert table.release("c3") == 1 and table.owner("c") is None


def test_each_group_sticks_to_the_consumer_that_took_its_first_message():
    first, second = FakeConsumer(credit=10), FakeConsumer(credit=10)
    queue = queue_with(first, second)
    for seq, group in enumerate(["A", "B", "A", "B", "A", None, None], start=1):
        queue.push(grouped(seq, group))
    assert first.seqs[:3] == [1, 3, 5] and second.seqs[:2] == [2, 4]
    assert sorted(first.seqs[3:] + second.seqs[2:]) == [6, 7]  # ungrouped ones: round robin as ever


def test_a_groups_messages_wait_for_its_owner_while_the_rest_go_past_them():
    queue = Queue("q")
    owner, other = FakeConsumer(credit=1), FakeConsumer(credit=10)
    queue.add_consumer(owner)
    queue.push(grouped(1, "A"))
    queue.add_consumer(other)
    queue.push(grouped(2, "A"))
    queue.push(grouped(3, None))
    queue.push(grouped(4, "A"))
    assert owner.seqs == [1] and other.seqs == [3]  # 2 and 4 wait for the owner, which has no credit
    owner.credit = 5
    queue.dispatch()
    assert owner.seqs == [1, 2, 4]


def test_the_group_moves_when_its_owner_leaves_and_its_unsettled_messages_come_first():
    owner, other = FakeConsumer(credit=2), FakeConsumer(credit=0)
    queue = queue_with(owner, other)
    messages = [grouped(seq, "A") for seq in (1, 2, 3)]
    for message in messages:
        queue.push(message)
    assert owner.seqs == [1, 2]
    queue.remove_consumer(owner)
    for message in messages[:2]:
        queue.settle(message, RELEASE, owner)  # the detach gives them back
    other.credit = 10
    queue.dispatch()
    assert other.seqs == [1, 2, 3]


def test_group_sequence_minus_one_closes_the_group():
    first, second = FakeConsumer(credit=1), FakeConsumer(credit=0)
    queue = queue_with(first, second)
    queue.push(grouped(1, "A", CLOSE_SEQUENCE))
    second.credit = 1
    queue.push(grouped(2, "A", 1))
    assert first.seqs == [1] and second.seqs == [2]


def test_the_bound_comes_from_the_queues_limits():
    queue = Queue("q")
    queue.limit_memory(MemoryLimit(groups=1))
    consumer = FakeConsumer(credit=10)
    queue.add_consumer(consumer)
    for seq, group in enumerate(["A", "B", "C"], start=1):
        queue.push(grouped(seq, group))
    assert len(queue.groups) == 1 and queue.groups.forgotten == 2
