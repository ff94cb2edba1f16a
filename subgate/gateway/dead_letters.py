"""Moving a queue's dead letters and expired messages to their addresses, atomically in the journal.

Owns the gateway half of ``mapping.address_settings`` (docs/jms.md, "Dead letters and expiry"). A queue hands a
message over with ``Queue.on_move`` when its delivery count reaches ``max_delivery_attempts``, when a consumer
rejects it, or when it expires; the message stays held by its queue meanwhile. ``DeadLetters.move`` makes the
copy (``codec.moved_copy``: the annotations ``x-opt-ORIG-ADDRESS``, ``x-opt-ORIG-QUEUE``,
``x-opt-ORIG-MESSAGE-SEQ`` and ``x-opt-subgate-reason``, delivery-count 0, and for an expired message no expiry),
numbers it on the target (a queue, created durable on first use, or a topic) through ``Router.prepare``, and
writes the copy's row and the original's removal in one database transaction (the writer's
``CommitTransaction``, as a JMS transaction's): after a crash the message is in exactly one of the two places.
Once committed the copy is routed and the original leaves its queue; if the commit fails, the original stays.
A message that was not journaled (a non-persistent one, a temporary queue's) moves at once, in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from subgate.engine import codec
from subgate.engine.nodes import Message, Queue, Topic
from subgate.gateway.router import Router
from subgate.mapping.address_settings import EXPIRED
from subgate.mapping.addresses import QUEUE

log = logging.getLogger("subgate.dead_letters")

MOVER_ID = "subgate:dead-letter"  # the publisher id of moved copies (their x-opt-bookmark)
Node = Queue | Topic


class DeadLetters:
    """``Queue.on_move`` for every queue the router governs (see the module docstring)."""

    def __init__(self, router: Router, route: Callable[[Node, Message], None], watch: Callable[[Node], None]) -> None:
        self.router = router
        self.route = route
        self.watch = watch  # a node created here is in service like one a client created

    def move(self, queue: Queue, message: Message, reason: str) -> None:
        settings = queue.address_settings
        expired = reason == EXPIRED
        target_name = settings.expiry_target(queue.name) if expired else settings.dead_letter_target(queue.name)
        target = self._target(target_name) if target_name and target_name != queue.name else None
        if target is None:
            log.warning(
                "dropped message %d of %r (%s): no %s address",
                message.seq,
                queue.name,
                reason,
                "expiry" if expired else "dead letter",
            )
            queue.moved(message, recorded=False)
            return
        annotations: dict[str, object] = {
            "x-opt-ORIG-ADDRESS": queue.address,
            "x-opt-ORIG-QUEUE": queue.name,
            "x-opt-ORIG-MESSAGE-SEQ": message.seq,
            "x-opt-subgate-reason": reason,
        }
        if expired:
            annotations["x-opt-ACTUAL-EXPIRY"] = message.expires
        raw = codec.moved_copy(message.raw, codec.scan(message.raw), annotations, keep_expiry=not expired)
        ingest = self.router.prepare(raw, codec.scan(raw), target, None, MOVER_ID)
        record = ingest.record
        cursor = queue.cursor if message.journaled else None
        if record is None and cursor is None:
            self._done(queue, message, target, ingest.message, reason, recorded=False)
            return
        if record is not None:
            self.router.submitted(record.id)

        def committed(error: BaseException | None) -> None:
            if record is not None:
                self.router.committed(record.id)
            if error is not None:
                log.error("moving message %d of %r to %r failed: %s", message.seq, queue.name, target.name, error)
                queue.moved(message, recorded=False, failed=True)
                return
            if cursor is not None:
                cursor.acks_since_low_water += 1
            self._done(queue, message, target, ingest.message, reason, recorded=cursor is not None)

        acks = [(cursor.cursor_id, message.seq)] if cursor is not None else []
        self.router.journal_transaction([record] if record is not None else [], acks, committed)

    def _done(
        self, queue: Queue, message: Message, target: Node, copy: Message, reason: str, *, recorded: bool
    ) -> None:
        queue.moved(message, recorded=recorded)
        log.info(
            "moved message %d of %r to %r (%s)",
            message.seq,
            queue.name,
            target.name,
            reason,
            extra={"event": "message-moved", "queue": queue.name, "target": target.name, "reason": reason},
        )
        self.route(target, copy)

    def _target(self, name: str) -> Node | None:
        """The node a moved message goes to: an existing one, else a new durable queue (Artemis's predefined DLQ
        and ExpiryQueue, and its auto-created dead letter resources, are queues)."""
        node = self.router.node(name)
        if node is None:
            try:
                node = self.router.create(name, QUEUE, durable=True, auto_created=True)
                self.watch(node)
            except Exception:  # noqa: BLE001 - a bad configured name: the message is dropped, and logged
                log.exception("cannot create %r", name)
                return None
        return node
