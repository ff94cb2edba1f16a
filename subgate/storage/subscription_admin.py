"""The operator's JMS subscriptions on the store itself, while no server runs (``subgate subscriptions`` offline).

Owns opening a store for these commands (an out-of-date schema is refused), listing and finding subscription
records with their backlogs (counted with ``storage.subscriptions.backlog_count``, through each subscription's
selector), and removing one under the offline rules: durable subscriptions only, and none whose stored consumer
count is not zero (only a server that died without cleaning up leaves one behind; its next start resets it).
Every refusal is an ``OfflineRefusal`` carrying the sentence the operator reads. The selector engine is handed in
(``compile_selector``), so this module needs nothing of the broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from subgate.engine.records import SubscriptionRecord
from subgate.storage.db import make_engine, no_store_message, schema_status, session_factory
from subgate.storage.subscriptions import backlog_count, delete_subscription, find_subscription, list_subscriptions

Matcher = Callable[[bytes], bool]


class OfflineRefusal(Exception):
    """What the operator asked for cannot be done on the store; the message says why."""


@dataclass(frozen=True, slots=True)
class Counted:
    """A subscription as stored, with its backlog (None when its selector cannot be evaluated here)."""

    record: SubscriptionRecord
    backlog: int | None


def describe(name: str, client_id: str | None) -> str:
    return f"global subscription {name!r}" if client_id is None else f"subscription {name!r} of client-id {client_id!r}"


class OfflineSubscriptions:
    """The subscriptions of the store at ``url`` (see the module docstring). Close it with ``close()``."""

    def __init__(
        self,
        url: str,
        compile_selector: Callable[[str], Matcher | None],
        warn: Callable[[str], None],
    ) -> None:
        self._engine = make_engine(url)
        current, head = schema_status(self._engine)
        if current is None:
            self._engine.dispose()
            raise OfflineRefusal(no_store_message(url))
        if current != head:
            self._engine.dispose()
            raise OfflineRefusal(
                f"the store is at schema revision {current or 'none (empty database)'} but this subgate needs "
                f"{head}; run 'subgate db upgrade'"
            )
        self._sessions = session_factory(self._engine)
        self._compile = compile_selector
        self._warn = warn

    def close(self) -> None:
        self._engine.dispose()

    def list(self, *, client_id: str | None, global_only: bool, topic: str | None) -> list[Counted]:
        with self._sessions() as session:
            records = list_subscriptions(session, client_id=client_id, global_only=global_only, topic=topic)
            return [self._counted(session, record) for record in records]

    def show(self, name: str, client_id: str | None) -> Counted:
        with self._sessions() as session:
            record = find_subscription(session, name, client_id=client_id)
            if record is None:
                raise OfflineRefusal(f"no {describe(name, client_id)}")
            return self._counted(session, record)

    def unsubscribe(self, name: str, client_id: str | None) -> None:
        with self._sessions.begin() as session:
            record = find_subscription(session, name, client_id=client_id)
            if record is None:
                raise OfflineRefusal(f"no {describe(name, client_id)}")
            if not record.durable:
                raise OfflineRefusal(
                    f"{describe(name, client_id)} is not durable: it goes away when its last consumer detaches"
                )
            if record.consumers > 0:
                raise OfflineRefusal(
                    f"{describe(name, client_id)} has {record.consumers} active consumer(s) in the store, but no "
                    "server is running: the server stopped without cleaning up. Start the server (it resets "
                    "consumer counts at start-up), or unsubscribe through it once its consumers are gone."
                )
            delete_subscription(session, record)

    def _counted(self, session: Session, record: SubscriptionRecord) -> Counted:
        matches, usable = self._matcher(record)
        return Counted(record, backlog_count(session, record, matches) if usable else None)

    def _matcher(self, record: SubscriptionRecord) -> tuple[Matcher | None, bool]:
        """(predicate, usable): the subscription's compiled selector; not usable when it cannot be compiled."""
        if record.selector is None or not record.selector.strip():
            return None, True
        try:
            return self._compile(record.selector), True
        except Exception as exc:  # a stored selector this build cannot evaluate: say so, count nothing
            self._warn(
                f"cannot evaluate the selector of {describe(record.name, record.client_id)} ({exc}); backlog unknown"
            )
            return None, False
