"""Management of the topic tree over ``$management``: types ``topic`` and ``permissions``.

Owns the request/response contract for these two types (the subscription type is ``gateway.management``'s):

Type ``topic``
    ``QUERY`` (optional ``selector``, default every topic): a map with ``topics`` (a list of maps: ``path``,
    ``subscriptions``, ``durable_subscriptions``, ``value_size`` (bytes of the current value, or null)),
    ``removals`` (a list of ``{branch, registrations}``: remove-with-session registrations) and ``handlers``
    (a list of ``{path, handlers}``: missing-topic handlers). 200.
    ``CREATE`` (``name`` = a topic path): 201 created; 200 when the topic already exists; 409 when the path is
    a queue; 400 for an invalid path; 403 (``amqp:resource-limit-exceeded: ...``) when the connection has
    created ``--max-topics-per-connection`` topics that still exist (engine.endpoint_limits).
    ``DELETE`` (``selector``; ``name`` is taken as a selector too): removes every topic it selects
    (``a/b`` that topic, ``a/b//`` the branch); the body lists the removed paths. 200, or 404 when it selects
    nothing.
Type ``permissions``
    ``RELOAD``: re-read principals, roles and grants from the store (asynchronously). 202.

The broker hands in what carries the operations out (``TopicAdmin``); this module decides the answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subgate.engine.endpoint_limits import CreatedTopics
from subgate.engine.nodes import Topic
from subgate.gateway.management import Request, Response
from subgate.gateway.router import Router, check_topic_quota
from subgate.gateway.topic_control import TopicControl
from subgate.mapping.addresses import TEMPORARY_PREFIX, TOPIC, is_temporary
from subgate.mapping.errors import NOT_ALLOWED, Refused
from subgate.mapping.names import bounded, reserved, stored_name_problem
from subgate.topics import TopicsError, is_valid_path, parse_selector

TOPIC_TYPE = "topic"
PERMISSIONS_TYPE = "permissions"
FANOUT_TYPE = "fanout"


class TopicAdmin:
    """What topic management acts on: the router's tree, the control registries and the broker's removal."""

    def __init__(
        self,
        router: Router,
        control: TopicControl,
        remove_topics: Callable[[list[Topic]], list[str]],
        reload_permissions: Callable[[], None],
        fanout_status: Callable[[], list[dict[str, Any]]] = list,
        feeds_status: Callable[[], list[dict[str, Any]]] = list,
    ) -> None:
        self.fanout_status = fanout_status
        self.feeds_status = feeds_status
        self.router = router
        self.control = control
        self.remove_topics = remove_topics
        self.reload_permissions = reload_permissions

    def handle(self, request: Request, created: CreatedTopics[Topic] | None = None) -> Response:
        """Answer a request; ``created``: the topics the asking connection created (a CREATE adds to them)."""
        if request.type == FANOUT_TYPE:
            if request.operation not in ("QUERY", "READ"):
                return Response(501, f"unknown operation {request.operation!r} for type 'fanout'")
            return Response(200, "OK", {"links": self.fanout_status(), "feeds": self.feeds_status()})
        if request.type == PERMISSIONS_TYPE:
            if request.operation != "RELOAD":
                return Response(501, f"unknown operation {request.operation!r} for type 'permissions'")
            self.reload_permissions()
            return Response(202, "permissions are being re-read from the store")
        operation = request.operation
        props = request.properties
        if operation == "QUERY":
            return self._query(props.get("selector"))
        if operation == "CREATE":
            return self._create(props.get("name"), created)
        if operation == "DELETE":
            return self._delete(props.get("selector", props.get("name")))
        return Response(501, f"unknown operation {operation!r} for type 'topic'")

    def _query(self, selector: object) -> Response:
        space = self.router.topics
        if selector is None:
            topics = space.branch("")
        elif isinstance(selector, str):
            try:
                topics = space.select(parse_selector(selector))
            except TopicsError as exc:
                return Response(400, exc.description)
        else:
            return Response(400, "'selector' must be a string")
        body: dict[str, Any] = {
            "topics": [_topic_view(topic) for topic in sorted(topics, key=lambda t: t.name)],
            "removals": [
                {"branch": branch, "registrations": len(self.control.removals.registrations(branch))}
                for branch in sorted(self.control.removals.branches())
            ],
            "handlers": [
                {"path": path, "handlers": len(self.control.handlers.handlers(path))}
                for path in sorted(self.control.handlers.paths())
            ],
        }
        return Response(200, "OK", body)

    def _create(self, name: object, created: CreatedTopics[Topic] | None) -> Response:
        if not isinstance(name, str) or not is_valid_path(name):
            return Response(400, f"'name' must be a valid topic path, not {bounded(repr(name), 200)}")
        problem = stored_name_problem("'name'", name)
        if problem is not None:  # the store keeps the name
            return Response(400, bounded(problem))
        if is_temporary(name):
            return Response(400, f"{name!r}: names starting with {TEMPORARY_PREFIX!r} are the server's temporary nodes")
        problem = reserved(name)
        if problem is not None:
            return Response(400, f"{name!r} is reserved: {problem}")
        existing = self.router.node(name)
        if existing is not None:
            if isinstance(existing, Topic) and existing.replica_of is not None:
                return Response(405, f"{NOT_ALLOWED}: topic {name!r} is replicated from {existing.replica_of}")
            if isinstance(existing, Topic):
                return Response(200, f"topic {name!r} exists")
            return Response(409, f"{name!r} is a {existing.kind}, not a topic")
        if created is not None:
            try:
                check_topic_quota(created, self.router.endpoint_limits)
            except Refused as refusal:
                return Response(403, f"{refusal.condition}: {refusal.description}")
        topic = self.router.create(name, TOPIC, durable=True)
        if created is not None and isinstance(topic, Topic):
            created.add(topic)
        return Response(201, f"topic {name!r} created")

    def _delete(self, selector: object) -> Response:
        if not isinstance(selector, str) or not selector:
            return Response(400, "'selector' (a topic selector, e.g. 'a/b' or 'a/b//') is required")
        try:
            topics = self.router.topics.select(parse_selector(selector))
        except TopicsError as exc:
            return Response(400, exc.description)
        topics = [topic for topic in topics if not topic.name.startswith(TEMPORARY_PREFIX)]
        if not topics:  # a temporary topic is its connection's; it goes when the link that made it ends
            return Response(404, f"no topic matches {selector!r} (temporary topics cannot be removed here)")
        replicas = [topic.name for topic in topics if topic.replica_of is not None]
        if replicas:
            return Response(405, f"{NOT_ALLOWED}: replicated from a primary, removed only there: {replicas[:10]}")
        removed = self.remove_topics(topics)
        return Response(200, f"removed {len(removed)} topic(s)", removed)


def _topic_view(topic: Topic) -> dict[str, Any]:
    current = topic.current
    return {
        "path": topic.name,
        "subscriptions": len(topic.subscriptions),
        "durable_subscriptions": topic.durable_subscriptions,
        "value_size": len(current.raw) if current is not None else None,
    }
