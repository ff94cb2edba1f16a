"""Operator management over ``$management``: types ``queue``, ``connection`` and ``server``.

Owns the request/response contract of these three types (``subscription`` is ``gateway.management``'s, ``topic``
and ``permissions`` ``gateway.topic_admin``'s, ``bookmark`` and ``journal`` ``gateway.store_reports``'s). Every
answer is made from memory on the reactor thread, in one pass, without waiting on the store:

Type ``queue`` (point-to-point queues; a topic's subscription queues are ``subscription``'s)
    ``QUERY``: a list of maps, by name: ``name``, ``durable``, ``depth`` (everything the queue holds: available
    in memory or in the journal only, scheduled, delivered and not settled), ``available`` (in memory),
    ``paged`` (in the journal only), ``consumers``, ``messages_in``, ``messages_out``, ``expired``,
    ``rejected``, ``blocked``. The asking connection's own temporary queues (a client's reply queue) are left
    out; other connections' are listed.
    ``READ`` (``name``): one such map. 404 for no queue of that name (a topic is not one); 403 for a temporary
    queue of another connection.
    ``PURGE`` (``name``, optional ``limit`` > 0): discards at most ``limit`` waiting messages (all without it;
    never those delivered and not settled), and once nothing waits in memory the journal-only ones too
    (``engine.nodes.Queue.purge``). The answer ``{purged, depth}`` lets a client purge a big queue in steps,
    each a bounded piece of reactor time, and show its progress. 200.
Type ``connection``
    ``QUERY``: a list of maps, by number: ``id`` (numbered from 1 since the server started), ``container_id``,
    ``principal`` (null: anonymous), ``remote`` (``host:port``), ``links`` (open links), ``roles`` (links by
    role, as ``/metrics`` counts them), ``opened`` (ms since the epoch).
    ``DELETE`` (``id``): closes that connection with ``amqp:connection:forced`` ("closed by an operator"). 204;
    404 for no open connection with that number; 409 for the connection asking (it would never get its answer).
Type ``server``
    ``READ``: one map: ``name``, ``version``, ``started`` (ms since the epoch), ``uptime`` (seconds), ``listen``
    and ``http`` (``host:port`` or null), ``store`` (the URL without its password), ``connections``, ``links``,
    ``queues``, ``topics``, ``subscriptions`` (named ones), ``messages_in`` and ``messages_out`` (totals since
    the start, over every node: a client samples twice for rates), ``store_health`` (``{ok, error,
    last_ok_age}``: the journal writer's last commit, null before the first), ``memory`` (``{held, reserved,
    mark, low, blocked, waiting}``: the memory high-water mark, engine.memory_mark; mark 0: none; waiting: publisher
    links waiting for room). 200. The asking connection, its links and its own temporary queues (its reply
    queue) are not counted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from subgate.engine.memory_mark import HighWater
from subgate.engine.nodes import Queue, Topic
from subgate.gateway.links import ConnectionState
from subgate.gateway.management import Request, Response, foreign_topic
from subgate.gateway.metrics_feed import role
from subgate.gateway.router import Router
from subgate.mapping.addresses import is_temporary
from subgate.storage.journal import CommitHealth

QUEUE_TYPE = "queue"
CONNECTION_TYPE = "connection"
SERVER_TYPE = "server"
ADMIN_TYPES = (QUEUE_TYPE, CONNECTION_TYPE, SERVER_TYPE)
VERSION = "0.1.0"


@dataclass
class ServerFacts:
    """What the process knows about itself, set by ``gateway.server`` before the reactor runs."""

    name: str = "subgate"
    store: str = ""
    listen: str | None = None
    http: str | None = None
    started_ms: int = 0
    started: float = 0.0  # time.monotonic


@dataclass(frozen=True, slots=True)
class Sources:
    """Where the answers are read from (reactor thread), and the one thing management may do to a connection."""

    router: Router
    connections: Callable[[], Iterable[ConnectionState]]
    close_connection: Callable[[ConnectionState, str], None]
    subscriptions: Callable[[], int]
    health: Callable[[], CommitHealth | None]


class ServerAdmin:
    """Answers ``queue``, ``connection`` and ``server`` requests (see the module docstring)."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.facts = ServerFacts(started_ms=int(time.time() * 1000), started=time.monotonic())

    def handle(self, request: Request, asking: ConnectionState, owns: Callable[[str], bool]) -> Response:
        operation, props = request.operation, request.properties
        if request.type == QUEUE_TYPE:
            if operation == "QUERY":
                return Response(200, "OK", [queue_view(q) for q in self.queues() if not _own_temporary(q, owns)])
            if operation in ("READ", "PURGE"):
                return self._one_queue(operation, props, owns)
        elif request.type == CONNECTION_TYPE:
            if operation == "QUERY":
                states = sorted(self.sources.connections(), key=lambda state: state.id)
                return Response(200, "OK", [connection_view(state) for state in states])
            if operation == "DELETE":
                return self._close(props.get("id"), asking)
        elif operation == "READ":
            return Response(200, "OK", self.server_view(asking, owns))
        return Response(501, f"unknown operation {operation!r} for type {request.type!r}")

    def queues(self) -> list[Queue]:
        queues = [node for node in self.sources.router.all_nodes() if isinstance(node, Queue)]
        return sorted(queues, key=lambda queue: queue.name)

    def _one_queue(self, operation: str, props: dict[str, object], owns: Callable[[str], bool]) -> Response:
        name = props.get("name")
        if not isinstance(name, str) or not name:
            return Response(400, "'name' (a string) is required")
        node = self.sources.router.node(name)
        if not isinstance(node, Queue):
            what = "no queue" if node is None else f"not a queue: {node.kind}"
            return Response(404, f"{what} {name!r}")
        if foreign_topic(name, owns):
            return Response(403, f"queue {name!r} is a temporary queue of another connection")
        if operation == "READ":
            return Response(200, "OK", queue_view(node))
        limit = props.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
            return Response(400, f"'limit' must be a positive integer, not {limit!r}")
        purged = node.purge(limit)
        if purged:
            self.sources.router.record_low_water()  # now, not at the next pass: the journal-only part is behind it
        return Response(200, f"purged {purged} message(s) from queue {name!r}", {"purged": purged, "depth": node.depth})

    def _close(self, number: object, asking: ConnectionState) -> Response:
        if isinstance(number, bool) or not isinstance(number, int):
            return Response(400, f"'id' must be a connection number, not {number!r}")
        state = next((s for s in self.sources.connections() if s.id == number), None)
        if state is None:
            return Response(404, f"no open connection #{number}")
        if state is asking:
            return Response(409, f"connection #{number} is the one asking; it would not get the answer")
        self.sources.close_connection(state, "closed by an operator")
        return Response(204, f"connection #{number} ({state.container_id!r}) closed")

    def server_view(
        self, asking: ConnectionState | None = None, owns: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """The server's figures; the asking connection (``subgate status``'s own), its links and its temporary
        queues (its reply queue) are left out: they exist only because of the question."""
        facts, sources = self.facts, self.sources
        nodes = [n for n in sources.router.all_nodes() if owns is None or not (is_temporary(n.name) and owns(n.name))]
        states = [state for state in sources.connections() if state is not asking]
        return {
            "name": facts.name,
            "version": VERSION,
            "started": facts.started_ms,
            "uptime": round(time.monotonic() - facts.started, 3),
            "listen": facts.listen,
            "http": facts.http,
            "store": facts.store,
            "connections": len(states),
            "links": sum(len(state.links) for state in states),
            "queues": sum(1 for node in nodes if isinstance(node, Queue)),
            "topics": sum(1 for node in nodes if isinstance(node, Topic)),
            "subscriptions": sources.subscriptions(),
            "messages_in": sum(node.messages_in for node in nodes),
            "messages_out": sum(node.messages_out for node in nodes),
            "store_health": health_view(sources.health()),
            "memory": memory_view(sources.router.memory_limit.gauge),
        }


def memory_view(gauge: HighWater) -> dict[str, Any]:
    held, reserved, mark, blocked = gauge.figures()
    low = gauge.low if mark else 0
    return {
        "held": held,
        "reserved": reserved,
        "mark": mark,
        "low": low,
        "blocked": blocked,
        "waiting": len(gauge.waiting),
    }


def _own_temporary(queue: Queue, owns: Callable[[str], bool]) -> bool:
    """The asking connection's own temporary queue (the management client's reply queue): not listed."""
    return is_temporary(queue.name) and owns(queue.name)


def queue_view(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name,
        "durable": queue.durable,
        "depth": queue.depth,
        "available": len(queue.waiting),
        "paged": queue.pages.count,
        "consumers": len(queue.consumers),
        "messages_in": queue.messages_in,
        "messages_out": queue.messages_out,
        "expired": queue.expired_count,
        "rejected": queue.dead_count,
        "blocked": queue.blocked,
    }


def connection_view(state: ConnectionState) -> dict[str, Any]:
    roles = Counter(role(link) for link in state.links)
    peer = state.peer
    remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else None
    return {
        "id": state.id,
        "container_id": state.container_id,
        "principal": state.user,
        "remote": remote,
        "links": len(state.links),
        "roles": dict(sorted(roles.items())),
        "opened": state.opened_ms,
    }


def health_view(health: CommitHealth | None) -> dict[str, Any] | None:
    if health is None:
        return None
    age = None if health.last_ok is None else round(time.monotonic() - health.last_ok, 3)
    return {"ok": health.ok, "error": health.error, "last_ok_age": age}
