"""gateway.console_feed without a server: the view is built only while wanted, and a big tree less often."""

from __future__ import annotations

from typing import Any

from subgate.gateway import console_feed
from subgate.gateway.console_feed import ConsoleFeed


def test_built_only_while_wanted_and_a_big_tree_every_few_ticks(monkeypatch):
    topics = [10]
    builds: list[int] = []

    def build() -> dict[str, Any]:
        builds.append(topics[0])
        return {"truncated": {"topics": topics[0]}}

    now = [100.0]
    monkeypatch.setattr(console_feed.time, "monotonic", lambda: now[0])
    feed = ConsoleFeed(build)
    feed.tick()
    assert feed.latest is None and builds == []  # nobody asked
    feed.want()
    feed.tick()
    feed.tick()
    assert builds == [10, 10] and feed.latest == {"truncated": {"topics": 10}}
    topics[0] = 3 * console_feed.TOPICS_PER_TICK  # a big tree: every third tick
    for _ in range(7):
        feed.tick()
    assert builds == [10, 10, 30_000, 30_000, 30_000]
    now[0] += console_feed.WANTED_FOR + 1  # the page went away
    feed.tick()
    feed.tick()
    feed.tick()
    assert len(builds) == 5
