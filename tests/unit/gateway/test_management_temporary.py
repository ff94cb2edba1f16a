"""gateway.management: a subscription on a temporary topic is read, listed and deleted only by the topic's
connection (issue 11, defect 2: temporary nodes belong to the connection that made them)."""

from __future__ import annotations

import pytest

from subgate.engine.nodes import Topic
from subgate.gateway.management import Request, handle
from subgate.gateway.subscriptions import Subscriptions
from subgate.mapping.subscriptions import DURABLE, Details, Kind, SubscriptionKey
from tests.unit.gateway.test_router import make_router

TEMPORARY = "$temp.topic.0f"
KEY = SubscriptionKey(DURABLE, "app1", "s")


def subscribed() -> Subscriptions:
    router = make_router()
    topic = router.create(TEMPORARY, "topic", durable=False)
    assert isinstance(topic, Topic)
    subscriptions = Subscriptions(router, router.writer, router.pager)
    subscriptions.create(Kind.DURABLE, KEY, Details(TEMPORARY, None, False), topic, "app1", None, "s")
    return subscriptions


def request(operation: str) -> Request:
    return Request(operation, "subscription", {"name": "s", "client-id": "app1"}, "reply", 1)


def stranger(address: str) -> bool:
    return False


def owner(address: str) -> bool:
    return address == TEMPORARY


@pytest.mark.parametrize("operation", ["READ", "DELETE"])
def test_another_connection_gets_403_and_changes_nothing(operation: str) -> None:
    subscriptions = subscribed()
    response = handle(request(operation), subscriptions, stranger)
    assert response.status == 403 and "temporary topic of another connection" in response.description
    assert subscriptions.get(KEY) is not None


def test_query_leaves_out_another_connections_temporary_subscriptions() -> None:
    subscriptions = subscribed()
    assert handle(Request("QUERY", "subscription", {}, "reply", 1), subscriptions, stranger).body == []
    assert len(handle(Request("QUERY", "subscription", {}, "reply", 1), subscriptions, owner).body) == 1


def test_the_owner_may_read_and_delete() -> None:
    subscriptions = subscribed()
    assert handle(request("READ"), subscriptions, owner).status == 200
    assert handle(request("DELETE"), subscriptions, owner).status == 204
    assert subscriptions.get(KEY) is None
