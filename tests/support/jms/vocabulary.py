"""The JMS words on the wire: destination and consumer kinds (``QUEUE`` ... ``SHARED``) with the source shape each
consumer kind attaches with (§2.2, §5.1), the outcomes every Qpid JMS link lists, the selector and no-local filter
descriptors (§2.4) and the coordinator capability (§6.1).
"""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list")
SELECTOR_FILTER = 0x0000468C00000004
NO_LOCAL_FILTER = 0x0000468C00000003
LOCAL_TRANSACTIONS = "amqp:local-transactions"

# Destination and consumer kinds. Node kinds double as the x-opt-jms-dest / x-opt-jms-reply-to codes (§7.2).
QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC = "queue", "topic", "temporary-queue", "temporary-topic"
DURABLE, SHARED_DURABLE, SHARED = "durable", "shared-durable", "shared"


@dataclass(frozen=True)
class _SourceShape:
    """One row of the §2.2 / §5.1 tables: what a consumer kind puts in its source."""

    capability: str
    durable: bool
    shared: bool = False


_CONSUMER_KINDS = {
    QUEUE: _SourceShape(QUEUE, False),
    TOPIC: _SourceShape(TOPIC, False),
    TEMP_QUEUE: _SourceShape(TEMP_QUEUE, False),
    TEMP_TOPIC: _SourceShape(TEMP_TOPIC, False),
    DURABLE: _SourceShape(TOPIC, True),
    SHARED_DURABLE: _SourceShape(TOPIC, True, shared=True),
    SHARED: _SourceShape(TOPIC, False, shared=True),
}
