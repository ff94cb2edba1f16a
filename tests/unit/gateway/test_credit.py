"""Publisher credit kept on our side (``gateway.links.Inbound``): the window, half-window steps, transfers in
flight to the journal, and the once-a-second resynchronisation with proton's own count."""

from __future__ import annotations

from types import SimpleNamespace

from subgate.gateway.links import Inbound


class FakeLink:
    """The part of a proton receiver that ``Inbound`` touches: its name, its credit and ``flow``."""

    name = "snd"

    def __init__(self) -> None:
        self.credit = 0
        self.flows: list[int] = []

    def flow(self, n: int) -> None:
        self.flows.append(n)
        self.credit += n

    def transfer(self, inbound: Inbound) -> None:
        """One transfer arrives and is taken (proton's count and ours both go down)."""
        self.credit -= 1
        inbound.credit -= 1


def publisher(window: int = 100) -> tuple[Inbound, FakeLink]:
    link = FakeLink()
    return Inbound(link, SimpleNamespace(container_id="c1"), None, window), link  # type: ignore[arg-type]


def test_the_first_top_up_grants_the_window():
    inbound, link = publisher()
    inbound.top_up()
    assert link.flows == [100]
    assert inbound.credit == link.credit == 100


def test_credit_is_topped_up_in_half_window_steps_and_counts_what_is_in_flight():
    inbound, link = publisher()
    inbound.top_up()
    for _ in range(49):
        link.transfer(inbound)
        inbound.top_up()
    assert link.flows == [100]  # 49 missing: less than half
    link.transfer(inbound)
    inbound.pending = 10  # ten of them wait for their journal commit
    inbound.top_up()
    assert link.flows == [100]  # 50 - 10 = 40 missing
    inbound.pending = 0
    inbound.top_up()
    assert link.flows == [100, 50]
    assert inbound.credit == link.credit == 100


def test_resync_takes_protons_count_and_unblocks_a_publisher():
    inbound, link = publisher()
    inbound.top_up()
    link.credit = 0  # proton's count went down without ours (the miscount resync guards against)
    inbound.top_up()
    assert link.flows == [100]  # we believe the publisher still has credit
    assert inbound.resync() is True
    assert link.flows == [100, 100]
    assert inbound.resync() is False


def test_a_closed_publisher_gets_no_credit():
    inbound, link = publisher()
    inbound.closed = True
    inbound.top_up()
    assert link.flows == []
