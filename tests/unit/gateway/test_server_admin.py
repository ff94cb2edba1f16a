"""gateway.server_admin without a server: the answers of ``$management`` types ``queue``, ``connection`` and
``server`` to requests that are wrong, refused or about records built here (the happy paths run against real
servers in tests/e2e/test_cli_ops.py)."""

from __future__ import annotations

from typing import Any

import pytest

from subgate.engine.memory import MemoryLimit
from subgate.engine.nodes import Queue, Topic
from subgate.gateway.management import Request
from subgate.gateway.server_admin import ServerAdmin, Sources
from subgate.storage.journal import CommitHealth


class Router:
    def __init__(self, *nodes: Queue | Topic) -> None:
        self.nodes = {node.name: node for node in nodes}
        self.low_water_writes = 0
        self.memory_limit = MemoryLimit()

    def node(self, name: str) -> Queue | Topic | None:
        return self.nodes.get(name)

    def all_nodes(self) -> list[Queue | Topic]:
        return list(self.nodes.values())

    def record_low_water(self) -> None:
        self.low_water_writes += 1


class State:
    def __init__(self, number: int, container_id: str) -> None:
        self.id = number
        self.container_id = container_id
        self.user = None
        self.peer = ("127.0.0.1", 40000 + number)
        self.links: set[Any] = set()
        self.opened_ms = 1_000


def admin(router: Router, states: list[State], closed: list[Any]) -> ServerAdmin:
    sources = Sources(
        router,  # type: ignore[arg-type]
        lambda: states,  # type: ignore[arg-type,return-value]
        lambda state, why: closed.append((state.id, why)),
        lambda: 0,
        lambda: CommitHealth(False, 1.0, "disk full", None),
    )
    return ServerAdmin(sources)


def request(operation: str, type_: str, **props: object) -> Request:
    return Request(operation, type_, dict(props), "reply", "id-1")


def never(_address: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("props", "status", "text"),
    [
        ({}, 400, "'id' must be a connection number, not None"),
        ({"id": True}, 400, "'id' must be a connection number, not True"),
        ({"id": 9}, 404, "no open connection #9"),
        ({"id": 1}, 409, "connection #1 is the one asking; it would not get the answer"),
        ({"id": 2}, 204, "connection #2 ('app') closed"),
    ],
)
def test_closing_a_connection(props, status, text):
    closed: list[Any] = []
    states = [State(1, "cli"), State(2, "app")]
    answer = admin(Router(), states, closed).handle(request("DELETE", "connection", **props), states[0], never)  # type: ignore[arg-type]
    assert (answer.status, answer.description) == (status, text)
    assert closed == ([(2, "closed by an operator")] if status == 204 else [])


def test_queue_requests_that_are_refused():
    router = Router(Queue("q"), Topic("t"), Queue("$temp.queue.x", durable=False))
    server = admin(router, [], [])
    asking = State(1, "cli")

    def ask(operation: str, **props: object) -> tuple[int, str]:
        answer = server.handle(request(operation, "queue", **props), asking, never)  # type: ignore[arg-type]
        return answer.status, answer.description

    assert ask("READ") == (400, "'name' (a string) is required")
    assert ask("READ", name="nope") == (404, "no queue 'nope'")
    assert ask("READ", name="t") == (404, "not a queue: topic 't'")
    assert ask("PURGE", name="$temp.queue.x") == (
        403,
        "queue '$temp.queue.x' is a temporary queue of another connection",
    )
    for limit in (0, -1, True, "5"):
        assert ask("PURGE", name="q", limit=limit)[0] == 400
    assert ask("PURGE", name="q", limit=5) == (200, "purged 0 message(s) from queue 'q'")
    assert router.low_water_writes == 0  # nothing purged, nothing to write
    assert ask("CREATE", name="q") == (501, "unknown operation 'CREATE' for type 'queue'")
    listed = server.handle(request("QUERY", "queue"), asking, never).body  # type: ignore[arg-type]
    assert [view["name"] for view in listed] == ["$temp.queue.x", "q"]  # others' temporary queues are listed


def test_the_server_view_reports_a_store_that_refuses_writes():
    view = admin(Router(Queue("q"), Topic("t")), [State(1, "a")], []).server_view()
    assert (view["queues"], view["topics"], view["connections"], view["links"]) == (1, 1, 1, 0)
    assert view["store_health"] == {"ok": False, "error": "disk full", "last_ok_age": None}
