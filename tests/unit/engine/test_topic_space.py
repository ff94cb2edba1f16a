"""Topic nodes in the tree and selector subscriptions over them (engine.topic_space)."""

from __future__ import annotations

import pytest

from subgate.engine.nodes import Message, Queue, Topic
from subgate.engine.topic_space import TopicSpace, fetch_selector, selector_address
from subgate.topics.errors import SelectorError


@pytest.mark.parametrize(
    ("address", "is_selector"),
    [
        ("prices", False),
        ("a/b", False),
        (">a/b", False),  # a path selector without qualifier names one topic
        (">a/b//", True),
        ("a/b/", True),
        ("?a/.*", True),
        ("*a.*", True),
        ("#>a////>b", True),
        ("my.topic.name", False),
        ("$temp.topic.abc", False),
    ],
)
def test_selector_address(address, is_selector):
    assert (selector_address(address) is not None) is is_selector


def test_invalid_selector_addresses_raise():
    with pytest.raises(SelectorError):
        selector_address("?a/(")
    with pytest.raises(SelectorError):
        fetch_selector("a//b")


def test_subscriptions_see_existing_and_later_topics_and_end_cleanly():
    space = TopicSpace()
    ab, xy = Topic("a/b"), Topic("x/y")
    space.added(ab)
    space.added(xy)
    space.added(Topic("not//a/path"))  # not a valid path: stays out of the tree
    assert len(space.tree) == 2
    queue = Queue("sel", durable=False)
    sub = space.subscribe(fetch_selector("?a/.*"), queue, lambda m: True)
    assert sub.topics == [ab]
    ac = Topic("a/c")
    space.added(ac)
    assert sub.topics == [ab, ac]
    ac.publish(Message(1, b"x"))
    assert queue.depth == 1 and ac.current is not None
    space.removed(ac)
    assert sub.topics == [ab] and "a/c" not in space.tree
    space.removed(Topic("never/added"))
    assert space.select(fetch_selector(">a//")) == [ab]
    space.unsubscribe(sub)
    space.unsubscribe(sub)  # twice is harmless
    assert ab.subscriptions == [] and queue.depth == 0
    space.added(Topic("a/d"))  # no longer subscribed
    assert sub.topics == []


def test_a_temporary_topic_stays_out_of_the_tree():
    space = TopicSpace()
    spy = Queue("spy", durable=False)
    space.subscribe(fetch_selector("*.*"), spy, lambda message: True)
    temporary, plain = Topic("$temp.topic.0f", durable=False), Topic("news", durable=False)
    space.added(temporary)
    space.added(plain)
    assert space.select(fetch_selector("*.*")) == [plain]
    assert space.branch("") == [plain]
    assert temporary.subscriptions == []  # the selector subscription did not reach it
