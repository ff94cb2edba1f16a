"""A control client for the topic tree's control links, on a raw connection (``tests.support.jms.JmsWire``).

Remove-with-session registrations (a sending link to ``$subgate/remove-with-session/<branch>``), missing-topic
handlers (a receiving link from ``$subgate/missing-topic/<path>``) and subscribe/fetch attaches that do not
wait for their answer, so one test thread can play the subscriber and the handler in turn. ``abort()`` drops
the socket without a close frame (a crash); ``close()`` sends the close frame. ``topic_paths``, ``removals`` and
``handler_counts`` read the tree through ``$management``.
"""

from __future__ import annotations

import itertools
from typing import Any

from proton import Endpoint, Link

from subgate.cli.management import ManagementClient
from tests.support.jms import QUEUE, Consumer, JmsWire, RemoteError, _LinkEnd, _put_symbols

REMOVAL = "$subgate/remove-with-session/"
HANDLER = "$subgate/missing-topic/"
_names = itertools.count(1)


class ControlClient:
    """One connection (container-id ``container_id``) with one session for its control links."""

    def __init__(
        self,
        address: str,
        container_id: str | None = None,
        *,
        user: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.wire = JmsWire.connect(address, client_id=container_id, user=user, password=password, timeout=timeout)
        self.session = self.wire.session()

    # -- remove-with-session ---------------------------------------------------------------------------------
    def register_removal(self, branch: str, *, name: str | None = None) -> _LinkEnd:
        """Attach the registration link; ``refusal`` is set (and the link gone) when the server refused it."""
        link = self.session.session.sender(name or f"removal-{next(_names)}")
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.source.address = link.name
        link.target.address = REMOVAL + branch
        end = _LinkEnd(self.wire, link)
        link.open()
        end._await_attach(None, check=False)
        return end

    # -- missing-topic handlers ------------------------------------------------------------------------------
    def register_handler(self, path: str, *, credit: int = 10, presettled: bool = False) -> Consumer:
        """Attach a handler link (``refusal`` set when refused) and give it ``credit``."""
        address = HANDLER + path if path else HANDLER.rstrip("/")
        consumer = self.attach(address, (), credit=credit, presettled=presettled)
        self.await_attach(consumer)
        return consumer

    # -- subscribers -----------------------------------------------------------------------------------------
    def attach(
        self, address: str, capabilities: tuple[str, ...] = ("topic",), *, credit: int = 10, presettled: bool = False
    ) -> Consumer:
        """Send a receiving link's attach without waiting for the answer (see ``await_attach``)."""
        link = self.session.session.receiver(f"receiver-{next(_names)}")
        link.snd_settle_mode = Link.SND_SETTLED if presettled else Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.source.address = address
        if capabilities:
            _put_symbols(link.source.capabilities, list(capabilities))
        consumer = Consumer(self.session, link, QUEUE, address, None, credit)
        link.open()
        self.wire.flush()
        return consumer

    def await_attach(self, consumer: Consumer, timeout: float | None = None) -> RemoteError | None:
        """Wait for the answer to ``attach``; returns the refusal (None when attached, then credit is given)."""
        consumer._await_attach(timeout, check=False)
        if consumer.refusal is None and consumer.prefetch:
            consumer.flow(consumer.prefetch)
        return consumer.refusal

    def answered(self, consumer: Consumer) -> bool:
        """Whether the server has answered ``attach`` yet (pumping what has arrived, without waiting)."""
        self.wire.wait(0.05)
        return not consumer.link.state & Endpoint.REMOTE_UNINIT or consumer.remote_closed is not None

    # -- the connection --------------------------------------------------------------------------------------
    def wait(self, seconds: float) -> None:
        self.wire.wait(seconds)

    def close(self) -> None:
        self.wire.close()

    def abort(self) -> None:
        self.wire.abort()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *_exc: Any) -> None:
        if not self.wire.socket_closed:
            self.wire.close()


# -- observing the tree ------------------------------------------------------------------------------------------
def topic_paths(server: Any, selector: str) -> list[str]:
    """The topic paths ``selector`` selects on the running ``server`` (a SubgateProcess), sorted."""
    with ManagementClient("127.0.0.1", server.port) as client:
        return sorted(t["path"] for t in client.query_topics(selector)["topics"])


def removals(server: Any) -> dict[str, int]:
    """Remove-with-session registrations per branch."""
    with ManagementClient("127.0.0.1", server.port) as client:
        return {r["branch"]: r["registrations"] for r in client.query_topics()["removals"]}


def handler_counts(server: Any) -> dict[str, int]:
    """Missing-topic handlers per path."""
    with ManagementClient("127.0.0.1", server.port) as client:
        return {h["path"]: h["handlers"] for h in client.query_topics()["handlers"]}
