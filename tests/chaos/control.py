"""The control clients of a kill cycle: a remove-with-session registration that must outlive every crash (the
same container-id re-attaches the same link name after each restart, inside the reconnection timeout), and a
missing-topic handler that must be asked, and obeyed, about a subscribe to a missing topic in every cycle."""

from __future__ import annotations

import itertools

from tests.support.control import ControlClient

REMOVAL_BRANCH = "chaos/rws"
REMOVAL_CONTAINER = "chaos-control"
REMOVAL_LINK = "chaos-removal"
HANDLER_BRANCH = "chaos/missing"
_probes = itertools.count(1)


def register_removal(hostport: str) -> tuple[ControlClient, list[str]]:
    """Attach (or take over) the registration; the client stays open until the next kill."""
    client = ControlClient(hostport, REMOVAL_CONTAINER)
    end = client.register_removal(REMOVAL_BRANCH, name=REMOVAL_LINK)
    if end.refusal is not None:
        return client, [f"remove-with-session registration refused: {end.refusal}"]
    return client, []


def probe_missing_topic_handler(hostport: str) -> tuple[ControlClient, list[str]]:
    """Register a handler, subscribe to a missing topic below it, answer proceed: the subscribe must succeed.

    Returns the handler's client (left registered until the kill) and the problems seen."""
    handler_client = ControlClient(hostport, f"chaos-handler-{next(_probes)}")
    handler = handler_client.register_handler(HANDLER_BRANCH)
    if handler.refusal is not None:
        return handler_client, [f"missing-topic handler refused: {handler.refusal}"]
    with ControlClient(hostport) as subscriber:
        path = f"{HANDLER_BRANCH}/t{next(_probes)}"
        attach = subscriber.attach(path)
        try:
            notification = handler.receive(timeout=10)
        except TimeoutError:
            return handler_client, [f"missing-topic handler not asked about {path}"]
        selector = notification.properties.get("selector")
        notification.accept()
        handler_client.wait(0.05)
        refusal = subscriber.await_attach(attach, timeout=10)
    problems = [] if refusal is None else [f"subscribe to {path} refused after the handler proceeded: {refusal}"]
    if selector is None or path not in str(selector):
        problems.append(f"handler notified with selector {selector!r}, not {path!r}")
    return handler_client, problems
