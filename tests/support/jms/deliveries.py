"""Deliveries and dispositions: the broker's outcomes (``Outcome``, read from a delivery's remote state), the
unsettled transfers waiting for one (``Pending``), Qpid JMS delivery tags (``_Tags``), the transactional-state a
client disposition carries, and ``SendFailed`` for a synchronous send that was not accepted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from proton import Delivery, Described

from tests.support.jms.errors import JmsError, RemoteError
from tests.support.jms.frames import (
    ACCEPTED,
    DECLARED,
    MODIFIED,
    REJECTED,
    RELEASED,
    TRANSACTIONAL_STATE,
    _plain,
    described_list,
)
from tests.support.jms.wire import Wire


@dataclass(frozen=True)
class Outcome:
    """A broker disposition. ``state``: accepted, rejected, released, modified, declared, or settled (no state).
    ``transactional`` marks a transactional-state wrapper; ``txn_id`` is its txn-id or the declared one."""

    state: str
    txn_id: bytes | None = None
    transactional: bool = False
    condition: str | None = None
    description: str | None = None
    failed: bool = False
    undeliverable: bool = False

    @property
    def accepted(self) -> bool:
        return self.state == "accepted"


_STATE_NAMES = {ACCEPTED: "accepted", REJECTED: "rejected", RELEASED: "released", MODIFIED: "modified"}


def _outcome_of_described(value: Any, txn_id: bytes | None) -> Outcome:
    if not isinstance(value, Described):
        return Outcome("settled", txn_id, True)
    code, fields = int(value.descriptor), list(value.value or [])
    error = fields[0] if code == REJECTED and fields else None
    condition = description = None
    if isinstance(error, Described):
        condition, description = (list(error.value) + [None, None])[:2]
    return Outcome(_STATE_NAMES.get(code, hex(code)), txn_id, True, condition and str(condition), description)


def _read_outcome(delivery: Delivery) -> Outcome:
    state, remote = delivery.remote_state, delivery.remote
    if state == Delivery.REJECTED:
        error = RemoteError.of(remote.condition) or RemoteError(None)
        return Outcome("rejected", condition=error.condition, description=error.description)
    if state == Delivery.MODIFIED:
        return Outcome("modified", failed=bool(remote.failed), undeliverable=bool(remote.undeliverable))
    if state in _STATE_NAMES:
        return Outcome(_STATE_NAMES[state])
    data = _plain(remote.data) or []
    if state == DECLARED:
        return Outcome("declared", bytes(data[0]) if data else None)
    if state == TRANSACTIONAL_STATE:
        return _outcome_of_described(data[1] if len(data) > 1 else None, bytes(data[0]) if data else None)
    return Outcome("settled" if not state else hex(int(state)))


class _Tags:
    """Qpid JMS delivery tags: a big-endian counter from 0x00, shortest form, reused once settled (§5.2)."""

    def __init__(self) -> None:
        self._next = 0
        self._free: deque[bytes] = deque()

    def acquire(self) -> bytes:
        if self._free:
            return self._free.popleft()
        tag_id, self._next = self._next, self._next + 1
        size = next(n for n in (1, 2, 4, 8) if tag_id < 1 << (8 * n))
        return tag_id.to_bytes(size, "big")

    def release(self, tag: bytes) -> None:
        if tag:
            self._free.append(tag)


class Pending:
    """An unsettled transfer (message, declare or discharge) waiting for the broker's settled disposition."""

    def __init__(self, wire: Wire, delivery: Delivery, tags: _Tags, tag: bytes, message_id: str | None) -> None:
        self.wire = wire
        self.delivery = delivery
        self.message_id = message_id
        self.outcome: Outcome | None = None
        self._tags = tags
        self._tag = tag
        delivery._jms_pending = self

    def _updated(self, delivery: Delivery) -> None:
        if delivery.settled and self.outcome is None:  # Qpid JMS reacts only to remotely settled deliveries
            self.outcome = _read_outcome(delivery)
            delivery.settle()
            self._tags.release(self._tag)

    def wait(self, timeout: float | None = None) -> Outcome:
        self.wire.pump(lambda: self.outcome is not None, timeout, "a settled disposition")
        assert self.outcome is not None
        return self.outcome


class _Presettled(Pending):
    def __init__(self, wire: Wire, delivery: Delivery, message_id: str | None) -> None:
        super().__init__(wire, delivery, _Tags(), b"", message_id)
        self.outcome = Outcome("settled")


class SendFailed(JmsError):
    """A synchronous send was not accepted (§5.2)."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        super().__init__(f"send settled as {outcome.state}", _error_of(outcome))


def _error_of(outcome: Outcome) -> RemoteError | None:
    return RemoteError(outcome.condition, outcome.description) if outcome.condition else None


def _transactional(delivery: Delivery, txn_id: bytes, outcome: int) -> None:
    """python-proton writes an unknown disposition type as described(type, local.data)."""
    delivery.local.data = [txn_id, described_list(outcome, [])]
    delivery.update(TRANSACTIONAL_STATE)
