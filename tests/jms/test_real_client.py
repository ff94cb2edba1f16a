"""JMS behaviours through the real Apache Qpid JMS 2.10 client (tests/jms/java/JmsProbe.java), against a
``subgate serve --ephemeral`` server from the ``subgate.testing`` plugin (``subgate_module_url``).

One JVM runs every scenario of this module (about 15 s in all) and each test checks one scenario's observations:
the five body types, ``receive(timeout)``/``receiveNoWait``/``receiveBody``, message listeners, asynchronous send
(CompletionListener), every kind of subscription and its unsubscribe, a durable subscription re-created with another
selector, selectors, no-local, temporary queues and topics, QueueBrowser, local transactions and
``Session.recover`` with JMSRedelivered and JMSXDeliveryCount, TTL, delivery delay, priority and JMSXGroupID. The
client's own expiry check and priority reordering are turned off where they would hide what the broker does.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.jms.probe import ProbeRun, run_probe

SCENARIOS = [
    "bodies", "receive-variants", "receive-body", "listener", "async-send", "durable", "resubscribe-selector",
    "shared-durable", "shared-nondurable", "global-shared", "selectors", "no-local", "temporary", "browser",
    "transactions", "client-ack-recover", "ttl", "delay", "priority", "groups",
]  # fmt: skip


@pytest.fixture(scope="module")
def probe(subgate_module_url: str) -> ProbeRun:
    return run_probe(subgate_module_url, SCENARIOS)


def observed(probe: ProbeRun, scenario: str) -> Any:
    return probe.result(scenario)


def test_five_body_types(probe):
    got = observed(probe, "bodies")
    assert got["kinds"] == ["text", "bytes", "map", "stream", "object"]
    assert got["text"] == "text é€"
    assert got["bytes"] == [1, 2, 3, 255]
    assert got["map"] == {"b": True, "d": 2.5, "i": 42, "s": "v", "x": [9, 8]}
    assert got["stream"] == ["a", 7, False]
    assert got["object"] == ["x", 1, 2.5]
    assert got["more"] == []


def test_receive_with_timeout_and_no_wait(probe):
    got = observed(probe, "receive-variants")
    assert got == {"timeout_empty": True, "nowait_empty": True, "timed": "for-timeout", "nowait": "for-nowait",
                   "more": []}  # fmt: skip


def test_receive_body(probe):
    got = observed(probe, "receive-body")
    assert got["text"] == "body-text" and got["bytes"] == [5, 6, 7] and got["map"] == {"k": 1}
    # A wrong body type throws and leaves the message for the next receive (JMS 2 §8.6 / JMSConsumer javadoc).
    assert got["wrong_type"] == "MessageFormatRuntimeException" and got["after_wrong_type"] == "wrong-type"
    assert got["nowait"] == "nowait-body" and got["empty"] is None


def test_message_listener(probe):
    assert observed(probe, "listener") == {"all_within_wait": True, "bodies": ["l0", "l1", "l2", "l3", "l4"]}


def test_asynchronous_send(probe):
    got = observed(probe, "async-send")
    assert got == {
        "all_within_wait": True,
        "completed": ["a0", "a1", "a2"],
        "failed": [],
        "received": ["a0", "a1", "a2"],
    }


def test_durable_subscription_with_client_id(probe):
    got = observed(probe, "durable")
    assert got["live"] == ["d0"]
    assert got["kept"] == ["d1", "d2", "d3"]  # kept while no consumer was attached
    assert got["after_unsubscribe"] == []  # unsubscribed: what was sent then went nowhere
    assert got["unsubscribe_while_active"] == "JMSException"  # refused while a consumer is attached


def test_durable_subscription_recreated_with_another_selector(probe):
    got = observed(probe, "resubscribe-selector")
    assert got["changed_selector"] == ["new-n2"]  # old-n1, kept under the old selector, went with it
    assert got["same_selector"] == ["same-n2"]


def test_shared_durable_subscription(probe):
    got = observed(probe, "shared-durable")
    assert got["shared"] == [f"s{i}" for i in range(6)]  # each message to one of the two consumers
    assert got["kept"] == ["s6", "s7"]


def test_shared_non_durable_subscription(probe):
    got = observed(probe, "shared-nondurable")
    assert got["shared"] == [f"n{i}" for i in range(4)]
    assert got["after_last_left"] == []  # gone with its last consumer


def test_global_shared_durable_subscription_without_client_id(probe):
    got = observed(probe, "global-shared")
    assert got["shared"] == [f"g{i}" for i in range(4)]  # shared across two connections
    assert got["kept"] == ["g4"]
    assert got["after_unsubscribe"] == []


def test_selectors(probe):
    got = observed(probe, "selectors")
    assert got["queue_selected"] == ["m2-red", "m4-red"]
    assert got["queue_rest"] == ["m0-red", "m1-blue", "m3-green", "m5-blue"]  # left, in order
    assert got["topic_selected"] == ["m3-green", "m4-red", "m5-blue"]


def test_no_local(probe):
    got = observed(probe, "no-local")
    assert got["no_local"] == ["from-other"]
    assert got["durable_no_local"] == ["from-other"]
    assert got["all"] == ["from-mine", "from-other"]


def test_temporary_queue_and_topic(probe):
    got = observed(probe, "temporary")
    assert got == {"reply": "re:ping", "correlation": "corr-1", "reply_to_is_temporary": True, "event": "event-1"}


def test_queue_browser(probe):
    got = observed(probe, "browser")
    assert got == {"browsed": ["b0", "b1", "b2"], "browsed_selected": ["b1"], "consumed_after": ["b0", "b1", "b2"]}


def test_local_transactions_and_redelivery_count(probe):
    got = observed(probe, "transactions")
    assert got["first"] == {"body": "c1", "redelivered": False, "delivery_count": 1}  # "rolled-back" never came
    assert got["after_rollback"] == {"body": "c1", "redelivered": True, "delivery_count": 2}
    assert got["second"] == {"body": "c2", "redelivered": False, "delivery_count": 1}
    assert got["left"] == []  # both commits took their message


def test_client_acknowledge_recover(probe):
    got = observed(probe, "client-ack-recover")
    assert got["first"] == {"body": "k1", "redelivered": False, "delivery_count": 1}
    assert got["after_recover"] == {"body": "k1", "redelivered": True, "delivery_count": 2}
    assert got["left"] == []


def test_time_to_live(probe):
    got = observed(probe, "ttl")
    assert got == {"first": "long-lived", "expiration_of_long_lived": 0, "more": []}


def test_delivery_delay(probe):
    got = observed(probe, "delay")
    assert got["order"] == ["now", "late"]
    assert got["delivery_time_after_timestamp"] is True


def test_priority(probe):
    assert observed(probe, "priority")["order"] == ["p9-1", "p9-5", "p7-4", "p4-2", "p2-6", "p1-0", "p0-3"]


def test_message_groups(probe):
    got = observed(probe, "groups")
    owners: dict[str, set[str]] = {}
    for consumer in ("a", "b"):
        for body in got[consumer]:
            owners.setdefault(body.split("-")[0], set()).add(consumer)
    assert sorted(got["a"] + got["b"]) == sorted(f"{g}-{i}" for g in "ABC" for i in range(4))
    assert all(len(consumers) == 1 for consumers in owners.values()), got
    for consumer in ("a", "b"):  # each group in order at its consumer
        for group in "ABC":
            mine = [body for body in got[consumer] if body.startswith(group)]
            assert mine == sorted(mine)
