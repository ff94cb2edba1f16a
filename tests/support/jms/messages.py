"""JMS messages as bytes: ``JmsMessage`` (what a test sends), ``encode_message`` (the sections Qpid JMS writes,
§7.1-7.5) and ``sections`` (an encoded message decoded section by section, for shape checks).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from proton import Described, byte, symbol, timestamp, ubyte, uint, ulong

from tests.support.jms.frames import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    _decode,
    _encode,
    _trim,
    described_list,
)
from tests.support.jms.vocabulary import QUEUE, TEMP_QUEUE, TEMP_TOPIC, TOPIC

NODE_CODES = {QUEUE: 0, TOPIC: 1, TEMP_QUEUE: 2, TEMP_TOPIC: 3}
MESSAGE_TYPES = {"message": 0, "object": 1, "map": 2, "bytes": 3, "stream": 4, "text": 5}


@dataclass
class JmsMessage:
    """A JMS message to send; ``type`` is one of MESSAGE_TYPES. Builders: ``JmsMessage.of(body)``."""

    body: Any = None
    type: str = "text"
    properties: dict[str, Any] = field(default_factory=dict)
    correlation_id: str | bytes | None = None
    jms_type: str | None = None
    reply_to: str | None = None
    reply_to_kind: str = QUEUE
    group_id: str | None = None
    group_sequence: int | None = None
    content_type: str | None = None

    @classmethod
    def of(cls, body: Any, **fields: Any) -> JmsMessage:
        """TextMessage for str, BytesMessage for bytes, MapMessage for dict, StreamMessage for list, Message for
        None, else an ObjectMessage with AMQP-typed encoding (amqp-value)."""
        if isinstance(body, JmsMessage):
            return body
        kinds = {str: "text", bytes: "bytes", dict: "map", list: "stream", type(None): "message"}
        kind = kinds.get(type(body), "object")
        return cls(body=body, type=kind, **fields)


_DEFAULT_CONTENT_TYPES = {
    ("bytes", bytes): "application/octet-stream",
    ("bytes", type(None)): "application/octet-stream",
    ("object", bytes): "application/x-java-serialized-object",
}


def encode_message(
    message: JmsMessage,
    *,
    message_id: str,
    to: str | None,
    to_kind: str | None,
    persistent: bool = True,
    priority: int = 4,
    ttl: int | None = None,
    delay: int | None = None,
    now_ms: int | None = None,
) -> bytes:
    """The sections Qpid JMS writes (§7.1-7.5). ``ttl`` and ``delay`` are in milliseconds."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    out = b""
    if persistent or priority != 4 or ttl:  # §7.1: no header for non-persistent, priority 4, no ttl
        header = [persistent, ubyte(min(max(priority, 0), 9)) if priority != 4 else None, uint(ttl) if ttl else None]
        out += _encode(described_list(HEADER, _trim(header)))
    annotations: dict[symbol, Any] = {symbol("x-opt-jms-msg-type"): byte(MESSAGE_TYPES[message.type])}
    if to is not None and to_kind in NODE_CODES:
        annotations[symbol("x-opt-jms-dest")] = byte(NODE_CODES[to_kind])
    if message.reply_to is not None:
        annotations[symbol("x-opt-jms-reply-to")] = byte(NODE_CODES[message.reply_to_kind])
    if delay:
        annotations[symbol("x-opt-delivery-time")] = now + delay
    out += _encode(Described(ulong(MESSAGE_ANNOTATIONS), annotations))
    content_type = message.content_type or _DEFAULT_CONTENT_TYPES.get((message.type, type(message.body)))
    properties = [
        message_id, None, to, message.jms_type, message.reply_to, message.correlation_id,
        symbol(content_type) if content_type else None, None, timestamp(now + ttl) if ttl else None,
        timestamp(now), message.group_id, uint(message.group_sequence) if message.group_sequence else None,
    ]  # fmt: skip
    out += _encode(described_list(PROPERTIES, _trim(properties)))
    if message.properties:
        out += _encode(Described(ulong(APPLICATION_PROPERTIES), dict(message.properties)))
    return out + _encode_body(message)


def sections(raw: bytes) -> list[Described]:
    """The sections of an encoded message, decoded one by one (header, annotations, properties, body ...)."""
    found: list[Described] = []
    for _ in range(len(raw)):
        if not raw:
            break
        section, consumed = _decode(raw)
        found.append(section)
        raw = raw[consumed:]
    return found


def _encode_body(message: JmsMessage) -> bytes:
    """§7.5: no body for Message, data for bytes (and serialized objects), amqp-sequence for streams."""
    if message.type == "message":
        return b""
    if message.type == "bytes" or (message.type == "object" and isinstance(message.body, bytes)):
        return _encode(Described(ulong(DATA), bytes(message.body or b"")))
    if message.type == "stream":
        return _encode(Described(ulong(AMQP_SEQUENCE), list(message.body or [])))
    return _encode(Described(ulong(AMQP_VALUE), message.body))
