"""What a JMS selector sees of a stored message: identifier values read from its AMQP bytes.

This module owns the mapping from selector identifiers to the fields of an AMQP message as the broker
holds it (raw bytes, read with ``engine.codec``), after the mapping doc §7.7, with message and
correlation ids in their JMS string forms (§7.4). The selector language itself is ``mapping.selectors``;
this module only supplies the ``lookup`` it evaluates against. No proton, no I/O.

| identifier                   | value                                                                   |
|------------------------------|-------------------------------------------------------------------------|
| `JMSDeliveryMode`            | 'PERSISTENT' if header durable, else 'NON_PERSISTENT'                   |
| `JMSPriority`                | header priority, 4 when absent, above 9 read as 9 (as the client does)  |
| `JMSMessageID`               | JMS string form of message-id (§7.4), NULL when absent                  |
| `JMSCorrelationID`           | JMS string form of correlation-id; a string without `ID:` unchanged     |
| `JMSTimestamp`               | creation-time in ms, 0 when absent (what the client reads)              |
| `JMSExpiration`              | absolute-expiry-time in ms, 0 when absent                               |
| `JMSDeliveryTime`            | annotation x-opt-delivery-time if an integer, else JMSTimestamp (§7.2)  |
| `JMSType`                    | subject                                                                 |
| `JMSXGroupID`/`JMSXGroupSeq` | group-id / group-sequence                                               |
| `JMSXDeliveryCount`          | header delivery-count + 1, as in the bytes given                        |
| `JMS_AMQP_REPLY_TO_GROUP_ID` | reply-to-group-id                                                       |
| anything else                | the application-properties entry of that name; NULL when absent         |

The names above always come from the header, annotations and properties, even when
application-properties has an entry of the same name (the client never puts them there). Values are
plain ``bool``/``int``/``float``/``str`` (the codec's exact-type wrappers are unwrapped) so the
selector's type rules apply; binary, uuid, list, map and decimal values are returned as they are, which
a selector treats as present but comparable with nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from subgate.engine import codec
from subgate.mapping import selectors

__all__ = ["compile_selector", "jms_correlation_id", "jms_message_id", "message_lookup"]

_PLAIN = frozenset({bool, int, float, str, type(None)})
_ID_PREFIX = "ID:"
# After "ID:", these mark an id the client encoded itself; a string id that starts with one is escaped.
_ENCODING_PREFIXES = ("AMQP_NO_PREFIX:", "AMQP_STRING:", "AMQP_UUID:", "AMQP_ULONG:", "AMQP_BINARY:")


def compile_selector(text: str | None) -> Callable[[bytes], bool] | None:
    """Parse a consumer's selector once and return a predicate over encoded messages.

    Returns:
        None when ``text`` is None or blank (no selector: every message matches); otherwise a function
        that is True for the messages the selector is true for. A message whose sections cannot be
        decoded matches no selector.

    Raises:
        mapping.selectors.SelectorError: ``text`` is not a valid JMS selector.
    """
    if text is None or not text.strip():
        return None
    selector = selectors.parse(text)

    def matches(raw: bytes) -> bool:
        try:
            return selector.matches(message_lookup(raw))
        except codec.CodecError:
            return False

    return matches


def message_lookup(raw: bytes, env: codec.Envelope | None = None) -> Callable[[str], object]:
    """The ``lookup`` of ``mapping.selectors`` for one encoded message.

    Each name is resolved once and cached; application-properties are decoded on the first name that
    is not in the header table, and not at all when the selector reads header fields only.

    Args:
        raw: the encoded message.
        env: ``codec.scan(raw)`` when the caller already has it.

    Raises:
        engine.codec.CodecError: from ``scan``, or from the lookup when application-properties are
            malformed.
    """
    envelope = codec.scan(raw) if env is None else env
    cache: dict[str, object] = {}
    properties: dict[str, object] | None = None

    def lookup(name: str) -> object:
        nonlocal properties
        if name in cache:
            return cache[name]
        read = _HEADERS.get(name)
        if read is not None:
            value = read(envelope)
        else:
            if properties is None:
                properties = codec.application_properties(raw, envelope)
            value = _plain(properties.get(name))
        cache[name] = value
        return value

    return lookup


def jms_message_id(value: object) -> str | None:
    """JMSMessageID for an AMQP message-id (§7.4); None when absent or of a type ids cannot have."""
    if isinstance(value, str) and not value.startswith(_ID_PREFIX):
        return "ID:AMQP_NO_PREFIX:" + value
    return _id_string(value)


def jms_correlation_id(value: object) -> str | None:
    """JMSCorrelationID for an AMQP correlation-id (§7.4): as JMSMessageID, except that a string
    without the ``ID:`` prefix is returned unchanged."""
    if isinstance(value, str) and not value.startswith(_ID_PREFIX):
        return str(value)
    return _id_string(value)


def _id_string(value: object) -> str | None:
    if isinstance(value, str):  # starts with "ID:"
        if value.startswith(_ENCODING_PREFIXES, len(_ID_PREFIX)):
            return "ID:AMQP_STRING:" + value
        return str(value)
    if isinstance(value, uuid.UUID):
        return f"ID:AMQP_UUID:{value}"
    if isinstance(value, codec.ULong):
        return f"ID:AMQP_ULONG:{int(value)}"
    if type(value) is bytes:
        return "ID:AMQP_BINARY:" + value.hex().upper()
    return None


def _plain(value: object) -> object:
    """Unwrap the codec's exact-type wrappers; leave values without a selector type as they are."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def _delivery_time(env: codec.Envelope) -> int:
    """x-opt-delivery-time when it is an integer (long or timestamp), else the creation time (§7.2)."""
    value = env.annotations.get("x-opt-delivery-time")
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return env.creation_time or 0


_HEADERS: dict[str, Callable[[codec.Envelope], object]] = {
    "JMSDeliveryMode": lambda env: "PERSISTENT" if env.durable else "NON_PERSISTENT",
    "JMSPriority": lambda env: min(env.priority, 9),
    "JMSMessageID": lambda env: jms_message_id(env.message_id),
    "JMSCorrelationID": lambda env: jms_correlation_id(env.correlation_id),
    "JMSTimestamp": lambda env: env.creation_time or 0,
    "JMSExpiration": lambda env: env.absolute_expiry_time or 0,
    "JMSDeliveryTime": _delivery_time,
    "JMSType": lambda env: _plain(env.subject),
    "JMSXGroupID": lambda env: _plain(env.group_id),
    "JMSXGroupSeq": lambda env: env.group_sequence,
    "JMSXDeliveryCount": lambda env: env.delivery_count + 1,
    "JMS_AMQP_REPLY_TO_GROUP_ID": lambda env: _plain(env.reply_to_group_id),
}
