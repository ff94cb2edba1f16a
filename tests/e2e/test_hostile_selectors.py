"""Selectors built to be slow, over real sockets (issue 19 item 2, "Hostile input").

Diffusion topic selectors whose regexes backtrack catastrophically under Python's ``re`` (``*(a+)+b`` took 7 s on
one 26-character path, doubling with each character) are matched by RE2 in linear time: they attach, are tested
against existing topics and new ones, and select nothing, while a bystander connection is served throughout (on
the old engine the reactor thread would be stuck and the bystander's exchange would time out). Selectors over a
limit are refused at attach with ``amqp:invalid-field`` naming the limit. JMS selectors: literal, nesting and
LIKE-run limits are refused the same way; one at the limit is evaluated against a large property.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Message
from proton.reactor import Selector
from proton.utils import LinkDetached

from tests.support.amqp import Capabilities, connect, nothing_arrives, receive_bodies, receiver, sender
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import Bystander, assert_still_serving

LONG_A = "a" * 200  # a topic whose path a catastrophic regex would try every split of
SLOW_TOPIC_SELECTORS = ["*(a+)+b", "*(.*)*x", "*(a|aa)*c//", "?(a+)+b", "#*(a+)+b////?(a|a)*x/c", "*a(?i)(a*)*B"]
REFUSED_TOPIC_SELECTORS = [
    ("*(a)\\1", "bad regular expression"),
    ("*(?=a)a", "bad regular expression"),
    ("*(?:a{0,1000}){1000}", "bad regular expression"),
    ("*" + "(" * 1100 + "a" + ")" * 1100, "characters (at most 1024)"),
]


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "hostile-selectors") as server:
        yield server


def _refused(attach) -> tuple[str, str]:  # noqa: ANN001 - a zero-argument callable that attaches
    with pytest.raises(LinkDetached) as caught:
        attach()
    remote = caught.value.link.remote_condition
    return remote.name, remote.description


def test_catastrophic_topic_regexes_are_matched_in_bounded_time_while_others_are_served(shared_server):
    conn = connect(shared_server.url)
    publisher = sender(conn, LONG_A, "topic")
    publisher.send(Message(body="first"))  # the topic exists: a new selector is tested against its path
    with Bystander(shared_server) as bystander:
        bystander.exchange()
        subscribers = [receiver(conn, selector, "topic", credit=10) for selector in SLOW_TOPIC_SELECTORS]
        bystander.exchange()
        for path in (LONG_A, LONG_A + "/" + "a" * 100, "a/" * 200 + "c"):  # new topics: the index tests each
            sender(conn, path, "topic").send(Message(body=path))
            bystander.exchange()
        publisher.send(Message(body="second"))
        assert all(nothing_arrives(subscriber, wait=0.2) for subscriber in subscribers)
        assert_still_serving(shared_server, bystander)
    conn.close()


@pytest.mark.parametrize(("selector", "reason"), REFUSED_TOPIC_SELECTORS)
def test_topic_selectors_over_a_limit_are_refused_naming_it(shared_server, selector, reason):
    conn = connect(shared_server.url)
    condition, description = _refused(
        lambda: conn.create_receiver(selector, credit=1, name="hostile", options=[Capabilities("topic")])
    )
    assert condition == "amqp:invalid-field" and reason in description, description
    assert_still_serving(shared_server)
    conn.close()


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        ("n = " + "1" * 5000, "out of range for a long"),
        ("(" * 100 + "n > 0" + ")" * 100, "nested more than 64 deep"),
        ("NOT " * 100 + "b", "nested more than 64 deep"),
        ("s LIKE '%_" + "a" * 300 + "%'", "more than 256 characters"),
        (" OR ".join(["s LIKE '%_" + "a" * 99 + "%'"] * 3), "more than 256 characters"),
    ],
)
def test_jms_selectors_over_a_limit_are_refused_naming_it(shared_server, selector, reason):
    conn = connect(shared_server.url)
    condition, description = _refused(
        lambda: receiver(conn, "hostile-jms", "queue", credit=1, options=[Selector(selector)])
    )
    assert condition == "amqp:invalid-field" and reason in description, description
    assert_still_serving(shared_server)
    conn.close()


def test_a_jms_selector_at_the_limit_is_evaluated_against_a_large_property(shared_server):
    run = "_" + "a" * 254 + "b"  # a searched LIKE run of 256 characters: the most a selector may hold
    conn = connect(shared_server.url)
    consumer = receiver(conn, "hostile-like", "queue", credit=5, options=[Selector(f"s LIKE '%{run}%'")])
    with Bystander(shared_server) as bystander:
        producer = sender(conn, "hostile-like", "queue")
        producer.send(Message(body="miss", properties={"s": "a" * 1_000_000}))  # 254 a's match at each place, no b
        producer.send(Message(body="hit", properties={"s": "xx" + "a" * 254 + "by"}))
        bystander.exchange()
        assert receive_bodies(consumer, 1) == ["hit"]
        assert_still_serving(shared_server, bystander)
    conn.close()
