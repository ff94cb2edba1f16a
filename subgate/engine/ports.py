"""The journal as the engine's callers see it: ``JournalPort``, the verbs the router, the pager and the
subscriptions use to hand work to the store, without knowing who does it.

Every verb only enqueues and returns at once (the reactor thread never waits on the store: docs/threading.md); a
``token`` comes back when the work is committed (``storage.journal.JournalWriter`` claims it on the reactor
thread). ``storage.journal.JournalWriter`` is the implementation (it satisfies the protocol structurally; mypy
checks that where the server wires them together), and a test can pass any object with these verbs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from subgate.engine.records import NewMessage, PageRead, StoreRead, SubscriptionRecord


class JournalPort(Protocol):
    """Enqueue-only journal writes, page reads and operator reads, applied in the order submitted."""

    def submit_message(self, message: NewMessage, token: Any) -> None: ...

    def submit_ack(self, cursor_id: int, message_id: int) -> None: ...

    def submit_failures(self, cursor_id: int, message_id: int, failures: int) -> None: ...

    def submit_low_water(self, cursor_id: int, low_water: int) -> None: ...

    def submit_node(self, node_id: int, name: str, kind: str, durable: bool, auto_created: bool) -> None: ...

    def submit_drop_node(self, name: str) -> None: ...

    def submit_cursor(self, cursor_id: int, owner_kind: str, owner: str, address: str, low_water: int) -> None: ...

    def submit_subscription(self, record: SubscriptionRecord) -> None: ...

    def submit_subscription_consumers(self, subscription_id: int, consumers: int) -> None: ...

    def submit_drop_subscription(self, subscription_id: int, cursor_id: int | None) -> None: ...

    def submit_transaction(self, messages: list[NewMessage], acks: list[tuple[int, int]], token: Any) -> None: ...

    def submit_page(self, read: PageRead, token: Callable[[Any], None]) -> None: ...

    def submit_read(self, read: StoreRead, token: Callable[[Any], None]) -> None: ...

    def submit_barrier(self, token: Any) -> None: ...
