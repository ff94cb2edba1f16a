"""The ``$management`` node: AMQP management requests and their responses (used by the CLI).

Owns the request/response contract. A request is a message sent to ``$management`` with ``reply-to`` and
``message-id`` set and application properties ``operation`` and ``type`` (plus ``name``, ``client-id`` or
``global``, ``topic`` as the operation needs). The response goes to the ``reply-to`` address with
``correlation-id`` = the request's message-id and application properties ``statusCode`` (int) and
``statusDescription``; QUERY answers with a list of maps, READ with one map, DELETE with 204.

Type ``subscription``: QUERY (filters ``client-id``, ``global``, ``topic``), READ and DELETE (``name`` plus
``client-id`` or ``global``). DELETE follows the unsubscribe rules of ``mapping.subscriptions``: 404 when there
is no such durable subscription, 409 while consumers are attached. A subscription on a temporary topic
(``$temp.…``) belongs to the connection that made the topic: READ and DELETE from any other connection get 403,
and QUERY leaves it out.

Types ``bookmark`` and ``journal`` are answered from the store (``gateway.store_reports``); ``topic`` and
``permissions`` by ``gateway.topic_admin``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import Message as ProtonMessage

from subgate.engine import codec
from subgate.gateway.subscriptions import Subscription, Subscriptions
from subgate.mapping.addresses import is_temporary
from subgate.mapping.errors import NOT_FOUND, Refused
from subgate.mapping.names import MANAGEMENT_ADDRESS
from subgate.mapping.subscriptions import DURABLE, SubscriptionKey, checked_key, decide_unsubscribe

ADDRESS = MANAGEMENT_ADDRESS


@dataclass(frozen=True, slots=True)
class Request:
    operation: str
    type: str
    properties: dict[str, object]
    reply_to: str | None
    message_id: object


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    description: str
    body: Any = None


def read_request(raw: bytes) -> Request:
    """Raises: codec.CodecError for a malformed message."""
    env = codec.scan(raw)
    props = codec.application_properties(raw, env)
    return Request(
        operation=str(props.get("operation") or "").upper(),
        type=str(props.get("type") or ""),
        properties=props,
        reply_to=env.reply_to,
        message_id=env.message_id,
    )


def subscription_view(sub: Subscription) -> dict[str, Any]:
    key = sub.key
    assert key is not None
    return {
        "id": sub.id,
        "kind": sub.kind.value,
        "durable": sub.kind.durable,
        "client_id": key.client_id,
        "name": key.name,
        "topic": sub.details.topic,
        "selector": sub.details.selector,
        "no_local": sub.details.no_local,
        "consumers": len(sub.consumers),
        "backlog": sub.queue.depth,
        "created": sub.created_ms,
    }


_NO_SCOPE = "give 'client-id' (a string) or 'global' = true"


def requested_key(props: dict[str, object]) -> SubscriptionKey | str:
    """The durable subscription a READ or DELETE names (``name`` plus ``client-id`` or ``global``), or what is
    wrong with the request."""
    name = props.get("name")
    if not isinstance(name, str) or not name:
        return "'name' (a string) is required"
    client_id = props.get("client-id")
    if props.get("global") is True:
        client_id = None
    elif not isinstance(client_id, str) or not client_id:
        return _NO_SCOPE
    try:  # the store is asked for it (type 'bookmark'): values it cannot bind are refused here (mapping.store_values)
        return checked_key(SubscriptionKey(DURABLE, client_id, name))
    except Refused as refusal:
        return f"'name' or 'client-id': {refusal.description}"


def handle(request: Request, subscriptions: Subscriptions, owns: Callable[[str], bool]) -> Response:
    """Answer a ``subscription`` request; ``owns(address)`` says whether the asking connection made the temporary
    node at ``address``."""
    if request.type != "subscription":
        return Response(501, f"unknown management type {request.type!r}")
    props = request.properties
    if request.operation == "QUERY":
        return Response(200, "OK", _query(subscriptions, props, owns))
    if request.operation not in ("READ", "DELETE"):
        return Response(501, f"unknown operation {request.operation!r} for type 'subscription'")
    key = requested_key(props)
    if isinstance(key, str):
        return Response(400, key)
    sub = subscriptions.get(key)
    if sub is not None and _foreign(sub, owns):
        return Response(403, f"{key.describe()} is on a temporary topic of another connection")
    if request.operation == "READ":
        if sub is None:
            return Response(404, f"no {key.describe()}")
        return Response(200, "OK", subscription_view(sub))
    try:
        decide_unsubscribe(key, sub.existing() if sub is not None else None)
    except Refused as refusal:
        return Response(404 if refusal.condition == NOT_FOUND else 409, refusal.description)
    assert sub is not None
    subscriptions.delete(sub)
    return Response(204, f"{key.describe()} removed")


def _foreign(sub: Subscription, owns: Callable[[str], bool]) -> bool:
    return foreign_topic(sub.details.topic, owns)


def foreign_topic(topic: str, owns: Callable[[str], bool]) -> bool:
    """A subscription on ``topic`` is on a temporary topic that the asking connection did not make."""
    return is_temporary(topic) and not owns(topic)


def _query(subscriptions: Subscriptions, props: dict[str, object], owns: Callable[[str], bool]) -> list[dict[str, Any]]:
    client_id = props.get("client-id")
    global_only = props.get("global") is True
    topic = props.get("topic")
    views = []
    for sub in subscriptions.named():
        key = sub.key
        assert key is not None
        if global_only and key.client_id is not None:
            continue
        if isinstance(client_id, str) and key.client_id != client_id:
            continue
        if isinstance(topic, str) and sub.details.topic != topic:
            continue
        if _foreign(sub, owns):
            continue
        views.append(subscription_view(sub))
    views.sort(key=lambda v: (v["client_id"] is not None, v["client_id"] or "", v["name"], v["kind"], v["id"]))
    return views


def encode_response(request: Request, response: Response) -> bytes:
    message = ProtonMessage(
        body=response.body,
        correlation_id=request.message_id,
        address=request.reply_to,
        properties={"statusCode": response.status, "statusDescription": response.description},
    )
    return bytes(message.encode())
