"""The journal writer: one thread that applies the server's store writes in group commits.

Owns the only write path of a running server. The reactor thread calls the ``submit_*`` methods (which only
enqueue and never wait); the writer thread takes everything queued, applies it in one transaction, commits,
and then hands the tokens of what was committed to ``notify`` (the gateway turns that into an
``EventInjector`` event, so completions run back on the reactor thread). Under load a batch grows to whatever
queued up during the previous commit, so the commit rate adapts to the load by itself.

Writes are idempotent or monotonic where a crash-and-retry could repeat them: cursors only move forward, acks
are a set.

A submission's token (what comes back when it is committed) never reaches the writer thread: the writer keeps it
in a table on the submitting side and queues a ticket number instead; ``claim`` turns a result's tickets back
into tokens on the submitting thread. The gateway's tokens hold proton objects, and proton-c is not
thread-safe: a proton wrapper released on the writer thread (its ``__del__`` calls ``pn_decref``) races the
reactor's own calls into proton-c, which do not hold the GIL.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, delete, insert, update

from subgate.engine.records import NewMessage, PageRead, StoredMessage, SubscriptionRecord
from subgate.storage.bulk import insert_acks, insert_messages
from subgate.storage.catalog import read_page
from subgate.storage.models import (
    Ack,
    AckCursor,
    DeliveryFailure,
    Node,
    RemovalRegistration,
    Subscription,
    table_of,
)

log = logging.getLogger("subgate.journal")

_ACKS = table_of(Ack)
_FAILURES = table_of(DeliveryFailure)
_CURSORS = table_of(AckCursor)
_NODES = table_of(Node)
_SUBSCRIPTIONS = table_of(Subscription)
_REMOVALS = table_of(RemovalRegistration)
_STOP = object()
_ATTEMPTS = 5


@dataclass(slots=True)
class BatchResult:
    """What one commit did: the tokens it made durable, and those it could not write (with the error). From the
    writer thread they are tickets; ``JournalWriter.claim`` gives the tokens."""

    tokens: list[Any]
    error: BaseException | None
    size: int
    failed: list[Any] = field(default_factory=list)


class _PageAnswer:
    """A page read's token (a ticket until claimed) with its rows: called like a barrier token, it calls
    ``token(rows)`` (or ``token(error)`` when the batch failed)."""

    __slots__ = ("token", "rows")

    def __init__(self, token: Any, rows: list[StoredMessage]) -> None:
        self.token = token
        self.rows = rows

    def __call__(self, error: BaseException | None) -> None:
        self.token(self.rows if error is None else error)


def _dt(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000.0, tz=UTC)


class JournalWriter:
    """Group-commit writer thread. Start with ``start()``, stop with ``close()`` (flushes everything)."""

    def __init__(
        self,
        engine: Engine,
        notify: Callable[[BatchResult], None],
        *,
        max_batch: int = 4000,
    ) -> None:
        self._engine = engine
        self._notify = notify
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="subgate-journal", daemon=True)
        self.batches = 0
        self.rows = 0
        self._held: dict[int, Any] = {}  # ticket -> token; touched only by the submitting thread
        self._tickets = itertools.count(1)

    # -- called on the reactor thread (enqueue only) ------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def _ticket(self, token: Any) -> int:
        ticket = next(self._tickets)
        self._held[ticket] = token
        return ticket

    def claim(self, result: BatchResult) -> BatchResult:
        """Call on the submitting thread with a result ``notify`` handed over: the same result with the tokens
        in place of their tickets (each ticket is claimed once)."""
        return BatchResult(
            [self._redeem(ticket) for ticket in result.tokens],
            result.error,
            result.size,
            [self._redeem(ticket) for ticket in result.failed],
        )

    def _redeem(self, ticket: Any) -> Any:
        if isinstance(ticket, _PageAnswer):
            return _PageAnswer(self._held.pop(ticket.token), ticket.rows)
        return self._held.pop(ticket)

    def submit_message(self, message: NewMessage, token: Any) -> None:
        self._queue.put(("msg", message, self._ticket(token)))

    def submit_ack(self, cursor_id: int, message_id: int) -> None:
        self._queue.put(("ack", cursor_id, message_id))

    def submit_failures(self, cursor_id: int, message_id: int, failures: int) -> None:
        self._queue.put(("fail", cursor_id, message_id, failures))

    def submit_low_water(self, cursor_id: int, low_water: int) -> None:
        self._queue.put(("low", cursor_id, low_water))

    def submit_node(self, node_id: int, name: str, kind: str, durable: bool, auto_created: bool) -> None:
        self._queue.put(("node", node_id, name, kind, durable, auto_created))

    def submit_drop_node(self, name: str) -> None:
        """A removed topic (or queue): its row goes, so it is not restored at the next start."""
        self._queue.put(("drop_node", name))

    def submit_removal_registration(self, row_id: int, branch: str, container_id: str | None, link_name: str) -> None:
        self._queue.put(("removal", row_id, branch, container_id, link_name))

    def submit_drop_removal_registration(self, row_id: int) -> None:
        self._queue.put(("drop_removal", row_id))

    def submit_cursor(self, cursor_id: int, owner_kind: str, owner: str, address: str, low_water: int) -> None:
        self._queue.put(("cursor", cursor_id, owner_kind, owner, address, low_water))

    def submit_drop_cursor(self, cursor_id: int) -> None:
        self._queue.put(("drop_cursor", cursor_id))

    def submit_subscription(self, record: SubscriptionRecord) -> None:
        self._queue.put(("sub", record))

    def submit_subscription_consumers(self, subscription_id: int, consumers: int) -> None:
        self._queue.put(("sub_consumers", subscription_id, consumers))

    def submit_drop_subscription(self, subscription_id: int, cursor_id: int | None) -> None:
        """Delete a subscription and, with it, its cursor's acks and failure counts."""
        self._queue.put(("drop_sub", subscription_id, cursor_id))

    def submit_transaction(self, messages: list[NewMessage], acks: list[tuple[int, int]], token: Any) -> None:
        """A committed JMS transaction: its messages and its acknowledgements land in one database transaction;
        ``token`` comes back (in ``tokens`` or ``failed``) like a message's."""
        self._queue.put(("txn", messages, acks, self._ticket(token)))

    def submit_page(self, read: PageRead, token: Callable[[Any], None]) -> None:
        """Read a page of a backlog once everything submitted before it is committed (so every row it returns
        has already been reported committed); ``token`` is called on the reactor thread with the list of
        ``StoredMessage`` rows, or with the exception if the read failed."""
        self._queue.put(("page", read, self._ticket(token)))

    def submit_barrier(self, token: Any) -> None:
        """``token`` comes back in a BatchResult once everything submitted before it is committed."""
        self._queue.put(("barrier", self._ticket(token)))

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    # -- the writer thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while len(batch) < self._max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(item is _STOP for item in batch):
                stopping = True
                batch = [item for item in batch if item is not _STOP]
            if batch:
                self._commit(batch)

    def _commit(self, batch: Sequence[Any]) -> None:
        tokens: list[Any] = []
        failed: list[Any] = []
        error: BaseException | None = None
        for attempt in range(_ATTEMPTS):
            try:
                tokens = self._apply(batch)
                error = None
                break
            except Exception as exc:  # retried: a store blip must not fail a whole batch of publishers
                error = exc
                log.warning("journal commit failed (attempt %d of %d): %s", attempt + 1, _ATTEMPTS, exc)
                time.sleep(0.05 * 2**attempt)
        if error is not None:
            # Isolate the bad item(s): apply one by one, so every other write still lands.
            tokens, failed, error = self._apply_each(batch)
        self.batches += 1
        self.rows += len(batch)
        self._notify(BatchResult(tokens, error, len(batch), failed))

    def _apply_each(self, batch: Sequence[Any]) -> tuple[list[Any], list[Any], BaseException | None]:
        tokens: list[Any] = []
        failed: list[Any] = []
        error: BaseException | None = None
        for item in batch:
            try:
                tokens.extend(self._apply([item]))
            except Exception as exc:
                error = exc
                log.error("journal write %s failed and was not applied: %s", item[0], exc)
                if item[0] in ("msg", "barrier", "txn", "page"):
                    failed.append(item[-1])
        return tokens, failed, error

    def _apply(self, batch: Sequence[Any]) -> list[Any]:
        messages: list[NewMessage] = []
        acks: list[tuple[int, int]] = []
        tokens: list[Any] = []
        with self._engine.begin() as conn:
            for item in batch:
                kind = item[0]
                if kind == "msg":
                    messages.append(item[1])
                    tokens.append(item[2])
                elif kind == "ack":
                    acks.append((item[1], item[2]))
                elif kind == "barrier":
                    tokens.append(item[1])
                elif kind == "txn":
                    messages.extend(item[1])
                    acks.extend(item[2])
                    tokens.append(item[3])
                else:
                    # Reads see, and structural writes keep their order relative to, the rows queued before them.
                    _flush(conn, messages, acks)
                    if kind == "page":
                        tokens.append(_PageAnswer(item[2], read_page(conn, item[1])))
                    else:
                        _apply_structural(conn, item)
            _flush(conn, messages, acks)
        return tokens


def _flush(conn: Any, messages: list[NewMessage], acks: list[tuple[int, int]]) -> None:
    """Write the message and ack rows gathered so far, and empty both lists."""
    if messages:
        insert_messages(conn, messages)
        messages.clear()
    if acks:
        insert_acks(conn, acks)
        acks.clear()


def _apply_structural(conn: Any, item: tuple[Any, ...]) -> None:
    kind = item[0]
    now = datetime.now(UTC)
    if kind == "node":
        _, node_id, name, node_kind, durable, auto_created = item
        conn.execute(
            insert(_NODES).values(
                id=node_id, name=name, kind=node_kind, durable=durable, auto_created=auto_created, created_at=now
            )
        )
    elif kind == "removal":
        _, row_id, branch, container_id, link_name = item
        conn.execute(
            insert(_REMOVALS).values(
                id=row_id, branch=branch, container_id=container_id, link_name=link_name, created_at=now
            )
        )
    elif kind == "drop_removal":
        conn.execute(delete(_REMOVALS).where(_REMOVALS.c.id == item[1]))
    elif kind == "drop_node":
        conn.execute(delete(_NODES).where(_NODES.c.name == item[1]))
    elif kind == "cursor":
        _, cursor_id, owner_kind, owner, address, low_water = item
        conn.execute(
            insert(_CURSORS).values(
                id=cursor_id,
                owner_kind=owner_kind,
                owner=owner,
                address=address,
                low_water=low_water,
                updated_at=now,
            )
        )
    elif kind == "low":
        _, cursor_id, low_water = item
        conn.execute(
            update(_CURSORS)
            .where(_CURSORS.c.id == cursor_id, _CURSORS.c.low_water < low_water)
            .values(low_water=low_water, updated_at=now)
        )
        conn.execute(delete(_ACKS).where(_ACKS.c.cursor_id == cursor_id, _ACKS.c.message_id <= low_water))
        conn.execute(delete(_FAILURES).where(_FAILURES.c.cursor_id == cursor_id, _FAILURES.c.message_id <= low_water))
    elif kind == "fail":
        _, cursor_id, message_id, failures = item
        conn.execute(delete(_FAILURES).where(_FAILURES.c.cursor_id == cursor_id, _FAILURES.c.message_id == message_id))
        conn.execute(insert(_FAILURES).values(cursor_id=cursor_id, message_id=message_id, failures=failures))
    elif kind == "drop_cursor":
        _drop_cursor(conn, item[1])
    elif kind == "sub":
        record: SubscriptionRecord = item[1]
        conn.execute(
            insert(_SUBSCRIPTIONS).values(
                id=record.id,
                kind=record.kind,
                durable=record.durable,
                client_id=record.client_id,
                name=record.name,
                topic=record.topic,
                selector=record.selector,
                no_local=record.no_local,
                consumers=record.consumers,
                cursor_id=record.cursor_id,
                created_at=_dt(record.created_ms),
            )
        )
    elif kind == "sub_consumers":
        _, subscription_id, consumers = item
        conn.execute(update(_SUBSCRIPTIONS).where(_SUBSCRIPTIONS.c.id == subscription_id).values(consumers=consumers))
    elif kind == "drop_sub":
        _, subscription_id, cursor_id = item
        conn.execute(delete(_SUBSCRIPTIONS).where(_SUBSCRIPTIONS.c.id == subscription_id))
        if cursor_id is not None:
            _drop_cursor(conn, cursor_id)
    else:  # pragma: no cover - a programming error, not input
        raise ValueError(f"unknown journal operation {kind!r}")


def _drop_cursor(conn: Any, cursor_id: int) -> None:
    conn.execute(delete(_ACKS).where(_ACKS.c.cursor_id == cursor_id))
    conn.execute(delete(_FAILURES).where(_FAILURES.c.cursor_id == cursor_id))
    conn.execute(delete(_CURSORS).where(_CURSORS.c.id == cursor_id))
