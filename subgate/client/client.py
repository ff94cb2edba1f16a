"""``Client``: one connection (with failover) shared by the publishers and subscriptions made from it.

The client owns its I/O thread (``reactor.Reactor``). ``publisher`` and ``subscribe`` return at once: the link
is attached when the connection is (or comes back) up, and re-attached after every reconnect.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from subgate.client.bookmarks import recovery_point
from subgate.client.errors import ClientError, PublishError
from subgate.client.identity import PublisherIdFile
from subgate.client.publisher import Publisher, PublisherOptions
from subgate.client.reactor import Reactor
from subgate.client.stores import BookmarkStore
from subgate.client.subscriber import MemorySubscriptionManager, Subscriber, SubscriptionOptions


class Client:
    """A connection to subgate, failing over between ``url`` (one URL or a list, tried round robin)."""

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        user: str | None = None,
        password: str | None = None,
        client_id: str | None = None,
        reconnect_delay: tuple[float, float] = (0.05, 2.0),
        heartbeat: float | None = 10.0,
        subscription_manager: MemorySubscriptionManager | None = None,
    ) -> None:
        urls = [url] if isinstance(url, str) else list(url)
        self.client_id = client_id or f"subgate-client-{uuid.uuid4().hex[:12]}"
        self.subscriptions = subscription_manager or MemorySubscriptionManager()
        self._reactor = Reactor(
            urls,
            client_id=self.client_id,
            user=user,
            password=password,
            reconnect_delay=reconnect_delay,
            heartbeat=heartbeat,
        )
        with self._reactor.cond:
            self._reactor.owners.append(self.subscriptions)
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._reactor.connected

    @property
    def connections(self) -> int:
        """How many connections have opened so far (1 + the reconnects)."""
        return self._reactor.connections

    def connect_failures(self) -> dict[str, str]:
        """Why the last attempt on each URL failed (``Connection refused ...``), since the connection last opened:
        the SDK keeps retrying; a caller that must not wait (``subgate publish``) can give up once every URL has
        failed."""
        with self._reactor.cond:
            return dict(self._reactor.connect_failures)

    def wait_connected(self, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds for the connection to be open; True if it is."""
        with self._reactor.cond:
            return self._reactor.cond.wait_for(lambda: self._reactor.connected, timeout)

    def publisher(
        self,
        address: str,
        *,
        send_policy: str = "non_inline",
        max_batch_count: int = 1000,
        retry_duration: float = 10.0,
        publisher_id: str | None = None,
        publisher_id_file: str | Path | None = None,
        first_seq: int | None = None,
        queue: bool = False,
        on_loss: Callable[[PublishError], None] | None = None,
    ) -> Publisher:
        """A publisher to the topic (or, with ``queue=True``, the queue) ``address``.

        The publisher id is ``publisher_id``, else the one kept in ``publisher_id_file`` (generated there the
        first time), else a new random one. Seqs start at ``first_seq``; without it, at 1, or with
        ``publisher_id_file`` where the last publisher of that file left off (identity.py), so that a restarted
        publisher's new messages are not taken for duplicates. To re-send after a restart, give the
        ``first_seq`` of the messages being re-sent: the server drops what it already has.
        """
        self._check_open()
        id_file = PublisherIdFile(publisher_id_file) if publisher_id_file is not None and publisher_id is None else None
        if id_file is not None:
            publisher_id = id_file.publisher_id
        elif publisher_id is None:
            publisher_id = f"pub-{uuid.uuid4().hex[:16]}"
        if first_seq is None:
            first_seq = id_file.next_seq if id_file is not None else 1
        options = PublisherOptions(
            send_policy=send_policy,
            max_batch_count=max_batch_count,
            retry_duration=retry_duration,
            capability="queue" if queue else "topic",
            on_loss=on_loss,
        )
        return Publisher(self._reactor, address, publisher_id, first_seq, options, id_file)

    def subscribe(
        self,
        address: str,
        *,
        bookmark: str | None = None,
        bookmark_store: BookmarkStore | None = None,
        name: str | None = None,
        sub_id: str | None = None,
        prefetch: int = 500,
        queue: bool = False,
        live: bool = False,
    ) -> Subscriber:
        """Subscribe to ``address`` from ``bookmark`` (EPOCH, NOW, a time ``YYYYmmddTHHMMSS``, a bookmark).

        ``name`` makes a JMS durable subscription of this client's ``client_id``. With ``bookmark_store`` and no
        ``bookmark``, the subscription resumes from what the store recorded for ``sub_id`` (default: the name,
        else the address); when nothing is recorded, it starts at a UTC time a moment (``RECOVERY_MARGIN``, 2 s)
        before now, recorded in the store before the subscription is made. An explicit ``bookmark`` starts the
        store's record afresh there.
        """
        self._check_open()
        sub_id = sub_id or name or address
        start = bookmark
        if bookmark_store is not None:
            if bookmark is not None:
                bookmark_store.set_start(sub_id, bookmark)
            elif bookmark_store.recovery_bookmark(sub_id) is None:
                # Not NOW: a crash before the first discard would then lose what was received. A time a moment
                # before now is recorded first, and the subscription starts there, so a restart resumes exactly
                # where this process began (bookmarks.recovery_point).
                start = recovery_point(time.time())
                bookmark_store.set_start(sub_id, start)
        options = SubscriptionOptions(
            sub_id=sub_id,
            start=start,
            store=bookmark_store,
            name=name,
            capability="queue" if queue else "topic",
            prefetch=prefetch,
            live=live,
        )
        subscriber = Subscriber(self._reactor, address, options, self.subscriptions)

        def add() -> None:
            self.subscriptions.add(subscriber)
            if self._reactor.session is not None:
                subscriber.attach(self._reactor.session)

        self._reactor.call(add)
        return subscriber

    def _check_open(self) -> None:
        if self._closed:
            raise ClientError("the client is closed")

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection and stop the I/O thread. Close publishers first to let them linger."""
        if not self._closed:
            self._closed = True
            self._reactor.close(timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
