"""Address settings over ``$management``: type ``address-settings`` (docs/jms.md, "Dead letters and expiry").

Owns the request/response contract of this type:

``QUERY``
    the entries in force, least specific first: a list of maps ``{match, settings}`` (``settings`` the keys that
    entry sets). 200.
``READ`` (``name`` = a queue or topic name)
    the effective settings there, every key, as a map with ``name``. 200.
``UPDATE`` (``name`` = a match pattern, ``settings`` = ``key=value;key=value``)
    sets that pattern's entry (replacing what it set before) for every queue, now and later. 200; 400 for an
    unknown key or a bad value, nothing changed.
``DELETE`` (``name`` = a match pattern)
    removes the entry. 204, or 404.

Changes last while the server runs; the configuration file is what survives a restart (as publisher modes).
"""

from __future__ import annotations

from dataclasses import asdict

from subgate.engine.nodes import Queue, Topic
from subgate.gateway.management import Request, Response
from subgate.gateway.router import Router
from subgate.mapping.address_settings import AddressSettingsError

ADDRESS_SETTINGS_TYPE = "address-settings"


def handle(request: Request, router: Router) -> Response:
    rules = router.rules
    operation = request.operation
    if operation == "QUERY":
        return Response(200, "OK", [{"match": e.pattern, "settings": dict(e.values)} for e in rules.entries])
    name = str(request.properties.get("name") or "")
    if not name:
        return Response(400, "an address-settings request needs a name (a queue name or a match pattern)")
    if operation == "READ":
        return Response(200, "OK", {"name": name, **asdict(rules.for_name(name))})
    others = tuple(text for text in rules.texts if text.partition(":")[0].strip() != name)
    if operation == "UPDATE":
        body = str(request.properties.get("settings") or "")
        try:
            rules.replace((*others, f"{name}:{body}"), _queues(router))
        except AddressSettingsError as exc:
            return Response(400, str(exc))
        return Response(200, f"address settings of {name!r} set")
    if operation == "DELETE":
        if len(others) == len(rules.texts):
            return Response(404, f"no address settings entry matches {name!r}")
        rules.replace(others, _queues(router))
        return Response(204, f"address settings of {name!r} removed")
    return Response(501, f"unknown operation {operation!r} for type {ADDRESS_SETTINGS_TYPE!r}")


def _queues(router: Router) -> list[Queue]:
    """Every queue there is: the queues, and the topics' subscription queues (a selector's, once per topic)."""
    queues: dict[int, Queue] = {}
    for node in router.all_nodes():
        for queue in node.subscriptions if isinstance(node, Topic) else [node]:
            queues[id(queue)] = queue
    return list(queues.values())
