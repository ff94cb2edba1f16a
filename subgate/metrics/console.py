"""The web console of ``--http``: its static page and its JSON routes, on the endpoint's HTTP threads.

Owns the console's routes (``metrics.http`` hands them over):

* ``GET /`` (and ``/console.js``, ``/console.css``): static files shipped in the package (``metrics/console/``),
  plain HTML, CSS and JavaScript: no build step, nothing fetched from elsewhere.
* ``GET /api/console``: a view the reactor built (``gateway.console_feed``: connections, queues, durable
  subscriptions with backlog and oldest-unaccepted age, the topic tree, remove-with-session registrations and
  missing-topic handlers, the server's totals), plus the journal writer's commit-time histogram count and sum,
  from which the page draws its charts. ``view`` (set by the server) marks the view wanted and, when nobody was
  watching, waits a bounded time for the reactor to build a fresh one (``ConsoleFeed.fresh``), so the first
  request after a pause gets current figures; ``{"pending": true}`` only when none came in time. Reading it takes
  what reading ``$management`` takes: ``read_access`` (set by the server: ``gateway.console_access``) answers 200,
  401 (no or wrong credentials, while logins are on), 403 (the user lacks ``CONTROL_SERVER``) or 429 (too many
  failed logins from that address or for that user lately: not checked, try again in a few seconds).
* ``POST /api/unsubscribe`` (``{"name", "client_id"}``, ``client_id`` null for a global subscription),
  ``POST /api/topics/remove`` (``{"selector"}``), ``POST /api/connections/close`` (``{"id"}``): the console is
  read-only unless the request carries HTTP basic credentials of a principal that may use ``$management``
  (``CONTROL_SERVER``). The action is carried out by ``act`` (set by the server): a ``$management`` request over
  an AMQP connection to the server itself, authenticated with those credentials (SASL PLAIN against the store's
  principals), so the server's own rules decide, exactly as for ``subgate unsubscribe`` and the other commands.
  Without credentials: 401 (with ``WWW-Authenticate`` unless the page asked, header ``X-Subgate-Console``, so the
  browser shows no dialog over the page's own sign-in form).

Nothing here touches the reactor: the view is one attribute read (or a bounded wait for the next one), an action
is a client connection of its own.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from subgate.metrics.collector import WriterFigures

Answer = tuple[int, dict[str, str], bytes]
Act = Callable[[str | None, str | None, str, str, dict[str, Any]], tuple[int, str]]
ReadAccess = Callable[[tuple[str, str] | None, str], int]  # (user, password) or None, address -> HTTP status

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
}
_JSON = "application/json"
PAGE_HEADER = "X-Subgate-Console"


def _static(name: str) -> bytes:
    return resources.files("subgate.metrics").joinpath("console", name).read_bytes()


def _json(status: int, body: Any, **headers: str) -> Answer:
    return status, {"Content-Type": _JSON, **headers}, json.dumps(body).encode()


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an ``Authorization: Basic ...`` header, or None."""
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon and user else None


def management_request(route: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | str:
    """The ``$management`` request an action route means (operation, type, arguments), or what is wrong."""
    if route == "/api/unsubscribe":
        name, client_id = body.get("name"), body.get("client_id")
        if not isinstance(name, str) or not name or not (client_id is None or isinstance(client_id, str)):
            return "give 'name' and 'client_id' (null for a global subscription)"
        scope: dict[str, Any] = {"global": True} if client_id is None else {"client-id": client_id}
        return "DELETE", "subscription", {"name": name, **scope}
    if route == "/api/topics/remove":
        selector = body.get("selector")
        if not isinstance(selector, str) or not selector:
            return "give 'selector'"
        return "DELETE", "topic", {"selector": selector}
    number = body.get("id")
    if isinstance(number, bool) or not isinstance(number, int):
        return "give 'id' (a connection number)"
    return "DELETE", "connection", {"id": number}


ACTIONS = ("/api/unsubscribe", "/api/topics/remove", "/api/connections/close")


class Console:
    """The console's routes; the server points ``view``, ``read_access`` and ``act`` at what it built."""

    def __init__(self) -> None:
        self.view: Callable[[], dict[str, Any] | None] = lambda: None
        self.read_access: ReadAccess = lambda _credentials, _address: 200
        self.act: Act | None = None

    def get(
        self,
        route: str,
        writer: WriterFigures | None,
        authorization: str | None = None,
        from_page: bool = False,
        address: str = "",
    ) -> Answer | None:
        """The answer to a GET of ``route``, or None when it is not the console's."""
        if route in STATIC:
            name, content_type = STATIC[route]
            return 200, {"Content-Type": content_type, "Cache-Control": "no-cache"}, _static(name)
        if route != "/api/console":
            return None
        refused = self._refused(authorization, from_page, address)
        if refused is not None:
            return refused
        view = self.view()
        if view is None:
            return _json(200, {"pending": True, "actions": self.act is not None})
        commit = None if writer is None else writer.commit_seconds
        figures = {"count": commit.count, "sum": commit.total} if commit is not None else None
        return _json(200, {**view, "commit": figures, "actions": self.act is not None})

    def _refused(self, authorization: str | None, from_page: bool, address: str) -> Answer | None:
        """401, 403 or 429 when these credentials (or none) may not read the console, else None."""
        found = credentials(authorization)
        verdict = self.read_access(found, address)
        if verdict == 429:
            error = "too many failed logins from this address or for this user: try again in a few seconds"
            return _json(429, {"error": error, "actions": self.act is not None}, **{"Retry-After": "5"})
        if verdict == 401:
            challenge = {} if from_page else {"WWW-Authenticate": 'Basic realm="subgate console"'}
            error = "sign in as a user holding CONTROL_SERVER" if found is None else "wrong user or password"
            return _json(401, {"error": error, "actions": self.act is not None}, **challenge)
        if verdict == 403:
            user = found[0] if found is not None else "anonymous"
            hint = f"subgate grants add CONTROL_SERVER --user {user}"
            error = f"{user!r} may not read the console: it needs the CONTROL_SERVER grant ({hint})"
            return _json(403, {"error": error, "actions": self.act is not None})
        return None

    def post(self, route: str, authorization: str | None, from_page: bool, raw: bytes) -> Answer | None:
        """The answer to a POST of ``route`` (an action), or None when it is not the console's."""
        if route not in ACTIONS:
            return None
        if self.act is None:
            return _json(404, {"error": "actions are off"})
        found = credentials(authorization)
        if found is None:
            challenge = {} if from_page else {"WWW-Authenticate": 'Basic realm="subgate console"'}
            return _json(401, {"error": "sign in as a user holding CONTROL_SERVER"}, **challenge)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _json(400, {"error": "the body is not JSON"})
        request = management_request(route, body if isinstance(body, dict) else {})
        if isinstance(request, str):
            return _json(400, {"error": request})
        status, message = self.act(found[0], found[1], *request)
        # The management status goes in the body; a success is HTTP 200 (a 204 could carry no body).
        return _json(200 if status < 300 else status, {"status": status, "message": message})
