"""Which node an attach or a relayed message means: node-type resolution (mapping doc §5.1, §5.2).

Rules, in order:
1. A terminus capability says the type: ``queue``/``temporary-queue`` → queue, ``topic``/``temporary-topic`` →
   topic. Both kinds at once is refused (``amqp:invalid-field``).
2. Without one, an existing node's type wins.
3. Without either, the server's default node type applies.
An existing node of the other type refuses the attach with ``amqp:precondition-failed``; an unknown address
with auto-create off is ``amqp:not-found``. For anonymous relay the ``x-opt-jms-dest`` byte plays the role of
the capability (0/2 queue, 1/3 topic).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from subgate.mapping.errors import INVALID_FIELD, NOT_FOUND, PRECONDITION_FAILED, UNAUTHORIZED, Refused

QUEUE = "queue"
TOPIC = "topic"

CAPABILITY_KINDS: dict[str, str] = {
    "queue": QUEUE,
    "temporary-queue": QUEUE,
    "topic": TOPIC,
    "temporary-topic": TOPIC,
}

JMS_DEST_KINDS: dict[int, str] = {0: QUEUE, 1: TOPIC, 2: QUEUE, 3: TOPIC}

# Addresses of temporary (dynamic) nodes start with this; they are never auto-created (a deleted temporary
# destination stays deleted).
TEMPORARY_PREFIX = "$temp."
# Artemis' fully qualified queue name: ``<address>::<queue>`` (here: a topic and one of its subscriptions' queues).
FQQN_SEPARATOR = "::"


def split_fqqn(address: str) -> tuple[str, str] | None:
    """``(address, queue)`` of a fully qualified queue name, or None for a plain address.

    Raises:
        Refused: ``amqp:invalid-field`` when either part is empty.
    """
    if FQQN_SEPARATOR not in address:
        return None
    node, _, queue = address.partition(FQQN_SEPARATOR)
    if not node or not queue:
        raise Refused(INVALID_FIELD, f"{address!r} is not a fully qualified queue name (<address>::<queue>)")
    return node, queue


def check_temporary_use(address: str, *, owned: bool, receiving: bool) -> None:
    """Anyone may send to a temporary node (its address travels in ``reply-to``: that is what it is for); only
    the connection that created it may consume from it, browse it or delete it (JMS 2.0 §4.4.3).

    Raises:
        Refused: ``amqp:unauthorized-access`` for a receiver on another connection's temporary node.
    """
    if receiving and not owned:
        raise Refused(
            UNAUTHORIZED,
            f"temporary destination {address!r} belongs to another connection: only the connection that created "
            "it may consume from it or browse it",
        )


def is_temporary(address: str) -> bool:
    """Whether ``address`` names a temporary (dynamic) node: those belong to the connection that made them."""
    return address.startswith(TEMPORARY_PREFIX)


def temporary_address(kind: str, unique: str) -> str:
    return f"{TEMPORARY_PREFIX}{kind}.{unique}"


def dynamic_kind(capabilities: Iterable[str]) -> str:
    """The type of a dynamic node: a topic when asked for (``temporary-topic``/``topic``), else a queue."""
    return kind_from_capabilities(capabilities) or QUEUE


@dataclass(frozen=True, slots=True)
class NodeDecision:
    """The node an address resolves to, and whether it has to be created first."""

    address: str
    kind: str
    create: bool


def kind_from_capabilities(capabilities: Iterable[str]) -> str | None:
    kinds = {CAPABILITY_KINDS[c] for c in capabilities if c in CAPABILITY_KINDS}
    if len(kinds) > 1:
        raise Refused(INVALID_FIELD, "capabilities ask for both a queue and a topic")
    return kinds.pop() if kinds else None


def kind_from_jms_dest(annotation: object) -> str | None:
    """The node type an ``x-opt-jms-dest`` annotation asks for (None when absent or not understood)."""
    if isinstance(annotation, int) and not isinstance(annotation, bool):
        return JMS_DEST_KINDS.get(annotation)
    return None


def resolve_node(
    address: str,
    requested_kind: str | None,
    existing_kind: str | None,
    *,
    default_kind: str,
    auto_create: bool,
) -> NodeDecision:
    """Decide which node ``address`` means, or refuse.

    Raises:
        Refused: ``amqp:not-found`` for an unknown address with auto-create off, ``amqp:precondition-failed``
            when the address exists as the other node type.
    """
    if not address:
        raise Refused(INVALID_FIELD, "an address is required")
    if existing_kind is not None:
        if requested_kind is not None and requested_kind != existing_kind:
            raise Refused(PRECONDITION_FAILED, f"address {address!r} is a {existing_kind}, not a {requested_kind}")
        return NodeDecision(address, existing_kind, create=False)
    if address.startswith(TEMPORARY_PREFIX):
        raise Refused(NOT_FOUND, f"temporary destination {address!r} does not exist (any more)")
    if not auto_create:
        raise Refused(NOT_FOUND, f"no node at address {address!r} (auto-create is off)")
    return NodeDecision(address, requested_kind or default_kind, create=True)
