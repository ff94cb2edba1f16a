"""gateway.console_feed without a server: the view is built only while wanted, and a big tree less often."""

from __future__ import annotations

import threading
import time
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


def test_a_request_after_a_pause_waits_for_a_view_begun_after_it():
    builds: list[int] = []

    def build() -> dict[str, Any]:
        builds.append(1)
        return {"truncated": {"topics": 0}, "n": len(builds)}

    feed = ConsoleFeed(build)
    feed.want()
    feed.tick()  # watched once: view 1
    feed.wanted_until = 0.0  # then nobody watched for a while
    answers: list[Any] = []
    asking = threading.Thread(target=lambda: answers.append(feed.fresh(wait=30)))
    asking.start()
    deadline = time.monotonic() + 30
    while feed.wanted_until == 0.0 and time.monotonic() < deadline:  # the request has marked the feed wanted
        time.sleep(0.01)
    assert answers == []  # it did not take the old view
    feed.tick()  # the reactor's next tick
    asking.join(30)
    assert answers == [{"truncated": {"topics": 0}, "n": 2}]
    assert feed.fresh(wait=30) == answers[0]  # watched now: the latest at once, no wait


def test_a_request_gets_the_latest_there_is_when_no_tick_comes_in_time():
    feed = ConsoleFeed(lambda: {"truncated": {"topics": 0}})
    assert feed.fresh(wait=0.01) is None
