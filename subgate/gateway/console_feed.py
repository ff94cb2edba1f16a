"""The reactor's side of the web console: what the console shows, published as a snapshot while someone watches.

Owns ``ConsoleFeed`` and ``console_view``. The console page (``metrics.console``) asks for ``/api/console`` about
once a second; each request (``fresh``, on an HTTP thread) marks the feed wanted for ``WANTED_FOR`` seconds
(``want``: one float written). While it is wanted, the metrics feed's one-second tick (reactor thread) calls
``tick``, which builds the view from what the server holds, with the same record builders ``$management`` answers
with (``server_admin``, ``management.subscription_view``, ``topic_admin``), into a plain JSON-able dict that
nobody changes afterwards, and swaps it into ``latest``; the HTTP threads read that attribute and nothing else of
the reactor's. A request that finds nobody watching (the feed was not wanted: ``latest`` is as old as the last
watch, or None) asks for a build this way and waits, at most ``FRESH_WAIT`` seconds, for the next tick to build
one (a tick builds then whatever the size of the tree); so the first request after a pause gets figures taken
after it arrived, and the reactor still builds at most one view a tick however many requests come. Nobody
watching: no cost but one compare a second; a tree of more than ``TOPICS_PER_TICK`` topics is walked every few
seconds only while watched. Lists are cut to ``LIMIT`` rows (the deepest queues, the largest backlogs, the first
topics by path), and ``truncated`` says how many there were.

A durable subscription's backlog and the age of its oldest unaccepted message are the store's
(``storage.store_metrics.FigureReader``, up to 5 s old, as on ``/metrics``); ``in_memory`` is what its queue holds
now.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from subgate.engine.records import StoreFigures
from subgate.gateway.links import ConnectionState
from subgate.gateway.management import Request, subscription_view
from subgate.gateway.server_admin import ServerAdmin, connection_view, queue_view
from subgate.gateway.subscriptions import Subscription
from subgate.gateway.topic_admin import TopicAdmin

WANTED_FOR = 3.0  # seconds a console request keeps the view being built (the page asks every second)
LIMIT = 500  # rows per list
TOPIC_LIMIT = 2000
TOPICS_PER_TICK = 10_000  # topics the tree may hold for a view every second
FRESH_WAIT = 5.0  # seconds a request that finds nobody watching waits for a fresh view (the tick is 1 s)


class ConsoleFeed:
    """See the module docstring. ``want`` and ``fresh`` from any thread; ``tick`` on the reactor; ``latest`` read
    by any."""

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build = build
        self._skip = 0  # ticks to let pass before the next build (a big tree: see ``tick``)
        self._built = threading.Condition()  # notified after each build; held for a few instructions only
        self._built_at = 0.0  # time.monotonic() when the last build began
        self.wanted_until = 0.0
        self.latest: dict[str, Any] | None = None

    def want(self) -> None:
        self.wanted_until = time.monotonic() + WANTED_FOR

    def fresh(self, wait: float = FRESH_WAIT) -> dict[str, Any] | None:
        """The view for a request (an HTTP thread): the latest while someone watches, else one the reactor builds
        after now, waiting up to ``wait`` seconds for it (then the latest there is, maybe None)."""
        asked = time.monotonic()
        watched = asked < self.wanted_until
        self.want()
        if watched and self.latest is not None:
            return self.latest
        with self._built:
            self._built.wait_for(lambda: self._built_at >= asked, timeout=wait)
        return self.latest

    def tick(self) -> None:
        """Build the view when wanted: every tick up to ``TOPICS_PER_TICK`` topics, every ``ceil(topics /
        TOPICS_PER_TICK)`` ticks beyond (the pass over the tree is most of the cost), as the metrics feed does; the
        first tick of a watch builds at once."""
        if time.monotonic() >= self.wanted_until:
            self._skip = 0
            return
        if self._skip > 0:
            self._skip -= 1
            return
        started = time.monotonic()
        view = self._build()
        self.latest = view
        self._skip = math.ceil(view["truncated"]["topics"] / TOPICS_PER_TICK) - 1
        with self._built:
            self._built_at = started  # what a request waits for: a view begun after it came
            self._built.notify_all()


def console_view(
    admin: ServerAdmin,
    topics: TopicAdmin,
    connections: Iterable[ConnectionState],
    subscriptions: Iterable[Subscription],
    store: tuple[StoreFigures, float] | None,
) -> dict[str, Any]:
    """Everything the console shows, now (reactor thread)."""
    states = sorted(connections, key=lambda state: state.id)
    queues = [queue_view(node) for node in admin.queues()]
    queues.sort(key=lambda view: (-view["depth"], view["name"]))
    subs = _subscriptions(subscriptions, store)
    tree = topics.handle(Request("QUERY", "topic", {}, None, None)).body
    return {
        "taken": time.time(),
        "server": admin.server_view(),
        "connections": [connection_view(state) for state in states[:LIMIT]],
        "queues": queues[:LIMIT],
        "subscriptions": subs[:LIMIT],
        "topics": tree["topics"][:TOPIC_LIMIT],
        "removals": tree["removals"],
        "handlers": tree["handlers"],
        "store_read": None if store is None else store[1],
        "truncated": {
            "connections": len(states),
            "queues": len(queues),
            "subscriptions": len(subs),
            "topics": len(tree["topics"]),
        },
    }


def _subscriptions(
    subscriptions: Iterable[Subscription], store: tuple[StoreFigures, float] | None
) -> list[dict[str, Any]]:
    stored: dict[tuple[str | None, str], tuple[int, float | None]] = {}
    if store is not None:
        figures, read_at = store
        for found in figures.subscriptions:
            age = None if found.oldest_ms is None else max(0.0, read_at - found.oldest_ms / 1000)
            stored[(found.client_id, found.name)] = (found.backlog, age)
    views = []
    for sub in subscriptions:
        view = subscription_view(sub)
        view["in_memory"] = view.pop("backlog")
        backlog, age = stored.get((view["client_id"], view["name"]), (None, None))
        view["backlog"] = backlog if view["durable"] else view["in_memory"]
        view["oldest_unaccepted_seconds"] = age
        views.append(view)
    views.sort(key=lambda view: (-(view["backlog"] or 0), view["client_id"] or "", view["name"]))
    return views


class ManagementFactory(Protocol):
    """Makes a management client (``cli.management.ManagementClient``: handed in by ``subgate serve``)."""

    def __call__(self, host: str, port: int, *, user: str | None, password: str | None, timeout: float) -> Any: ...


def console_actions(factory: ManagementFactory, host: str, port: int) -> Callable[..., tuple[int, str]]:
    """The console's ``act`` (``metrics.console``): one ``$management`` request over a connection of its own to
    this server at host:port, with the console user's credentials, on the calling (HTTP) thread; (status, what
    happened). The server's own authentication and its ``CONTROL_SERVER`` check on ``$management`` decide."""

    def act(
        user: str | None, password: str | None, operation: str, type_: str, arguments: dict[str, Any]
    ) -> tuple[int, str]:
        try:
            with factory(host, port, user=user, password=password, timeout=10.0) as client:
                response = client.request(operation, type_, arguments)
        except Exception as exc:  # ManagementError (a status), ManagementUnavailable (refused, not authorised)
            status = getattr(exc, "status", None)
            text = str(getattr(exc, "description", None) or exc)
            return (status, text) if isinstance(status, int) else (403, f"not allowed: {text}")
        properties = response.properties or {}
        return int(properties.get("statusCode", 200)), str(properties.get("statusDescription") or "done")

    return act
