"""Subscription link names per connection (§2.3), as Qpid JMS's ``AmqpSubscriptionTracker`` keeps them: which
durable and shared subscriptions are active, the ``s``, ``s|2``, ``s|global``, ``s|volatile1`` ... names their
links get, and the local refusals for clashing names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support.jms.errors import RefusedLocally
from tests.support.jms.vocabulary import DURABLE, SHARED, SHARED_DURABLE


@dataclass
class _SharedSubscription:
    address: str
    selector: str | None
    added: int = 0
    active: set[str] = field(default_factory=set)


class SubscriptionTracker:
    """``AmqpSubscriptionTracker``: link names per connection, per name, durable and volatile apart."""

    def __init__(self) -> None:
        self.exclusive: set[str] = set()
        self.shared: dict[str, dict[str, _SharedSubscription]] = {SHARED_DURABLE: {}, SHARED: {}}

    def reserve(self, name: str, kind: str, address: str, selector: str | None, has_client_id: bool) -> str:
        if not name or "|" in name:
            raise RefusedLocally(f"invalid subscription name {name!r}")
        if kind == DURABLE:
            if not has_client_id:
                raise RefusedLocally("a non-shared durable subscription needs a ClientID")
            if name in self.exclusive or name in self.shared[SHARED_DURABLE]:
                raise RefusedLocally(f"durable subscription {name!r} is already active on this connection")
            self.exclusive.add(name)
            return name
        if kind == SHARED_DURABLE and name in self.exclusive:
            raise RefusedLocally(f"{name!r} is an active non-shared durable subscription")
        subscription = self.shared[kind].setdefault(name, _SharedSubscription(address, selector))
        if (subscription.address, subscription.selector) != (address, selector):
            raise RefusedLocally("Subscription details dont match existing subscriber")
        subscription.added += 1
        link_name = _shared_link_name(name, kind, subscription.added, has_client_id)
        subscription.active.add(link_name)
        return link_name

    def release(self, name: str, kind: str, link_name: str) -> None:
        if kind == DURABLE:
            self.exclusive.discard(name)
            return
        table = self.shared.get(kind, {})
        subscription = table.get(name)
        if subscription is None:
            return
        subscription.active.discard(link_name)
        if not subscription.active:  # the counter restarts once the name is unused (§2.3)
            del table[name]

    def active(self, name: str) -> bool:
        return name in self.exclusive or name in self.shared[SHARED_DURABLE]


def _shared_link_name(name: str, kind: str, count: int, has_client_id: bool) -> str:
    """``s``, ``s|2``; ``s|global``, ``s|global2``; ``s|volatile1``; ``s|global-volatile1`` (§2.2)."""
    if kind == SHARED:
        return f"{name}|{'volatile' if has_client_id else 'global-volatile'}{count}"
    base = name if has_client_id else f"{name}|global"
    if count == 1:
        return base
    return f"{base}|{count}" if has_client_id else f"{base}{count}"
