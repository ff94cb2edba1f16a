"""A small blocking client for the server's AMQP management node ``$management`` (design.md §3, "Management").

The protocol, in the AMQP Management 1.0 style:

* request: a message to ``$management`` whose ``reply_to`` is the address of a dynamic receiver this client
  attached, whose ``id`` is a fresh string, and whose application properties hold ``operation`` (``QUERY``,
  ``READ``, ``CREATE``, ``DELETE``, ``RELOAD``, ``PURGE``), ``type`` (``subscription``, ``topic``,
  ``permissions``, ``bookmark``, ``journal``, ``queue``, ``connection``, ``server``) and the operation's
  arguments (``name``, ``client-id`` or ``global``=True, ``topic``, ``selector``, ``limit``, ``id``). Requests have
  no body. The types are described in ``gateway.management``,
  ``gateway.topic_admin``, ``gateway.store_reports`` and ``gateway.server_admin``.
* response: a message whose ``correlation_id`` is the request's id, with application properties ``statusCode``
  (200 OK, 204 deleted, 400 bad request, 403 forbidden, 404 not found, 409 conflict, 500 internal, 501 unknown
  operation) and ``statusDescription``; the body is the result (a list of maps for QUERY, a map for READ).

Owns: the connection, its two links and the request/response matching, each step bounded by a timeout. It
knows nothing about click or the store. ``ServerUnreachable`` means nothing listens at the address (the caller
may fall back to the store); ``ManagementUnavailable`` means something listens but the exchange failed;
``ManagementError`` is a non-2xx answer.
"""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

from proton import Message, ProtonException
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

from subgate.mapping.errors import UNAUTHORIZED

MANAGEMENT_ADDRESS = "$management"


class ServerUnreachable(Exception):
    """The TCP connection was refused: no server listens at the address."""


class ManagementUnavailable(Exception):
    """A server answered the TCP connect, but the management exchange could not be carried out."""


class ManagementError(Exception):
    """The management node answered with a status outside 2xx."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(f"{status} {description}")
        self.status = status
        self.description = description


class ManagementClient:
    """One connection to a server's management node; use as a context manager.

    Args:
        host, port: where the server listens.
        user, password: SASL PLAIN credentials; without them the connection uses what the server offers.
        timeout: seconds allowed for the connect, each attach and each request.
    """

    def __init__(
        self, host: str, port: int, *, user: str | None = None, password: str | None = None, timeout: float = 10.0
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._user = user
        self._password = password
        self._conn: BlockingConnection | None = None
        self._sender: BlockingSender | None = None
        self._receiver: BlockingReceiver | None = None
        self._reply_to = ""

    def __enter__(self) -> ManagementClient:
        self.open()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Connect and attach the reply receiver and the request sender.

        Raises:
            ServerUnreachable: nothing listens at host:port.
            ManagementUnavailable: the connection, authentication or an attach failed or timed out.
        """
        options: dict[str, Any] = {"timeout": self.timeout}
        if self._user is not None:
            options.update(
                user=self._user, password=self._password or "", allow_insecure_mechs=True, allowed_mechs="PLAIN"
            )
        try:
            self._conn = BlockingConnection(f"amqp://{_url_host(self.host)}:{self.port}", **options)
        except ProtonException as exc:
            self._probe()  # raises ServerUnreachable when nothing listens
            raise ManagementUnavailable(_describe(exc)) from exc
        try:
            self._receiver = self._conn.create_receiver(None, dynamic=True, credit=10)
            address = self._receiver.link.remote_source.address
            if not address:
                raise ManagementUnavailable("the server assigned no address to the dynamic reply receiver")
            self._reply_to = address
            self._sender = self._conn.create_sender(MANAGEMENT_ADDRESS)
        except ProtonException as exc:
            self.close()
            raise ManagementUnavailable(_describe(exc)) from exc
        except ManagementUnavailable:
            self.close()
            raise

    def close(self) -> None:
        conn, self._conn, self._sender, self._receiver = self._conn, None, None, None
        if conn is not None:
            try:
                conn.close()
            except ProtonException:
                pass  # the server went away first; nothing left to release

    def request(self, operation: str, type_: str, arguments: dict[str, Any]) -> Message:
        """Send one request and return its response.

        Raises:
            ManagementError: the status code is not 2xx.
            ManagementUnavailable: sending or waiting failed, or no response came within the timeout.
        """
        if self._conn is None or self._sender is None or self._receiver is None:
            raise RuntimeError("the management client is not open")
        request_id = str(uuid.uuid4())
        properties = {"operation": operation, "type": type_, **arguments}
        message = Message(
            address=MANAGEMENT_ADDRESS, id=request_id, reply_to=self._reply_to, properties=properties, durable=False
        )
        try:
            self._sender.send(message, timeout=self.timeout)
            response = self._await(request_id)
        except ProtonException as exc:
            raise ManagementUnavailable(_describe(exc)) from exc
        status, description = _status(response)
        if not 200 <= status < 300:
            raise ManagementError(status, description)
        return response

    # -- subscriptions ----------------------------------------------------------------------------------------
    def query_subscriptions(
        self, *, client_id: str | None = None, global_only: bool = False, topic: str | None = None
    ) -> list[dict[str, Any]]:
        arguments: dict[str, Any] = {}
        if client_id is not None:
            arguments["client-id"] = client_id
        if global_only:
            arguments["global"] = True
        if topic is not None:
            arguments["topic"] = topic
        body = self.request("QUERY", "subscription", arguments).body
        if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
            raise ManagementUnavailable(f"QUERY answered with {type(body).__name__}, not a list of maps")
        return [_plain_map(item) for item in body]

    def read_subscription(self, name: str, *, client_id: str | None) -> dict[str, Any]:
        body = self.request("READ", "subscription", _identity(name, client_id)).body
        if not isinstance(body, dict):
            raise ManagementUnavailable(f"READ answered with {type(body).__name__}, not a map")
        return _plain_map(body)

    def delete_subscription(self, name: str, *, client_id: str | None) -> None:
        self.request("DELETE", "subscription", _identity(name, client_id))

    # -- the store (bookmarks, journal figures: gateway.store_reports) ----------------------------------------
    def read_bookmark(self, name: str, *, client_id: str | None) -> dict[str, Any]:
        """The bookmark of a durable subscription (the server reads it from its store)."""
        return self._read_map("bookmark", _identity(name, client_id))

    def read_journal(self) -> dict[str, Any]:
        """The journal's figures, whole and per branch (the server reads them from its store)."""
        return self._read_map("journal", {})

    def _read_map(self, type_: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = self.request("READ", type_, arguments).body
        if not isinstance(body, dict):
            raise ManagementUnavailable(f"READ answered with {type(body).__name__}, not a map")
        return _plain_map(body)

    # -- topics -----------------------------------------------------------------------------------------------
    def query_topics(self, selector: str | None = None) -> dict[str, Any]:
        """The topic tree (``topics``), remove-with-session registrations (``removals``) and missing-topic
        handlers (``handlers``); only the topics ``selector`` selects when given."""
        arguments = {} if selector is None else {"selector": selector}
        body = self.request("QUERY", "topic", arguments).body
        if not isinstance(body, dict):
            raise ManagementUnavailable(f"QUERY answered with {type(body).__name__}, not a map")
        return _plain_map(body)

    def create_topic(self, path: str) -> bool:
        """Create a topic; False when it already existed."""
        return _status(self.request("CREATE", "topic", {"name": path}))[0] == 201

    def remove_topics(self, selector: str) -> list[str]:
        """Remove every topic ``selector`` selects; returns their paths."""
        body = self.request("DELETE", "topic", {"selector": selector}).body
        return [str(path) for path in body] if isinstance(body, list) else []

    def reload_permissions(self) -> None:
        self.request("RELOAD", "permissions", {})

    # -- queues, connections, the server (gateway.server_admin) ------------------------------------------------
    def query_queues(self) -> list[dict[str, Any]]:
        return self._query_list("queue")

    def read_queue(self, name: str) -> dict[str, Any]:
        return self._read_map("queue", {"name": name})

    def purge_queue(self, name: str, limit: int | None = None) -> dict[str, Any]:
        """Discard up to ``limit`` waiting messages (all without it); returns ``{purged, depth}``."""
        arguments: dict[str, Any] = {"name": name}
        if limit is not None:
            arguments["limit"] = limit
        body = self.request("PURGE", "queue", arguments).body
        if not isinstance(body, dict):
            raise ManagementUnavailable(f"PURGE answered with {type(body).__name__}, not a map")
        return _plain_map(body)

    def query_connections(self) -> list[dict[str, Any]]:
        return self._query_list("connection")

    def close_connection(self, number: int) -> None:
        self.request("DELETE", "connection", {"id": number})

    def read_server(self) -> dict[str, Any]:
        return self._read_map("server", {})

    def _query_list(self, type_: str) -> list[dict[str, Any]]:
        body = self.request("QUERY", type_, {}).body
        if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
            raise ManagementUnavailable(f"QUERY answered with {type(body).__name__}, not a list of maps")
        return [_plain_map(item) for item in body]

    # -- internals --------------------------------------------------------------------------------------------
    def _probe(self) -> None:
        """After a failed connect: tell "nothing listens" apart from every other failure (proton reports both
        as a ConnectionException)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout):
                pass
        except ConnectionRefusedError as exc:
            raise ServerUnreachable(f"connection to {self.host}:{self.port} refused") from exc
        except OSError:
            pass  # some other failure: the caller reports proton's description

    def _await(self, request_id: str) -> Message:
        assert self._receiver is not None
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ManagementUnavailable(f"no response from {MANAGEMENT_ADDRESS} within {self.timeout:g}s")
            response = self._receiver.receive(timeout=remaining)
            self._receiver.accept()
            if str(response.correlation_id) == request_id:
                return response
            # A late answer to an earlier request that timed out: drop it and keep waiting.


def _identity(name: str, client_id: str | None) -> dict[str, Any]:
    if client_id is None:
        return {"name": name, "global": True}
    return {"name": name, "client-id": client_id}


def _status(response: Message) -> tuple[int, str]:
    properties: dict[str, Any] = response.properties or {}
    description = str(properties.get("statusDescription") or "")
    try:
        return int(properties["statusCode"]), description
    except (KeyError, TypeError, ValueError):
        return 500, description or "the response carries no statusCode"


def _plain_map(value: dict[Any, Any]) -> dict[str, Any]:
    return {str(key): _plain(item) for key, item in value.items()}


def _plain(value: Any) -> Any:
    """Proton's decoded types (symbol, ulong, char...) as plain Python values, maps with str keys."""
    if isinstance(value, dict):
        return _plain_map(value)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return value


def _describe(exc: ProtonException) -> str:
    """The refusal, and what to do about it: a denied permission (``... denied to principal 'bob' (grant: ...)``,
    mapping.permissions.refusal) means the login worked and a grant is missing; any other refusal is the login."""
    text = str(exc) or type(exc).__name__
    if " denied to " in text:
        return f"{text}; the credentials were accepted, the grant is missing (docs/permissions.md)"
    if UNAUTHORIZED in text or "SASL" in text.upper():
        return f"{text} (check --user/--password)"
    return text


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
