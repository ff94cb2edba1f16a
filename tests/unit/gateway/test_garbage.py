"""gateway.garbage: while a server runs, unreachable cycles are freed on the reactor thread only.

A cycle here stands in for one that holds a proton wrapper: its finaliser records the thread it ran on. Another
thread (the journal writer's stand-in) allocates far past every threshold; with the reactor's collector in
charge, nothing is freed there, and ``collect_if_due`` on this thread frees it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from subgate.gateway.garbage import ReactorGarbageCollector


class Cycle:
    """Half of a two-object cycle; records the thread that finalises it."""

    freed_on: list[str] = []

    def __init__(self) -> None:
        self.other: Cycle | None = None

    def __del__(self) -> None:
        Cycle.freed_on.append(threading.current_thread().name)


def make_cycle() -> None:
    a, b = Cycle(), Cycle()
    a.other, b.other = b, a


def allocate_on_a_worker(containers: int) -> list[list[int]]:
    """Allocate ``containers`` lists on another thread and keep them (a net growth: that is what starts an
    automatic collection, and what makes one due afterwards)."""
    kept: list[list[int]] = []

    def work() -> None:
        kept.extend([i] for i in range(containers))

    worker = threading.Thread(target=work, name="worker")
    worker.start()
    worker.join(30)
    return kept


@pytest.fixture
def collector() -> Iterator[ReactorGarbageCollector]:
    gc.collect()
    Cycle.freed_on.clear()
    collector = ReactorGarbageCollector(full_interval=0.0)
    collector.take_over()
    yield collector
    collector.release()
    gc.collect()


def test_another_thread_allocating_past_every_threshold_frees_no_cycle(collector):
    make_cycle()
    kept = allocate_on_a_worker(200_000)
    assert len(kept) == 200_000
    assert Cycle.freed_on == []
    collector.collect_if_due()
    assert Cycle.freed_on == [threading.current_thread().name] * 2


def test_the_generation_collected_follows_the_counts(collector, monkeypatch):
    threshold0, threshold1, threshold2 = gc.get_threshold()
    monkeypatch.setattr(gc, "get_count", lambda: (threshold0 - 1, 0, 0))
    collector.collect_if_due()
    assert collector.collections == [0, 0, 0]  # nothing due
    for counts, expected in [
        ((threshold0, 0, 0), [1, 0, 0]),
        ((threshold0, threshold1, 0), [1, 1, 0]),
        ((threshold0, threshold1, threshold2), [1, 1, 1]),
    ]:
        monkeypatch.setattr(gc, "get_count", lambda counts=counts: counts)
        collector.collect_if_due()
        assert collector.collections == expected


def test_a_full_collection_waits_for_its_interval(collector, monkeypatch):
    collector.full_interval = 3600.0
    collector.take_over()
    monkeypatch.setattr(gc, "get_count", lambda: tuple(gc.get_threshold()))
    collector.collect_if_due()
    assert collector.collections == [0, 1, 0]  # gen 2 was due by count, not by time: gen 1 instead


def test_release_gives_automatic_collection_back_only_if_it_was_on():
    was = gc.isenabled()
    try:
        gc.disable()
        collector = ReactorGarbageCollector()
        collector.take_over()
        collector.release()
        assert not gc.isenabled()
        gc.enable()
        collector.take_over()
        assert not gc.isenabled()
        collector.release()
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
