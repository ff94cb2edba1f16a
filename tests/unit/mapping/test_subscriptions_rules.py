"""The subscription rules of mapping doc §2–§4 as tables (mapping.subscriptions)."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import ILLEGAL_STATE, NOT_FOUND, RESOURCE_LOCKED, Refused
from subgate.mapping.subscriptions import (
    DURABLE,
    GLOBAL,
    VOLATILE,
    Action,
    Details,
    Existing,
    Kind,
    SubscribeRequest,
    SubscriptionKey,
    decide_lookup,
    decide_subscribe,
    decide_unsubscribe,
    key_for,
    kind_of,
    lookup_key,
    lookup_source_capabilities,
    queue_name,
    removed_on_detach,
    subscription_name,
)

PRICES = Details("prices", None, False)


def request(
    name: str, *caps: str, durable: bool = True, cid: str = "app1", details: Details = PRICES
) -> SubscribeRequest:
    return SubscribeRequest(name, cid, durable, frozenset(("topic", *caps)), details)


@pytest.mark.parametrize(
    ("durable", "caps", "kind"),
    [
        (False, (), Kind.PLAIN),
        (True, (), Kind.DURABLE),
        (True, ("shared",), Kind.SHARED_DURABLE),
        (True, ("shared", "global"), Kind.SHARED_DURABLE),
        (False, ("shared",), Kind.SHARED_VOLATILE),
        (False, ("shared", "global"), Kind.SHARED_VOLATILE),
        (False, ("global",), Kind.PLAIN),  # never sent by the client: global means nothing without shared
    ],
)
def test_kind_of(durable, caps, kind):
    assert kind_of(durable, frozenset(caps)) is kind


def test_kind_properties():
    assert [k.shared for k in Kind] == [False, False, True, True]
    assert [k.durable for k in Kind] == [False, True, True, False]


# Link names of mapping doc §2.2 / §2.3 and the key each one means (connection container-id "app1").
@pytest.mark.parametrize(
    ("link", "caps", "durable", "key"),
    [
        ("qpid-jms:receiver:ID:1:1:1:1:prices", (), False, None),
        ("s", (), True, SubscriptionKey(DURABLE, "app1", "s")),
        ("s|x", (), True, SubscriptionKey(DURABLE, "app1", "s|x")),  # non-shared: the whole name
        ("s", ("shared",), True, SubscriptionKey(DURABLE, "app1", "s")),
        ("s|2", ("shared",), True, SubscriptionKey(DURABLE, "app1", "s")),
        ("s|global", ("shared", "global"), True, SubscriptionKey(DURABLE, GLOBAL, "s")),
        ("s|global2", ("shared", "global"), True, SubscriptionKey(DURABLE, GLOBAL, "s")),
        ("s|volatile1", ("shared",), False, SubscriptionKey(VOLATILE, "app1", "s")),
        ("s|volatile7", ("shared",), False, SubscriptionKey(VOLATILE, "app1", "s")),
        ("s|global-volatile1", ("shared", "global"), False, SubscriptionKey(VOLATILE, GLOBAL, "s")),
        ("s|global-volatile3", ("shared", "global"), False, SubscriptionKey(VOLATILE, GLOBAL, "s")),
    ],
)
def test_key_for_each_link_name_shape(link, caps, durable, key):
    assert key_for(request(link, *caps, durable=durable)) == key


def test_one_name_in_three_namespaces_are_three_subscriptions():
    keys = {
        key_for(request("s", "shared")),
        key_for(request("s|global", "shared", "global")),
        key_for(request("s|volatile1", "shared", durable=False)),
        key_for(request("s|global-volatile1", "shared", "global", durable=False)),
    }
    assert len(keys) == 4


def test_global_keys_do_not_depend_on_the_connection():
    a = key_for(request("s|global", "shared", "global", cid="ID:aaa:1"))
    b = key_for(request("s|global", "shared", "global", cid="ID:bbb:1"))
    assert a == b
    assert key_for(request("s", cid="one")) != key_for(request("s", cid="two"))


def test_subscription_name():
    assert subscription_name("a|b|c", shared=True) == "a"
    assert subscription_name("a|b|c", shared=False) == "a|b|c"


def existing(kind: Kind, consumers: int, details: Details = PRICES) -> Existing:
    return Existing(kind, details, consumers)


OTHER_TOPIC = Details("quotes", None, False)
OTHER_SELECTOR = Details("prices", "x > 1", False)
EMPTY_SELECTOR = Details("prices", "", False)
NO_LOCAL = Details("prices", None, True)


@pytest.mark.parametrize(
    ("req", "current", "action"),
    [
        # nothing there yet
        (request("s"), None, Action.CREATE),
        (request("s", "shared"), None, Action.CREATE),
        (request("s|volatile1", "shared", durable=False), None, Action.CREATE),
        (request("plain", durable=False), None, Action.CREATE),
        # plain consumers never look at existing state
        (request("plain", durable=False), existing(Kind.DURABLE, 1), Action.CREATE),
        # idle: resume with the same details, replace with different ones
        (request("s"), existing(Kind.DURABLE, 0), Action.ATTACH),
        (request("s", details=OTHER_TOPIC), existing(Kind.DURABLE, 0), Action.REPLACE),
        (request("s", details=OTHER_SELECTOR), existing(Kind.DURABLE, 0), Action.REPLACE),
        (request("s", details=NO_LOCAL), existing(Kind.DURABLE, 0), Action.REPLACE),
        (request("s", details=EMPTY_SELECTOR), existing(Kind.DURABLE, 0), Action.REPLACE),  # None != ""
        (request("s|2", "shared"), existing(Kind.SHARED_DURABLE, 0), Action.ATTACH),
        (request("s", "shared", details=OTHER_SELECTOR), existing(Kind.SHARED_DURABLE, 0), Action.REPLACE),
        # active shared: one more consumer when identical
        (request("s|2", "shared"), existing(Kind.SHARED_DURABLE, 1), Action.ATTACH),
        (request("s|global2", "shared", "global"), existing(Kind.SHARED_DURABLE, 3), Action.ATTACH),
        (request("s|volatile2", "shared", durable=False), existing(Kind.SHARED_VOLATILE, 1), Action.ATTACH),
    ],
)
def test_decide_subscribe(req, current, action):
    decision = decide_subscribe(req, current)
    assert decision.action is action
    assert decision.kind is kind_of(req.durable, req.capabilities)
    assert decision.key == key_for(req)


@pytest.mark.parametrize(
    ("req", "current", "condition"),
    [
        # a second exclusive consumer (e.g. a half-dead connection with the same ClientID)
        (request("s"), existing(Kind.DURABLE, 1), RESOURCE_LOCKED),
        (request("s", details=OTHER_TOPIC), existing(Kind.DURABLE, 1), RESOURCE_LOCKED),
        # changed details while in use
        (request("s", "shared", details=OTHER_TOPIC), existing(Kind.SHARED_DURABLE, 1), ILLEGAL_STATE),
        (request("s", "shared", details=OTHER_SELECTOR), existing(Kind.SHARED_DURABLE, 2), ILLEGAL_STATE),
        (
            request("s|volatile2", "shared", durable=False, details=OTHER_SELECTOR),
            existing(Kind.SHARED_VOLATILE, 1),
            ILLEGAL_STATE,
        ),
        # shared and non-shared durable may not share a name, active or not
        (request("s", "shared"), existing(Kind.DURABLE, 0), ILLEGAL_STATE),
        (request("s", "shared"), existing(Kind.DURABLE, 1), ILLEGAL_STATE),
        (request("s"), existing(Kind.SHARED_DURABLE, 0), ILLEGAL_STATE),
        (request("s"), existing(Kind.SHARED_DURABLE, 2), ILLEGAL_STATE),
    ],
)
def test_decide_subscribe_refusals(req, current, condition):
    with pytest.raises(Refused) as refused:
        decide_subscribe(req, current)
    assert refused.value.condition == condition
    assert "'s'" in refused.value.description


@pytest.mark.parametrize(
    ("link", "cid", "key"),
    [
        ("s", "app1", SubscriptionKey(DURABLE, "app1", "s")),
        ("s|global", "ID:x:1", SubscriptionKey(DURABLE, GLOBAL, "s")),
        ("s|anything", "app1", SubscriptionKey(DURABLE, GLOBAL, "s")),
    ],
)
def test_lookup_key(link, cid, key):
    assert lookup_key(link, cid) == key


def test_lookup_never_finds_volatile_subscriptions():
    assert lookup_key("s|global", "c").namespace == DURABLE
    assert lookup_key("s", "c").namespace == DURABLE


def test_decide_lookup():
    key = SubscriptionKey(DURABLE, "app1", "s")
    found = existing(Kind.DURABLE, 1)
    assert decide_lookup(key, found) is found
    with pytest.raises(Refused) as refused:
        decide_lookup(key, None)
    assert refused.value.condition == NOT_FOUND
    assert "'s'" in refused.value.description and "app1" in refused.value.description


def test_decide_lookup_global_description():
    with pytest.raises(Refused) as refused:
        decide_lookup(SubscriptionKey(DURABLE, GLOBAL, "s"), None)
    assert "global" in refused.value.description


def test_decide_unsubscribe():
    key = SubscriptionKey(DURABLE, GLOBAL, "s")
    decide_unsubscribe(key, existing(Kind.SHARED_DURABLE, 0))  # no error: delete
    with pytest.raises(Refused) as refused:
        decide_unsubscribe(key, existing(Kind.SHARED_DURABLE, 1))
    assert refused.value.condition == RESOURCE_LOCKED
    assert refused.value.description == "Cannot unsubscribe: subscription has active consumers"
    with pytest.raises(Refused) as gone:
        decide_unsubscribe(key, None)
    assert gone.value.condition == NOT_FOUND


@pytest.mark.parametrize(
    ("key", "kind", "caps"),
    [
        (SubscriptionKey(DURABLE, "app1", "s"), Kind.DURABLE, ["topic"]),
        (SubscriptionKey(DURABLE, "app1", "s"), Kind.SHARED_DURABLE, ["topic", "shared"]),
        (SubscriptionKey(DURABLE, GLOBAL, "s"), Kind.SHARED_DURABLE, ["topic", "shared", "global"]),
    ],
)
def test_lookup_source_capabilities(key, kind, caps):
    assert lookup_source_capabilities(key, kind) == caps


@pytest.mark.parametrize(
    ("kind", "closed", "remaining", "removed"),
    [
        (Kind.PLAIN, True, 0, True),
        (Kind.PLAIN, False, 0, True),
        (Kind.SHARED_VOLATILE, True, 1, False),
        (Kind.SHARED_VOLATILE, True, 0, True),
        (Kind.SHARED_VOLATILE, False, 0, True),
        (Kind.DURABLE, False, 0, False),  # detach(closed=false), session end, connection loss
        (Kind.DURABLE, True, 0, True),  # a non-JMS client destroying its durable terminus
        (Kind.SHARED_DURABLE, False, 0, False),
        (Kind.SHARED_DURABLE, True, 1, False),
        (Kind.SHARED_DURABLE, True, 0, True),
    ],
)
def test_removed_on_detach(kind, closed, remaining, removed):
    assert removed_on_detach(kind, closed, remaining) is removed


@pytest.mark.parametrize(
    ("attach", "name"),
    [
        (request("s"), "app1.s"),
        (request("s", "shared"), "app1.s"),
        (request("s|2", "shared"), "app1.s"),
        (request("s|global", "shared", "global"), "s:global"),
        (request("s|global2", "shared", "global"), "s:global"),
        (request("s|volatile1", "shared", durable=False), "app1.s:shared-volatile"),
        (request("s|global-volatile1", "shared", "global", durable=False), "s:shared-volatile:global"),
    ],
)
def test_queue_names_are_the_ones_artemis_gives(attach, name):
    """ActiveMQ Artemis' AMQP subscription queue names, so ``topic::name`` browses the same subscription."""
    key = key_for(attach)
    assert key is not None
    assert queue_name(key, kind_of(attach.durable, attach.capabilities)) == name
