"""Local transactions (mapping doc §6): coordinator controls and the work each transaction holds.

Owns reading the coordinator's ``declare``/``discharge`` bodies and the bookkeeping of open transactions: the
messages sent under a transaction (routed only at commit) and the deliveries acknowledged under one (locked to
it: removed at commit, returned with delivery-count + 1 at rollback). No proton here; the broker answers the
frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from subgate.engine import codec
from subgate.engine.nodes import Message, Queue
from subgate.mapping.errors import DECODE_ERROR, TRANSACTION_UNKNOWN_ID, Refused
from subgate.mapping.outcomes import Settlement

DECLARE = 0x31
DISCHARGE = 0x32
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
AMQP_VALUE = 0x77
_NAMES = {"amqp:declare:list": DECLARE, "amqp:discharge:list": DISCHARGE}


@dataclass(frozen=True, slots=True)
class Control:
    """A coordinator request: declare (``txn_id`` None) or discharge (commit unless ``fail``)."""

    kind: int
    txn_id: bytes | None = None
    fail: bool = False


def _code(descriptor: object) -> int | None:
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        return descriptor
    if isinstance(descriptor, str):
        return _NAMES.get(descriptor)
    return None


def read_control(raw: bytes) -> Control:
    """Decode a coordinator transfer: ``amqp-value(declare{...})`` or ``amqp-value(discharge{txn-id, fail})``.

    Raises:
        Refused: ``amqp:decode-error`` for anything else.
    """
    try:
        env = codec.scan(raw)
        section, _ = codec.decode_value(raw, env.body_start)
    except codec.CodecError as exc:
        raise Refused(DECODE_ERROR, f"malformed coordinator message: {exc}") from None
    body = section.value if isinstance(section, codec.Described) and section.descriptor == AMQP_VALUE else None
    if not isinstance(body, codec.Described):
        raise Refused(DECODE_ERROR, "a coordinator message must carry amqp-value(declare) or amqp-value(discharge)")
    kind = _code(body.descriptor)
    fields = body.value if isinstance(body.value, list) else []
    if kind == DECLARE:
        return Control(DECLARE)
    if kind == DISCHARGE and fields and isinstance(fields[0], bytes):
        fail = len(fields) > 1 and fields[1] is True
        return Control(DISCHARGE, bytes(fields[0]), fail)
    raise Refused(DECODE_ERROR, "a coordinator message must carry amqp-value(declare) or amqp-value(discharge)")


@dataclass(eq=False, slots=True)
class Transaction:
    """One open transaction. ``sends``: (prepared ingest, node, publisher id); ``acks``: (queue, message, outcome)."""

    txn_id: bytes
    owner: Any  # the coordinator link state that declared it
    sends: list[tuple[Any, Any, str]] = field(default_factory=list)
    acks: list[tuple[Queue, Message, Settlement]] = field(default_factory=list)


class Transactions:
    """Open transactions by id (ids are unique for the life of the process)."""

    def __init__(self) -> None:
        self.open: dict[bytes, Transaction] = {}
        self._next = 0

    def declare(self, owner: Any) -> Transaction:
        self._next += 1
        txn = Transaction(b"txn:%d" % self._next, owner)
        self.open[txn.txn_id] = txn
        return txn

    def get(self, txn_id: bytes) -> Transaction:
        """Raises:
        Refused: ``amqp:transaction:unknown-id`` when no open transaction has that id."""
        txn = self.open.get(txn_id)
        if txn is None:
            raise Refused(TRANSACTION_UNKNOWN_ID, f"unknown transaction {txn_id!r}")
        return txn

    def finish(self, txn: Transaction) -> None:
        self.open.pop(txn.txn_id, None)

    def owned_by(self, owner: Any) -> list[Transaction]:
        return [t for t in self.open.values() if t.owner is owner]
