"""The journal's verbs on the submitting side: each ``submit_*`` builds its operation (``storage.operations``)
and hands it on, with a ticket in place of its token (``TokenTable``).

Owns what the two writers share, the writer thread (``storage.journal``) and the writer process
(``storage.journal_process``): the verbs of ``engine.ports.JournalPort``, the token table and the "a read is
waiting" flag. A writer sets ``_put`` (where an operation goes) and reads ``_hurry``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from subgate.engine.records import NewMessage, PageRead, StoreRead, SubscriptionRecord
from subgate.storage.applying import ReadAnswer
from subgate.storage.operations import (
    Acknowledge,
    AppendMessage,
    Barrier,
    CommitTransaction,
    CreateCursor,
    CreateNode,
    CreateSubscription,
    DropCursor,
    DropNode,
    DropRemoval,
    DropSubscription,
    MoveLowWater,
    Operation,
    ReadPage,
    RecordFailures,
    RegisterRemoval,
    SetSubscriptionConsumers,
    reading,
)

if TYPE_CHECKING:
    from subgate.storage.journal import BatchResult, CommitHealth


class TokenTable:
    """The submitting thread's table of tokens: ``issue`` keeps a token and gives the ticket that crosses to the
    writer; ``claim`` gives a result's tokens back for its tickets (each once). Submitting thread only."""

    __slots__ = ("_held", "_tickets")

    def __init__(self) -> None:
        self._held: dict[int, Any] = {}  # ticket -> token
        self._tickets = itertools.count(1)

    def issue(self, token: Any) -> int:
        ticket = next(self._tickets)
        self._held[ticket] = token
        return ticket

    def claim(self, result: BatchResult) -> BatchResult:
        return type(result)(
            [self._redeem(ticket) for ticket in result.tokens],
            result.error,
            result.size,
            [self._redeem(ticket) for ticket in result.failed],
        )

    def _redeem(self, ticket: int | ReadAnswer) -> Any:
        if isinstance(ticket, ReadAnswer):
            return ticket.claimed(self._held.pop(ticket.token))
        return self._held.pop(ticket)


class Submissions:
    """``JournalPort``'s verbs (enqueue only, on the submitting thread), for a writer that sets ``_put``."""

    _put: Callable[[Operation], None]
    health: CommitHealth | None  # how the writer's last commit went (None until the first)

    def __init__(self) -> None:
        self._tokens = TokenTable()  # touched only by the submitting thread
        self._ticket = self._tokens.issue
        self._hurry = False  # a read is queued (set here, cleared by the writer): no gathering

    def claim(self, result: BatchResult) -> BatchResult:
        """Call on the submitting thread with a result ``notify`` handed over: the same result with the tokens
        in place of their tickets (each ticket is claimed once)."""
        return self._tokens.claim(result)

    def submit_message(self, message: NewMessage, token: Any) -> None:
        # Once per journaled message: ``issue`` and ``put`` bound once (bench/journal_ops.py).
        self._put(AppendMessage(message, self._ticket(token)))

    def submit_ack(self, cursor_id: int, message_id: int) -> None:
        self._put(Acknowledge(cursor_id, message_id))

    def submit_failures(self, cursor_id: int, message_id: int, failures: int) -> None:
        self._put(RecordFailures(cursor_id, message_id, failures))

    def submit_low_water(self, cursor_id: int, low_water: int) -> None:
        self._put(MoveLowWater(cursor_id, low_water))

    def submit_node(self, node_id: int, name: str, kind: str, durable: bool, auto_created: bool) -> None:
        self._put(CreateNode(node_id, name, kind, durable, auto_created))

    def submit_drop_node(self, name: str) -> None:
        """A removed topic (or queue): its row goes, so it is not restored at the next start."""
        self._put(DropNode(name))

    def submit_removal_registration(self, row_id: int, branch: str, container_id: str | None, link_name: str) -> None:
        self._put(RegisterRemoval(row_id, branch, container_id, link_name))

    def submit_drop_removal_registration(self, row_id: int) -> None:
        self._put(DropRemoval(row_id))

    def submit_cursor(self, cursor_id: int, owner_kind: str, owner: str, address: str, low_water: int) -> None:
        self._put(CreateCursor(cursor_id, owner_kind, owner, address, low_water))

    def submit_drop_cursor(self, cursor_id: int) -> None:
        self._put(DropCursor(cursor_id))

    def submit_subscription(self, record: SubscriptionRecord) -> None:
        self._put(CreateSubscription(record))

    def submit_subscription_consumers(self, subscription_id: int, consumers: int) -> None:
        self._put(SetSubscriptionConsumers(subscription_id, consumers))

    def submit_drop_subscription(self, subscription_id: int, cursor_id: int | None) -> None:
        """Delete a subscription and, with it, its cursor's acks and failure counts."""
        self._put(DropSubscription(subscription_id, cursor_id))

    def submit_transaction(self, messages: list[NewMessage], acks: list[tuple[int, int]], token: Any) -> None:
        """A committed JMS transaction: its messages and its acknowledgements land in one database transaction;
        ``token`` comes back (in ``tokens`` or ``failed``) like a message's."""
        self._put(CommitTransaction(messages, acks, self._ticket(token)))

    def submit_page(self, read: PageRead, token: Callable[[Any], None]) -> None:
        """Read a page of a backlog once everything submitted before it is committed (so every row it returns
        has already been reported committed); ``token`` is called on the reactor thread with the list of
        ``StoredMessage`` rows, or with the exception if the read failed."""
        self._hurry = True
        self._put(ReadPage(read, self._ticket(token)))

    def submit_read(self, read: StoreRead, token: Callable[[Any], None]) -> None:
        """An operator read (a bookmark, the journal's figures: ``storage.journal_stats``), run once everything
        submitted before it is committed; ``token`` is called on the reactor thread with what it read, or with the
        exception if the read failed."""
        self._hurry = True
        self._put(reading(read, self._ticket(token)))

    def submit_barrier(self, token: Any) -> None:
        """``token`` comes back in a BatchResult once everything submitted before it is committed."""
        self._put(Barrier(self._ticket(token)))
