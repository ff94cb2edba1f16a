"""Router bookkeeping that protects durability: the low-water mark never passes an uncommitted message."""

from __future__ import annotations

from gateway.nodes import Message
from gateway.router import Router
from gateway.settings import Settings
from storage.records import Catalog


class FakeWriter:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.calls.append((name, *args))


def make_router(max_id: int = 10) -> Router:
    return Router(Settings(), FakeWriter(), Catalog([], [], max_id, 0, 0))  # type: ignore[arg-type]


def test_low_water_of_an_empty_queue_stops_below_the_oldest_uncommitted_message():
    router = make_router()
    queue = router.create("q", "queue", durable=True)
    for seq in (11, 12, 13):
        router._next_seq = seq
        router.submitted(seq)
    assert router.safe_low_water(queue) == 10
    router.committed(11)
    assert router.safe_low_water(queue) == 11
    router.committed(13)  # out of order: 12 is still on its way
    assert router.safe_low_water(queue) == 11
    router.committed(12)
    assert router.safe_low_water(queue) == 13


def test_low_water_follows_the_oldest_message_held():
    router = make_router()
    queue = router.create("q", "queue", durable=True)
    queue.push(Message(15, b"", journaled=True))
    assert router.safe_low_water(queue) == 14
    router.submitted(12)
    assert router.safe_low_water(queue) == 11
