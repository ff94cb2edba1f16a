"""The memory mark's rule (engine.memory_mark): credit reserved before the bytes arrive, a share per link, the
waiting line, and blocking from the last message's room down to the low-water mark. The wire is tested end to end
in tests/e2e/test_memory_mark.py."""

from __future__ import annotations

import pytest

from subgate.engine.memory_mark import HighWater, low_water, mark_problem

KIB = 1024


class Link:
    """A publisher link as the gauge sees it: its slots, and credit topped up as ``Inbound.top_up`` does."""

    def __init__(self, gauge: HighWater, wanted: int = 100) -> None:
        self.gauge, self.wanted, self.slots, self.queued = gauge, wanted, 0, False
        gauge.join()

    def top_up(self) -> None:
        granted = self.gauge.grant(self.slots, self.wanted - self.slots)
        if granted:
            self.slots += granted
            self.gauge.reserve(granted)
        elif not self.gauge.blocked:
            self.gauge.wait(self)

    def arrive(self, size: int) -> None:
        """A message for one slot arrives and is held."""
        self.gauge.add(size)
        self.slots -= 1
        self.gauge.reserve(-1)


def test_credit_is_reserved_at_the_largest_message_size_and_never_passes_the_mark():
    gauge = HighWater(100 * KIB, 10 * KIB)  # ten credits in all
    links = [Link(gauge) for _ in range(4)]  # a share of 2 each
    for link in links:
        link.top_up()
    assert [link.slots for link in links] == [2, 2, 2, 2] and gauge.reserved == 80 * KIB
    for _ in range(30):  # every link sends small messages as long as it gets credit
        for link in links:
            if link.slots:
                link.arrive(4 * KIB)
                link.top_up()
            assert gauge.bytes + gauge.reserved <= 100 * KIB
    assert gauge.blocked and gauge.bytes > 90 * KIB  # no room for one more 10 KiB message


def test_a_link_that_gets_nothing_waits_in_line_and_is_topped_up_when_room_comes_back():
    gauge = HighWater(40 * KIB, 10 * KIB)
    first, second = Link(gauge), Link(gauge)  # a share of 1 each: at most a quarter of the mark's credit
    first.top_up()
    gauge.add(25 * KIB)  # other queues' messages: no room for one more credit
    second.top_up()
    assert second.slots == 0 and second.queued and list(gauge.waiting) == [second]
    first.arrive(1 * KIB)  # a slot freed: room for one
    assert second.slots == 1 and not gauge.waiting


def test_blocking_starts_when_one_more_message_cannot_fit_and_ends_at_the_low_water_mark():
    events: list[str] = []
    gauge = HighWater(100 * KIB, 10 * KIB)
    gauge.on_blocked, gauge.on_unblocked = lambda: events.append("blocked"), lambda: events.append("unblocked")
    gauge.add(90 * KIB)
    assert not gauge.blocked and gauge.grant(0, 5) == 1
    gauge.add(1)
    assert gauge.blocked and gauge.grant(0, 5) == 0 and events == ["blocked"]
    gauge.add(1)
    gauge.drop(10 * KIB)  # above the low-water mark, 80 KiB
    assert gauge.blocked and events == ["blocked"]
    gauge.drop(1 * KIB + 2)
    assert not gauge.blocked and events == ["blocked", "unblocked"]


def test_the_low_water_mark_stays_two_messages_below_the_blocking_point():
    assert low_water(100, 10) == 80
    assert low_water(100, 40) == 20
    assert low_water(100, 60) == 0


def test_a_mark_below_the_largest_message_is_refused_and_no_mark_reserves_nothing():
    assert mark_problem(1000, 2000) is not None and "--max-message-size" in (mark_problem(1000, 2000) or "")
    with pytest.raises(ValueError):
        HighWater(1000, 2000)
    assert mark_problem(0, 2000) is None
    gauge = HighWater(0, 2000)
    assert gauge.grant(0, 1000) == 1000
    gauge.reserve(5)
    assert gauge.reserved == 0 and gauge.figures() == (0, 0, 0, False)


def test_a_link_that_leaves_frees_its_unused_credit_and_raises_the_others_share():
    gauge = HighWater(800 * KIB, 10 * KIB)  # 80 credits in all
    links = [Link(gauge) for _ in range(8)]
    assert gauge.share == 10
    links[0].top_up()
    gauge.leave(links[0].slots)
    assert gauge.reserved == 0 and gauge.share == 11
    links[1].top_up()
    assert links[1].slots == 11


def test_one_link_alone_gets_a_quarter_of_the_marks_credit_so_the_next_ones_find_room():
    gauge = HighWater(800 * KIB, 10 * KIB)
    first = Link(gauge)
    first.top_up()
    assert first.slots == 20
    others = [Link(gauge) for _ in range(3)]
    for link in others:
        link.top_up()
    assert [link.slots for link in others] == [20, 20, 20] and not gauge.waiting
