"""Management of publishers over ``$management``: types ``publisher-mode`` and ``publisher``.

Owns the request/response contract for these two types (docs/bookmarks.md, "Publisher modes"):

Type ``publisher-mode``
    ``QUERY``: the branches with a mode set (from ``--publisher-modes`` or by ``UPDATE``), a list of maps
    ``{name, mode}``. 200.
    ``READ`` (``name`` = a topic path or a queue name): the mode in force there, ``{name, mode, branch}``
    (``branch`` is the most specific branch that set it, null for the default). 200.
    ``UPDATE`` (``name``, ``mode`` = ``store_confirm_send`` or ``store_send_noconfirm``): sets the mode of that
    branch for every node under it, now and later. 200; 400 for an unknown mode or no name.
    ``DELETE`` (``name``): the branch goes back to the mode of the branch above it. 204, or 404.
    Changes last while the server runs; the configuration file is what survives a restart.
Type ``publisher``
    ``READ`` (``name`` = a publisher id): ``{publisher-id, high-water, duplicates}`` (duplicates dropped since
    the start). 200, or 404 for an id never seen. ``QUERY``: every publisher id seen. 200.

The router's ``NodeModes`` applies a mode to the nodes; this module decides the answers.
"""

from __future__ import annotations

from subgate.engine.duplicates import PublisherMarks
from subgate.gateway.management import Request, Response
from subgate.gateway.router import Router
from subgate.mapping.branch_modes import PUBLISHER_MODES, BranchModeError, check_mode, publisher_mode, setting_branch

PUBLISHER_MODE_TYPE = "publisher-mode"
PUBLISHER_TYPE = "publisher"
TYPES = (PUBLISHER_MODE_TYPE, PUBLISHER_TYPE)


def handle(request: Request, router: Router, marks: PublisherMarks) -> Response:
    if request.type == PUBLISHER_TYPE:
        return _publisher(request, marks)
    operation = request.operation
    modes = router.modes
    branches = modes.publisher_modes
    if operation == "QUERY":
        return Response(200, "OK", [{"name": b, "mode": m} for b, m in sorted(branches.items())])
    name = str(request.properties.get("name") or "").strip("/")
    if not name:
        return Response(400, "a publisher-mode request needs a name (a topic path, a branch or a queue)")
    if operation == "READ":
        branch = setting_branch(branches, name)
        return Response(200, "OK", {"name": name, "mode": publisher_mode(branches, name), "branch": branch})
    if operation == "UPDATE":
        mode = str(request.properties.get("mode") or "").lower()
        try:
            check_mode(mode, PUBLISHER_MODES, f"publisher mode of {name!r}")
        except BranchModeError as exc:
            return Response(400, str(exc))
        modes.set_publisher_modes({**branches, name: mode}, router.all_nodes())
        return Response(200, f"publisher mode of {name!r} is {mode}")
    if operation == "DELETE":
        if name not in branches:
            return Response(404, f"no publisher mode is set on {name!r}")
        modes.set_publisher_modes({b: m for b, m in branches.items() if b != name}, router.all_nodes())
        return Response(204, f"publisher mode of {name!r} removed")
    return Response(501, f"unknown operation {operation!r} for type {PUBLISHER_MODE_TYPE!r}")


def _publisher(request: Request, marks: PublisherMarks) -> Response:
    if request.operation == "QUERY":
        return Response(200, "OK", [marks.view(pid) for pid in sorted(marks.marks)])
    if request.operation != "READ":
        return Response(501, f"unknown operation {request.operation!r} for type {PUBLISHER_TYPE!r}")
    name = str(request.properties.get("name") or "")
    if name not in marks.marks:
        return Response(404, f"no publisher {name!r} has been seen")
    return Response(200, "OK", marks.view(name))
