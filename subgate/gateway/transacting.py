"""The broker's side of local transactions (mapping doc §6): coordinator controls and enlisted work.

Owns answering declare/discharge on coordinator links, settling transactional transfers, keeping transactional
acknowledgements locked to their transaction, and carrying out commit (one journal transaction, then routing
and removal) and rollback (sends dropped, acknowledged messages back with delivery-count + 1). Rules about the
control bodies and the open transactions live in ``engine.transactions``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from proton import Delivery, Described, ulong

from subgate.engine.nodes import Message, Queue, Topic
from subgate.engine.transactions import DECLARE, DECLARED, TRANSACTIONAL_STATE, Transaction, Transactions, read_control
from subgate.gateway.links import CoordinatorLink, Outbound, reject
from subgate.gateway.router import Ingest, Router
from subgate.mapping.errors import INTERNAL_ERROR, Refused
from subgate.mapping.outcomes import MODIFIED, settle_outcome

log = logging.getLogger("subgate.transactions")

_OUTCOME_CODES = {0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: MODIFIED}
ROLLED_BACK = settle_outcome(MODIFIED, failed=True, undeliverable_here=False)
COORDINATOR_CREDIT = 100


def transactional_accept(delivery: Delivery, txn_id: bytes) -> None:
    """Settle a transactional transfer with transactional-state{txn-id, accepted} (mapping §6.3)."""
    delivery.local.data = [txn_id, Described(ulong(0x24), [])]  # type: ignore[list-item]  # stubs say list[int]
    delivery.update(TRANSACTIONAL_STATE)
    delivery.settle()


def _txn_id(data: list[Any]) -> bytes:
    return bytes(data[0]) if data else b""


class Transacting:
    """Transactions of the running broker; the broker hands it coordinator deliveries and enlisted work."""

    def __init__(self, router: Router, route: Callable[[Queue | Topic, Message], None]) -> None:
        self.router = router
        self._route = route
        self.transactions = Transactions()

    def open_coordinator(self, coordinator: CoordinatorLink) -> None:
        coordinator.link.flow(COORDINATOR_CREDIT)

    def transaction_of(self, delivery: Delivery) -> Transaction | None:
        """The transaction a transfer is enlisted in (transactional-state), if any.

        Raises:
            Refused: ``amqp:transaction:unknown-id``.
        """
        if delivery.remote_state != TRANSACTIONAL_STATE:
            return None
        return self.transactions.get(_txn_id(delivery.remote.data or []))

    def enlist_send(
        self, txn: Transaction, ingest: Ingest, node: Queue | Topic, delivery: Delivery, publisher_id: str
    ) -> None:
        """Held until the discharge: journaled (with the acks) and routed only at commit (mapping §6.3)."""
        if ingest.record is not None:
            self.router.submitted(ingest.record.id)  # holds every low-water mark below it until the discharge
        txn.sends.append((ingest, node, publisher_id))
        self.router.memory_limit.gauge.add(len(ingest.message.raw))  # held in memory until the discharge
        transactional_accept(delivery, txn.txn_id)

    def enlist_ack(self, out: Outbound, delivery: Delivery, message: Message) -> None:
        """An acknowledgement under a transaction: the message stays locked until the discharge (§6.4)."""
        data = delivery.remote.data or []
        outcome = data[1] if len(data) > 1 else None
        code = getattr(outcome, "descriptor", None)
        settlement = settle_outcome(_OUTCOME_CODES.get(int(code) if isinstance(code, int) else -1, "accepted"))
        delivery.settle()
        try:
            txn = self.transactions.get(_txn_id(data))
        except Refused:
            log.info("acknowledgement under an unknown transaction; the message is released")
            out.queue.settle(message, settle_outcome("released"), out)
            return
        txn.acks.append((out.queue, message, settlement))

    def control(self, coordinator: CoordinatorLink, delivery: Delivery) -> None:
        """A declare or discharge on a coordinator link (mapping §6.2), answered with a settled disposition."""
        if not delivery.readable or delivery.partial:
            return
        link = coordinator.link
        raw = link.recv(delivery.pending) or b""
        link.advance()
        try:
            control = read_control(raw)
            if control.kind == DECLARE:
                txn = self.transactions.declare(coordinator)
                delivery.local.data = [txn.txn_id]  # type: ignore[list-item]  # the stubs say list[int]
                delivery.update(DECLARED)
                delivery.settle()
            else:
                assert control.txn_id is not None
                txn = self.transactions.get(control.txn_id)
                self.transactions.finish(txn)
                if control.fail:
                    self._rollback(txn)
                    self._settle_discharge(delivery, None)
                else:
                    self._commit(txn, delivery)
        except Refused as refusal:
            reject(delivery, refusal.condition, refusal.description)
        if link.credit < COORDINATOR_CREDIT // 2:
            link.flow(COORDINATOR_CREDIT)

    def coordinator_ended(self, coordinator: CoordinatorLink) -> None:
        """The coordinator link (or its session or connection) went away: its open transactions roll back."""
        for txn in self.transactions.owned_by(coordinator):
            self.transactions.finish(txn)
            self._rollback(txn)

    def _settle_discharge(self, delivery: Delivery, error: BaseException | None) -> None:
        if delivery.settled:
            return
        if error is None:
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
        else:
            # Any condition but amqp:transaction:rollback makes Qpid JMS throw TransactionRolledBackException.
            reject(delivery, INTERNAL_ERROR, f"commit failed and was rolled back: {error}")

    def _commit(self, txn: Transaction, delivery: Delivery) -> None:
        """Write the transaction's messages and acknowledgements in one database transaction, then route and
        settle; the discharge is accepted only after that commit (mapping §6.2)."""
        self._journal_behind_paged(txn)
        records = [ingest.record for ingest, _, _ in txn.sends if ingest.record is not None]
        acks = [
            (queue.cursor.cursor_id, message.seq)
            for queue, message, settlement in txn.acks
            if settlement.remove and message.journaled and queue.cursor is not None
        ]

        def done(error: BaseException | None) -> None:
            if error is None:
                self._committed(txn)
            else:
                log.error("transaction commit failed: %s", error)
                self._rollback(txn)
            self._settle_discharge(delivery, error)

        if records or acks:
            self.router.journal_transaction(records, acks, done)
        else:
            done(None)

    def _journal_behind_paged(self, txn: Transaction) -> None:
        """Journal (in the same database transaction) the non-persistent sends that could otherwise overtake
        journaled ones at this commit (Router.prepare): those to a node that pages now, and, while paging is on,
        those after a journaled send of this transaction (routing that one may start the paging)."""
        router = self.router
        behind = False
        for i, (ingest, node, publisher_id) in enumerate(txn.sends):
            if ingest.record is not None:
                behind = True
            elif router.pages(node) or (behind and router.may_page(node)):
                late = router.journal_late(ingest, node, publisher_id)
                assert late.record is not None
                router.submitted(late.record.id)
                txn.sends[i] = (late, node, publisher_id)
                behind = True

    def _committed(self, txn: Transaction) -> None:
        self._release(txn)  # the queues count them from here
        for ingest, node, _ in txn.sends:
            if ingest.record is not None:
                self.router.committed(ingest.message.seq)
            self._route(node, ingest.message)
        for queue, message, settlement in txn.acks:
            if settlement.remove and message.journaled and queue.cursor is not None:
                queue.cursor.acks_since_low_water += 1
            queue.settle(message, settlement, None, recorded=True)

    def _release(self, txn: Transaction) -> None:
        """The transaction's sends leave its memory (engine.memory.HighWater)."""
        size = sum(len(ingest.message.raw) for ingest, _, _ in txn.sends)
        if size:
            self.router.memory_limit.gauge.drop(size)

    def _rollback(self, txn: Transaction) -> None:
        """Discard the sends; return the acknowledged messages with delivery-count + 1 (mapping §6.4)."""
        for ingest, _, _ in txn.sends:
            if ingest.record is not None:
                self.router.committed(ingest.message.seq)
        self._release(txn)
        txn.sends.clear()
        for queue, message, _ in txn.acks:
            queue.settle(message, ROLLED_BACK, None)
        txn.acks.clear()
