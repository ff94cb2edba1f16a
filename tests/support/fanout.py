"""Fan-out helpers for end-to-end tests: a primary and its secondaries as real server processes on loopback.

``start_secondary`` starts a server with ``--fanout URL=SELECTOR`` links; ``wait_live`` polls its ``$management``
type ``fanout`` until every link is live with the expected number of replicated topics; ``status`` reads it.
"""

from __future__ import annotations

from typing import Any

from subgate.cli.fanout import read_status
from subgate.cli.management import ManagementClient
from tests.support.polling import eventually
from tests.support.server import SubgateProcess

# Long enough that a proceed can only come from an answer, a lost session or the test's own doing.
HANDLER_TIMEOUT = "30"


def fanout_flags(*links: str, name: str) -> tuple[str, ...]:
    flags: list[str] = ["--name", name, "--missing-topic-timeout", HANDLER_TIMEOUT]
    for link in links:
        flags += ["--fanout", link]
    return tuple(flags)


def status(server: SubgateProcess) -> list[dict[str, Any]]:
    with ManagementClient("127.0.0.1", server.port) as client:
        return read_status(client)


def wait_live(server: SubgateProcess, *counts: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Every link live, link i with ``counts[i]`` replicated topics."""

    def check() -> list[dict[str, Any]] | None:
        links = status(server)
        states = [(link["state"], link["replicated_topics"]) for link in links]
        return links if states == [("live", count) for count in counts] else None

    result: list[dict[str, Any]] = eventually(check, timeout, f"fan-out links live with {counts}")
    return result


def paths(server: SubgateProcess, selector: str = "?.*//", *, user: str | None = None, password: str | None = None
          ) -> list[str]:  # fmt: skip
    with ManagementClient("127.0.0.1", server.port, user=user, password=password) as client:
        return sorted(t["path"] for t in client.query_topics(selector)["topics"])


def create(server: SubgateProcess, *topics: str, user: str | None = None, password: str | None = None) -> None:
    with ManagementClient("127.0.0.1", server.port, user=user, password=password) as client:
        for path in topics:
            client.create_topic(path)
