"""The pure rules of fan-out (``engine.fanout``): link configuration, seed 000's conditions 2 and 3, replicas
refusing local changes, the lag window."""

from __future__ import annotations

import pytest

from subgate.engine.fanout import (
    ADD,
    REMOVE,
    SNAPSHOT_END,
    UPDATE,
    FanoutConfigError,
    LagWindow,
    check_local_change,
    decode_batch,
    encode_batch,
    make_config,
    parse_spec,
    propagates,
)
from subgate.engine.nodes import Topic
from subgate.mapping.errors import NOT_ALLOWED, Refused
from subgate.topics import parse_selector


def test_a_spec_is_url_equals_selector_with_credentials_moved_out_of_the_url():
    config = parse_spec("amqp://fan:p=w@127.0.0.1:5673=A//")
    assert (config.url, config.selector, config.user, config.password) == ("amqp://127.0.0.1:5673", "A//", "fan", "p=w")
    assert (config.retry_interval, config.reconnect_timeout, config.max_in_flight) == (1.0, 60.0, 1000)
    assert parse_spec("amqp://primary=?prices/.*//").url == "amqp://primary:5672"


@pytest.mark.parametrize("spec", ["A//", "amqp://host:1", "http://host:1=A//", "amqp://host:1=>a//b", "amqp://h:1="])
def test_bad_specs_are_refused(spec):
    with pytest.raises(FanoutConfigError):
        parse_spec(spec)


def test_a_toml_table_sets_every_key_and_checks_them():
    config = make_config({"url": "amqp://h:1", "selector": "A//", "user": "u", "password": "p", "retry_interval": 0.5,
                          "reconnect_timeout": 5, "max_in_flight": 10})  # fmt: skip
    assert (config.user, config.password, config.retry_interval, config.reconnect_timeout, config.max_in_flight) == (
        "u", "p", 0.5, 5.0, 10)  # fmt: skip
    for bad in ({"selector": "A//"}, {"url": "amqp://h:1", "selector": "A//", "colour": 1},
                {"url": "amqp://h:1", "selector": "A//", "max_in_flight": 0},
                {"url": "amqp://h:1", "selector": "A//", "retry_interval": "soon"}):  # fmt: skip
        with pytest.raises(FanoutConfigError):
            make_config(bad)


@pytest.mark.parametrize(
    ("link", "request_selector", "replicated", "expected"),
    [
        ("A//", ">A/D", ["A", "A/B", "A/C"], True),  # seed 000's example
        ("A//", ">B/D", [], False),  # condition 2: no intersection of path prefixes
        ("A//", "?A/[BD]", ["A/B"], False),  # condition 3: a replica matches both
        ("A/X//", ">A", ["A/X/1"], True),  # the prefix A meets A/X; the replica A/X/1 is not A
        ("*.*/x", ">Z/1", [], True),  # a regex link's prefix is the root: a false positive (seed 000's caveat)
    ],
)
def test_propagation_conditions_2_and_3(link, request_selector, replicated, expected):
    assert propagates(parse_selector(link), parse_selector(request_selector), replicated) is expected


def test_a_replica_refuses_local_changes():
    topic = Topic("A/B")
    check_local_change(topic, "published to")
    topic.replica_of = "amqp://primary:5672"
    with pytest.raises(Refused) as refused:
        check_local_change(topic, "published to")
    assert refused.value.condition == NOT_ALLOWED and "amqp://primary:5672" in refused.value.description


def test_the_lag_window_keeps_the_last_span_seconds():
    window = LagWindow(span=60)
    assert window.figures(0) == (None, None)
    for second, lag in enumerate([5.0, 1.0, 3.0]):
        window.add(second, lag)
    assert window.figures(2) == (3.0, 5.0)
    assert window.figures(61.5) == (3.0, 3.0)  # the first two fell out of the window


def test_a_batch_body_carries_operations_with_and_without_values_and_refuses_a_truncated_one():
    operations = [
        (ADD, "A/B", b"\x00\x53\x77value"),
        (UPDATE, "A/\u00e9", b""),
        (REMOVE, "A/C", None),
        (SNAPSHOT_END, "", None),
    ]
    body = encode_batch(operations)
    assert decode_batch(body) == operations
    assert decode_batch(memoryview(body)) == operations
    with pytest.raises(ValueError):
        decode_batch(body[:-3])
    with pytest.raises(ValueError):
        decode_batch(b"\x09\x00\x00\xff\xff\xff\xff")  # an unknown op
