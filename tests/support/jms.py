"""A synchronous test client that puts on the wire what Apache Qpid JMS 2.x puts there.

``JmsWire`` owns one loopback socket, a proton client ``Transport`` + ``Connection`` + ``Collector``, and nothing
else: no thread, no reactor. Every wait goes through ``JmsWire.pump(until, timeout)``, which moves bytes both ways,
handles the collector's events and raises ``TimeoutError`` (or ``ConnectionLost``) when ``until()`` does not hold
in time. Frame values follow /work/shared/docs/jms-amqp-mapping.md (the "spec"; section numbers below refer to it).

What proton-c cannot produce is fixed on the way out: every frame proton writes passes through a small
rewriter (``_shape``) before it reaches the socket. It sets the consumer source ``default-outcome`` (proton-c
always writes null), link ``desired-capabilities`` (no proton API), begin ``handle-max=65535``, drops the
``initial-delivery-count``/``max-message-size`` that proton-c puts on receiver attaches, and trims trailing
default terminus fields, so ``target{}`` is an empty list as in proton-j. SASL is done by hand, because proton-c
sends the initial response ``"anonymous"`` and no hostname for ANONYMOUS, where Qpid JMS sends an empty response
and the URI host. Every frame in both directions is kept, decoded, in ``JmsWire.frames`` for shape checks.

Known differences that remain (see ``KNOWN_DIFFERENCES``): begin ``next-outgoing-id`` is 0 (proton-j: 1), and
dispositions for ``modified`` carry both flags explicitly. Heartbeats are only sent while a test pumps.

Usage (``server.address`` is ``127.0.0.1:<port>``)::

    with JmsWire.connect(server.address, client_id="app1") as jms:
        s = jms.session()
        sub = s.consumer("prices", DURABLE, name="s", selector="region = 'eu'")    # link "s", durable=2
        s.producer("prices", TOPIC).send("hello", properties={"region": "eu"})
        assert sub.receive().accept().body == "hello"
        sub.detach()                                   # detach(closed=false): the subscription stays
        again = s.consumer("prices", DURABLE, name="s", selector="region = 'eu'")   # resume
        again.detach()
        jms.unsubscribe("s")                           # null-source lookup; raises JmsError (e.g. not-found)

        tx = jms.session(transacted=True)              # coordinator attach + declare
        c = tx.consumer("orders")
        c.receive().accept()                           # transactional-state{txn-id, accepted}, settled
        assert tx.rollback().state == "accepted"       # drain, discharge(fail) + pipelined declare, release, re-flow
        assert c.receive().delivery_count == 1

Other entry points: ``s.consumer(topic, SHARED_DURABLE | SHARED, name=...)`` (link names ``s``, ``s|2``,
``s|global``, ``s|volatile1`` ... per §2.3), ``s.browse(queue)``, ``s.producer(None)`` (anonymous relay; pass
``to=`` to ``send``), ``jms.create_temporary_queue()`` / ``create_temporary_topic()`` (``.address``,
``.delete()``), ``tx.commit()``, ``tx.send_discharge(fail)`` / ``tx.send_declare()`` for hand-made pipelines,
``Consumer.drain()``, ``Received.release/reject/modify``. Local guards of the real client (§2.7) raise
``RefusedLocally`` before any frame is sent.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proton import (
    UNDESCRIBED,
    Array,
    Collector,
    Condition,
    Connection,
    Data,
    Delivery,
    Described,
    Endpoint,
    Event,
    Link,
    Message,
    Terminus,
    Transport,
    byte,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

TIMEOUT = 10.0
PREFETCH = 1000
MAX_FRAME_SIZE = 1024 * 1024
CHANNEL_MAX = 32767
IDLE_TIMEOUT = 60.0  # proton-c advertises half of it (30000 ms), as proton-j does (§1.3)
SESSION_CAPACITY = 2047 * MAX_FRAME_SIZE  # gives begin incoming-window=2047 (§1.7)
HANDLE_MAX = 65535
PRODUCT = "QpidJMS"
CLIENT_VERSION = "2.11.0-SNAPSHOT"
PLATFORM = "JVM: 17.0.15, 17.0.15+6, Eclipse Adoptium, OS: Linux, 6.8.0, amd64"
CONNECTION_CAPABILITIES = ("sole-connection-for-container", "DELAYED_DELIVERY", "ANONYMOUS-RELAY", "SHARED-SUBS")
ESTABLISHMENT_FAILED = "amqp:connection-establishment-failed"
OUTCOMES = ("amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list")
SELECTOR_FILTER = 0x0000468C00000004
NO_LOCAL_FILTER = 0x0000468C00000003
LOCAL_TRANSACTIONS = "amqp:local-transactions"
KNOWN_DIFFERENCES = (
    "begin next-outgoing-id is 0 (proton-c numbering), Qpid JMS sends 1",
    "modified dispositions carry delivery-failed and undeliverable-here explicitly, also when false",
    "no anonymous-producer fallback (per-send links) when the broker does not offer ANONYMOUS-RELAY",
)

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
HEADER_SIZE = 8
_FRAME = struct.Struct(">IBBH")  # size, doff, type, channel
AMQP_FRAME, SASL_FRAME = 0x00, 0x01
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_OUTCOME = 0x40, 0x41, 0x42, 0x44
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x24, 0x25, 0x26, 0x27
SOURCE, TARGET, DELETE_ON_CLOSE = 0x28, 0x29, 0x2B
COORDINATOR, DECLARE, DISCHARGE, DECLARED, TRANSACTIONAL_STATE = 0x30, 0x31, 0x32, 0x33, 0x34
HEADER, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = 0x70, 0x72, 0x73, 0x74
DATA, AMQP_SEQUENCE, AMQP_VALUE = 0x75, 0x76, 0x77

FIELDS: dict[int, tuple[str, ...]] = {
    OPEN: ("container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out", "outgoing-locales",
           "incoming-locales", "offered-capabilities", "desired-capabilities", "properties"),
    BEGIN: ("remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max",
            "offered-capabilities", "desired-capabilities", "properties"),
    ATTACH: ("name", "handle", "role", "snd-settle-mode", "rcv-settle-mode", "source", "target", "unsettled",
             "incomplete-unsettled", "initial-delivery-count", "max-message-size", "offered-capabilities",
             "desired-capabilities", "properties"),
    FLOW: ("next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window", "handle", "delivery-count",
           "link-credit", "available", "drain", "echo", "properties"),
    TRANSFER: ("handle", "delivery-id", "delivery-tag", "message-format", "settled", "more", "rcv-settle-mode",
               "state", "resume", "aborted", "batchable"),
    DISPOSITION: ("role", "first", "last", "settled", "state", "batchable"),
    DETACH: ("handle", "closed", "error"),
    END: ("error",),
    CLOSE: ("error",),
    SASL_MECHANISMS: ("sasl-server-mechanisms",),
    SASL_INIT: ("mechanism", "initial-response", "hostname"),
    SASL_OUTCOME: ("code", "additional-data"),
}  # fmt: skip
TERMINUS_FIELDS: dict[int, tuple[str, ...]] = {
    SOURCE: ("address", "durable", "expiry-policy", "timeout", "dynamic", "dynamic-node-properties",
             "distribution-mode", "filter", "default-outcome", "outcomes", "capabilities"),
    TARGET: ("address", "durable", "expiry-policy", "timeout", "dynamic", "dynamic-node-properties", "capabilities"),
    COORDINATOR: ("capabilities",),
}  # fmt: skip
_TERMINUS_DEFAULTS: dict[int, tuple[Any, ...]] = {
    SOURCE: (None, 0, None, 0, False, None, None, None, None, None, None),
    TARGET: (None, 0, None, 0, False, None, None),
    COORDINATOR: (None,),
}
_NAMES = {
    OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer", DISPOSITION: "disposition",
    DETACH: "detach", END: "end", CLOSE: "close", SASL_MECHANISMS: "sasl-mechanisms", SASL_INIT: "sasl-init",
    SASL_CHALLENGE: "sasl-challenge", SASL_OUTCOME: "sasl-outcome",
}  # fmt: skip

# Destination and consumer kinds. Node kinds double as the x-opt-jms-dest / x-opt-jms-reply-to codes (§7.2).
QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC = "queue", "topic", "temporary-queue", "temporary-topic"
DURABLE, SHARED_DURABLE, SHARED = "durable", "shared-durable", "shared"
NODE_CODES = {QUEUE: 0, TOPIC: 1, TEMP_QUEUE: 2, TEMP_TOPIC: 3}
MESSAGE_TYPES = {"message": 0, "object": 1, "map": 2, "bytes": 3, "stream": 4, "text": 5}


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


# -- errors --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteError:
    """The error of a broker close/end/detach, or of a rejected outcome."""

    condition: str | None
    description: str | None = None
    info: dict[Any, Any] | None = None

    @classmethod
    def of(cls, condition: Condition | None) -> RemoteError | None:
        if condition is None:
            return None
        return cls(str(condition.name), condition.description, dict(condition.info) if condition.info else None)


class JmsError(Exception):
    """The broker said no; ``condition``/``description``/``info`` are those of its error (may be None)."""

    def __init__(self, message: str, error: RemoteError | None = None) -> None:
        self.error = error
        self.condition = error.condition if error else None
        self.description = error.description if error else None
        self.info = error.info if error else None
        super().__init__(f"{message}: {error}" if error else message)


class ConnectionRefused(JmsError):
    """The broker answered the open with a refusal (§1.6)."""


class ConnectionLost(JmsError):
    """The socket closed while a test was waiting for something."""


class SaslFailed(JmsError):
    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(f"sasl-outcome code {code}")


class LinkRefused(JmsError):
    """The attach reply carried a null source/target; the broker's detach error is attached."""


class SendFailed(JmsError):
    """A synchronous send was not accepted (§5.2)."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        error = RemoteError(outcome.condition, outcome.description) if outcome.condition else None
        super().__init__(f"send settled as {outcome.state}", error)


class TransactionFailed(JmsError):
    """The coordinator did not declare a transaction when the session needed one."""


class RefusedLocally(Exception):
    """Qpid JMS refuses this itself, without a frame (§2.3, §2.7)."""


# -- frames --------------------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """Copy decoded values out of proton's buffers (binary values come back as memoryviews that dangle)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Described):
        return Described(value.descriptor, _plain(value.value))
    if isinstance(value, Array):
        return Array(value.descriptor, value.type, *[_plain(v) for v in value.elements])
    return value


def _encode(value: Any) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def described_list(code: int, fields: list[Any]) -> Described:
    return Described(ulong(code), fields)


def symbols(*names: str) -> Array:
    return Array(UNDESCRIBED, Data.SYMBOL, *[symbol(n) for n in names])


@dataclass(frozen=True)
class WireFrame:
    """One frame as it crossed the socket (after this client's rewriting). ``code`` is None for a heartbeat."""

    sent: bool
    frame_type: int
    channel: int
    code: int | None
    fields: list[Any]
    payload: bytes = b""

    @property
    def name(self) -> str:
        if self.code is None:
            return "empty"
        return _NAMES.get(self.code, hex(self.code))

    def __getitem__(self, name: str) -> Any:
        index = FIELDS[self.code or 0].index(name)
        return self.fields[index] if index < len(self.fields) else None

    def terminus(self, name: str) -> dict[str, Any] | None:
        """The named source/target of an attach as a dict of its fields (None for a null terminus)."""
        return terminus_fields(self[name])

    def __repr__(self) -> str:
        arrow = "C->B" if self.sent else "B->C"
        return f"{arrow} ch{self.channel} {self.name}{self.fields}"


def terminus_fields(value: Any) -> dict[str, Any] | None:
    """source/target/coordinator ``Described`` -> {field name: value}; absent fields are None."""
    if value is None:
        return None
    names = TERMINUS_FIELDS[int(value.descriptor)]
    values = list(value.value) + [None] * len(names)
    return {"type": int(value.descriptor), **dict(zip(names, values, strict=False))}


def _frame_bytes(frame_type: int, channel: int, body: bytes) -> bytes:
    return _FRAME.pack(_FRAME.size + len(body), 2, frame_type, channel) + body


def _decode_frame(sent: bool, raw: bytes) -> WireFrame:
    _size, doff, frame_type, channel = _FRAME.unpack_from(raw)
    body = raw[doff * 4 :]
    if not body:
        return WireFrame(sent, frame_type, channel, None, [])
    data = Data()
    consumed = data.decode(body)
    data.rewind()
    data.next()
    value = _plain(data.get_object())
    return WireFrame(sent, frame_type, channel, int(value.descriptor), list(value.value), bytes(body[consumed:]))


class _Splitter:
    """Cuts one direction of the byte stream into the protocol header and whole frames."""

    def __init__(self, header: bool) -> None:
        self._buffer = b""
        self._header = header

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        chunks: list[bytes] = []
        if self._header:
            if len(self._buffer) < HEADER_SIZE:
                return chunks
            chunks.append(self._buffer[:HEADER_SIZE])
            self._buffer, self._header = self._buffer[HEADER_SIZE:], False
        while len(self._buffer) >= _FRAME.size:
            size = _FRAME.unpack_from(self._buffer)[0]
            if len(self._buffer) < size:
                break
            chunks.append(self._buffer[:size])
            self._buffer = self._buffer[size:]
        return chunks


def _is_default(value: Any, default: Any) -> bool:
    if value is None:
        return True
    return default is not None and isinstance(value, bool) == isinstance(default, bool) and value == default


def _trim(values: list[Any], defaults: tuple[Any, ...] = ()) -> list[Any]:
    """Drop trailing fields that are null or equal to their default, as proton-j encodes lists."""
    values = list(values)
    while values and _is_default(values[-1], defaults[len(values) - 1] if len(values) <= len(defaults) else None):
        values.pop()
    return values


def _set(values: list[Any], index: int, value: Any) -> list[Any]:
    values = list(values) + [None] * max(0, index + 1 - len(values))
    values[index] = value
    return values


def _shape_terminus(value: Any, default_outcome: Any = None) -> Any:
    if not isinstance(value, Described):
        return value
    code = int(value.descriptor)
    fields = list(value.value)
    if default_outcome is not None:
        fields = _set(fields, 8, default_outcome)
    return Described(value.descriptor, _trim(fields, _TERMINUS_DEFAULTS.get(code, ())))


@dataclass
class _AttachShape:
    """What the rewriter changes on one outgoing attach, beyond the defaults every attach gets."""

    default_outcome: bool = False
    desired_capabilities: tuple[str, ...] = ()


# -- messages ------------------------------------------------------------------------------------------------------
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
        data = Data()
        consumed = data.decode(raw)
        data.rewind()
        data.next()
        found.append(_plain(data.get_object()))
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


# -- outcomes ------------------------------------------------------------------------------------------------------
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

    def __init__(self, wire: JmsWire, delivery: Delivery, tags: _Tags, tag: bytes, message_id: str | None) -> None:
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
    def __init__(self, wire: JmsWire, delivery: Delivery, message_id: str | None) -> None:
        super().__init__(wire, delivery, _Tags(), b"", message_id)
        self.outcome = Outcome("settled")


# -- the connection ------------------------------------------------------------------------------------------------
def _split_address(address: str) -> tuple[str, int]:
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = rest.rpartition(":")
    return host or "127.0.0.1", int(port or 5672)


class JmsWire:
    """One Qpid-JMS-shaped connection (see the module docstring). Build it with ``JmsWire.connect``."""

    def __init__(self, host: str, port: int, *, client_id: str | None = None, timeout: float = TIMEOUT) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.client_id = client_id
        self.container_id = client_id or f"ID:{uuid.uuid4()}:1"
        self.connection_id = f"ID:{uuid.uuid4()}:1"
        self.frames: list[WireFrame] = []
        self.connection = Connection()
        self.collector = Collector()
        self.transport: Transport | None = None
        self.sessions: list[JmsSession] = []
        self.hidden: JmsSession | None = None
        self.offered_capabilities: set[str] = set()
        self.remote_properties: dict[str, Any] = {}
        self.remote_error: RemoteError | None = None
        self.sasl_mechanism: str | None = None
        self.socket_closed = False
        self.subscriptions = SubscriptionTracker()
        self._session_seq = 0
        self._temp_seq = 0
        self._inbuf = b""
        self._incoming = _Splitter(header=True)
        self._outgoing = _Splitter(header=True)
        self._attach_shapes: dict[str, deque[_AttachShape]] = {}
        self._fresh_sessions: set[int] = set()
        self.sock = socket.create_connection((host, port), timeout=timeout)

    # -- setup -----------------------------------------------------------------------------------------------------
    @classmethod
    def connect(
        cls,
        address: str,
        client_id: str | None = None,
        user: str | None = None,
        password: str | None = None,
        *,
        timeout: float = TIMEOUT,
        open: bool = True,
    ) -> JmsWire:
        """SASL, then (unless ``open=False``, the deferred open of §1.2) the open and the hidden session.

        Raises:
            SaslFailed, ConnectionRefused (e.g. ClientID in use: ``condition``/``description``/``info``).
        """
        host, port = _split_address(address)
        wire = cls(host, port, client_id=client_id, timeout=timeout)
        try:
            wire.sasl(user, password)
            if open:
                wire.open()
        except BaseException:
            wire.abort()
            raise
        return wire

    def sasl(self, user: str | None, password: str | None) -> None:
        """§1.1: one mechanism, PLAIN when credentials are given and offered, else ANONYMOUS."""
        self.sock.sendall(SASL_HEADER)
        self._log(True, SASL_HEADER)
        if self._read_exact(HEADER_SIZE) != SASL_HEADER:
            raise JmsError("the broker did not answer with a SASL header")
        offered = self._read_sasl_frame(SASL_MECHANISMS)["sasl-server-mechanisms"]
        offered = {str(m) for m in (offered.elements if isinstance(offered, Array) else [offered])}
        if user and password and "PLAIN" in offered:
            mechanism, response = "PLAIN", f"\x00{user}\x00{password}".encode()
        elif "ANONYMOUS" in offered:
            mechanism, response = "ANONYMOUS", b""
        else:
            raise JmsError(f"No supported mechanism among {sorted(offered)}")
        self.sasl_mechanism = mechanism
        init = _frame_bytes(SASL_FRAME, 0, _encode(described_list(SASL_INIT, [symbol(mechanism), response, self.host])))
        self.sock.sendall(init)
        self._log(True, init)
        code = int(self._read_sasl_frame(SASL_OUTCOME)["code"])
        if code != 0:
            raise SaslFailed(code)

    def open(self) -> None:
        """Open (§1.3), wait for the broker's open, then begin the hidden connection session (§1.7)."""
        transport = Transport(Transport.CLIENT)
        transport.max_frame_size = MAX_FRAME_SIZE
        transport.channel_max = CHANNEL_MAX
        transport.idle_timeout = IDLE_TIMEOUT
        conn = self.connection
        conn.container = self.container_id
        conn.hostname = self.host
        conn.desired_capabilities = [symbol(c) for c in CONNECTION_CAPABILITIES]
        conn.properties = {symbol("product"): PRODUCT, symbol("version"): CLIENT_VERSION, symbol("platform"): PLATFORM}
        conn.collect(self.collector)
        transport.bind(conn)
        self.transport = transport
        conn.open()
        leftover, self._inbuf = self._inbuf, b""
        self._received(leftover)
        self.pump(lambda: not conn.state & Endpoint.REMOTE_UNINIT, what="the broker's open")
        self.remote_properties = {str(k): v for k, v in (conn.remote_properties or {}).items()}
        self.offered_capabilities = {str(c) for c in (conn.remote_offered_capabilities or ())}
        if ESTABLISHMENT_FAILED in self.remote_properties or conn.state & Endpoint.REMOTE_CLOSED:
            self._pump(lambda: bool(conn.state & Endpoint.REMOTE_CLOSED), None)
            self.remote_error = RemoteError.of(conn.remote_condition)
            self._service()
            self.sock.close()
            self.socket_closed = True
            raise ConnectionRefused("connection refused", self.remote_error)
        self.hidden = JmsSession(self, f"{self.connection_id}:0", transacted=False, hidden=True)

    # -- pumping ---------------------------------------------------------------------------------------------------
    def pump(self, until: Callable[[], Any], timeout: float | None = None, what: str = "the broker") -> None:
        """Move bytes and handle events until ``until()`` is true.

        Raises:
            TimeoutError after ``timeout`` (default: the connection's), ConnectionLost if the socket closes first.
        """
        limit = self.timeout if timeout is None else timeout
        if not self._pump(until, limit):
            if self.socket_closed:
                raise ConnectionLost(f"connection closed while waiting for {what}", self.remote_error)
            raise TimeoutError(f"timed out after {limit}s waiting for {what}")

    def wait(self, seconds: float) -> None:
        """Keep the connection serviced for ``seconds`` (e.g. to show that nothing arrives)."""
        self._pump(lambda: False, seconds)

    def flush(self) -> None:
        """Handle pending events and write what proton has to send, without reading."""
        self._service()

    def _pump(self, until: Callable[[], Any], timeout: float | None) -> bool:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        for _ in range(10_000_000):
            self._service()
            if until():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.socket_closed:
                return False
            self._read(min(remaining, 1.0))
        return False

    def _read(self, wait: float) -> None:
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._received(chunk)
            return
        self.socket_closed = True
        if self.transport is not None:
            self.transport.close_tail()

    def _received(self, data: bytes) -> None:
        if not data:
            return
        for chunk in self._incoming.feed(data):
            self._log(False, chunk)
        transport = self.transport
        assert transport is not None
        while data:
            capacity = transport.capacity()
            if capacity <= 0:
                return
            transport.push(data[:capacity])
            data = data[capacity:]

    def _service(self) -> None:
        if self.transport is None:
            return
        for _ in range(100_000):
            handled = 0
            event = self.collector.peek()
            while event is not None and handled < 10_000:
                self._dispatch(event)
                self.collector.pop()
                handled += 1
                event = self.collector.peek()
            self.transport.tick(time.monotonic())
            if not self._write() and not handled:
                return

    def _write(self) -> bool:
        transport = self.transport
        assert transport is not None
        pending = transport.pending()
        if pending <= 0:
            return False
        data = bytes(transport.peek(pending))
        transport.pop(len(data))
        out = b"".join(self._shape_chunk(chunk) for chunk in self._outgoing.feed(data))
        if out and not self.socket_closed:
            self.sock.settimeout(self.timeout)
            try:
                self.sock.sendall(out)
            except OSError:
                self.socket_closed = True
        return True

    # -- the frame rewriter and log --------------------------------------------------------------------------------
    def _shape_chunk(self, chunk: bytes) -> bytes:
        if len(chunk) == HEADER_SIZE and chunk.startswith(b"AMQP"):
            return chunk
        frame = _decode_frame(True, chunk)
        if frame.code == BEGIN:
            self._fresh_sessions.add(frame.channel)
        elif frame.channel in self._fresh_sessions:
            self._fresh_sessions.discard(frame.channel)
            if frame.code == FLOW and frame["handle"] is None:
                return b""  # proton-c follows each begin with a session flow; proton-j does not
        fields = self._shape(frame)
        if fields is not None:
            body = _encode(described_list(frame.code or 0, fields)) + frame.payload
            chunk = _frame_bytes(frame.frame_type, frame.channel, body)
            frame = WireFrame(True, frame.frame_type, frame.channel, frame.code, fields, frame.payload)
        self.frames.append(frame)
        return chunk

    def _shape(self, frame: WireFrame) -> list[Any] | None:
        """The fields to write instead of proton-c's, or None to keep the frame."""
        if frame.code == BEGIN:
            return _set(frame.fields, 4, uint(HANDLE_MAX))
        if frame.code != ATTACH:
            return None
        fields = _set(frame.fields, 10, None)  # max-message-size (index 10): not set by Qpid JMS
        queue = self._attach_shapes.get(str(fields[0]))
        shape = queue.popleft() if queue else _AttachShape()
        receiver = bool(fields[2])
        outcome = described_list(MODIFIED, [True]) if shape.default_outcome else None
        fields[5] = _shape_terminus(fields[5], outcome)
        fields[6] = _shape_terminus(fields[6])
        if receiver:
            fields[9] = None  # initial-delivery-count: senders only
        if shape.desired_capabilities:
            fields = _set(fields, 12, symbols(*shape.desired_capabilities))
        return _trim(fields)

    def _expect_attach(self, name: str, shape: _AttachShape) -> None:
        self._attach_shapes.setdefault(name, deque()).append(shape)

    def _log(self, sent: bool, chunk: bytes) -> None:
        if len(chunk) == HEADER_SIZE and chunk.startswith(b"AMQP"):
            return
        self.frames.append(_decode_frame(sent, chunk))

    def sent(self, name: str | None = None) -> list[WireFrame]:
        """Frames this client wrote, optionally only one performative (``"attach"``, ``"flow"`` ...)."""
        return [f for f in self.frames if f.sent and (name is None or f.name == name)]

    def received(self, name: str | None = None) -> list[WireFrame]:
        return [f for f in self.frames if not f.sent and (name is None or f.name == name)]

    def last_attach_from_broker(self, link_name: str) -> WireFrame | None:
        return next((f for f in reversed(self.received("attach")) if f["name"] == link_name), None)

    # -- SASL reads (before the transport exists) ------------------------------------------------------------------
    def _read_exact(self, count: int) -> bytes:
        deadline = time.monotonic() + self.timeout
        while len(self._inbuf) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"SASL: no answer within {self.timeout}s")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionLost("the broker closed the socket during SASL")
            self._inbuf += chunk
        data, self._inbuf = self._inbuf[:count], self._inbuf[count:]
        return data

    def _read_sasl_frame(self, expected: int) -> WireFrame:
        header = self._read_exact(_FRAME.size)
        raw = header + self._read_exact(_FRAME.unpack(header)[0] - _FRAME.size)
        frame = _decode_frame(False, raw)
        self.frames.append(frame)
        if frame.code != expected:
            raise JmsError(f"expected {_NAMES[expected]}, got {frame!r}")
        return frame

    # -- events ----------------------------------------------------------------------------------------------------
    def _dispatch(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY and event.delivery is not None:
            self._delivery(event.delivery)
        elif kind == Event.LINK_FLOW and event.link is not None:
            link = event.link
            if link.is_sender and link.drain_mode and link.credit > 0:
                link.drained()  # §5.2: a drained answer at once
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH):
            endpoint = getattr(event.link, "_jms", None)
            if endpoint is not None:
                endpoint._remote_detach(kind == Event.LINK_REMOTE_CLOSE)
        elif kind == Event.SESSION_REMOTE_CLOSE:
            owner = getattr(event.session, "_jms", None)
            if owner is not None:
                owner._remote_end()
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            self.remote_error = RemoteError.of(self.connection.remote_condition)
            if not self.connection.state & Endpoint.LOCAL_CLOSED:
                self.connection.close()  # §1.8: answer every broker close

    def _delivery(self, delivery: Delivery) -> None:
        link = delivery.link
        if link.is_sender:
            pending = getattr(delivery, "_jms_pending", None)
            if pending is not None:
                pending._updated(delivery)
            return
        if not delivery.readable or delivery.partial:
            return
        raw = link.recv(delivery.pending) if delivery.pending else b""
        link.advance()
        consumer = getattr(link, "_jms", None)
        if delivery.aborted or not isinstance(consumer, Consumer):
            delivery.settle()
            return
        consumer._arrived(delivery, bytes(raw or b""))

    # -- connection-level JMS operations ---------------------------------------------------------------------------
    def session(self, transacted: bool = False, *, declare: bool = True) -> JmsSession:
        """A JMS Session: a begin, plus the coordinator and a declare when ``transacted`` (§6.1)."""
        self._session_seq += 1
        return JmsSession(self, f"{self.connection_id}:{self._session_seq}", transacted=transacted, declare=declare)

    def unsubscribe(self, name: str, timeout: float | None = None) -> None:
        """``Session.unsubscribe(name)`` (§3.1) on the hidden session.

        Raises:
            RefusedLocally while this connection has an active durable subscriber of that name (§2.7);
            JmsError carrying the broker's error (not-found on the refused lookup, resource-locked on the detach).
        """
        if self.subscriptions.active(name):
            raise RefusedLocally(f"Can't remove an active durable subscription: {name}")
        hidden = self._hidden()
        link_name = name if self.client_id else f"{name}|global"
        link = hidden.session.receiver(link_name)
        link.source.type = Terminus.UNSPECIFIED
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        caps = () if self.client_id else ("shared", "global")
        self._expect_attach(link_name, _AttachShape(desired_capabilities=caps))
        lookup = _LinkEnd(self, link)
        link.open()
        lookup._await_attach(timeout, check=False)
        if lookup.refusal is not None:
            raise JmsError(f"unsubscribe {name!r} refused", lookup.refusal)
        error = lookup.close(timeout)
        if error is not None:
            raise JmsError(f"unsubscribe {name!r} failed", error)

    def create_temporary_queue(self, timeout: float | None = None) -> TemporaryDestination:
        return self._temporary(TEMP_QUEUE, timeout)

    def create_temporary_topic(self, timeout: float | None = None) -> TemporaryDestination:
        return self._temporary(TEMP_TOPIC, timeout)

    def _temporary(self, kind: str, timeout: float | None) -> TemporaryDestination:
        """§5.3: a sender with a dynamic target on the hidden session; the reply target names the node."""
        self._temp_seq += 1
        creator = "temp-queue-creator" if kind == TEMP_QUEUE else "temp-topic-creator"
        link = self._hidden().session.sender(f"qpid-jms:{creator}:{self.connection_id}:{self._temp_seq}")
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        target = link.target
        target.dynamic = True
        target.durability = Terminus.NONDURABLE
        target.expiry_policy = Terminus.EXPIRE_WITH_LINK
        target.properties.put_object({symbol("lifetime-policy"): described_list(DELETE_ON_CLOSE, [])})
        _put_symbols(target.capabilities, [kind])
        destination = TemporaryDestination(self, link, kind)
        link.open()
        destination._await_attach(timeout, check=True)
        destination.address = link.remote_target.address
        return destination

    def _hidden(self) -> JmsSession:
        if self.hidden is None:
            raise JmsError("the connection is not open")
        return self.hidden

    def node_address(self, address: str, kind: str) -> str:
        """Apply the broker-announced queue-prefix / topic-prefix (§1.4) to a non-temporary address."""
        prefix = self.remote_properties.get("queue-prefix" if kind == QUEUE else "topic-prefix")
        if kind in (QUEUE, TOPIC) and prefix and not address.startswith(prefix):
            return f"{prefix}{address}"
        return address

    # -- teardown --------------------------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> RemoteError | None:
        """``Connection.close()``: discharge(fail) for transacted sessions, then close with no ends or detaches."""
        try:
            remote_closed = self.connection.state & Endpoint.REMOTE_CLOSED
            if self.transport is not None and not self.socket_closed and not remote_closed:
                for session in self.sessions:
                    session._rollback_on_close(timeout)
                if not self.connection.state & Endpoint.LOCAL_CLOSED:
                    self.connection.close()
                self._pump(lambda: bool(self.connection.state & Endpoint.REMOTE_CLOSED), timeout)
        finally:
            self.abort()
        return self.remote_error

    def abort(self) -> None:
        """Drop the socket without a frame (a crash or a TCP loss, §2.6)."""
        self.socket_closed = True
        self.sock.close()

    def __enter__(self) -> JmsWire:
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        try:
            self.close()
        except Exception:
            if exc_type is None:  # never hide the test's own failure behind a failing close
                raise


def _put_symbols(data: Data, names: Iterable[str]) -> None:
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in names:
        data.put_symbol(symbol(name))
    data.exit()


def _put_filters(data: Data, selector: str | None, no_local: bool) -> None:
    """§2.4: described values with the numeric Apache descriptors, keyed by symbols."""
    if not selector and not no_local:
        return
    data.put_map()
    data.enter()
    for key, descriptor, value in (
        ("no-local", NO_LOCAL_FILTER, "NoLocalFilter{}" if no_local else None),
        ("jms-selector", SELECTOR_FILTER, selector),
    ):
        if value is not None:
            data.put_symbol(symbol(key))
            data.put_described()
            data.enter()
            data.put_ulong(descriptor)
            data.put_string(value)
            data.exit()
    data.exit()


# -- sessions ------------------------------------------------------------------------------------------------------
class JmsSession:
    """One AMQP session, plus the coordinator link when transacted. Build it with ``JmsWire.session``."""

    def __init__(
        self, wire: JmsWire, session_id: str, *, transacted: bool, declare: bool = True, hidden: bool = False
    ) -> None:
        self.wire = wire
        self.id = session_id
        self.transacted = transacted
        self.txn_id: bytes | None = None
        self.declare_outcome: Outcome | None = None
        self.consumers: list[Consumer] = []
        self.remote_error: RemoteError | None = None
        self.ended = False
        self._consumer_seq = 0
        self._producer_seq = 0
        session = wire.connection.session()
        session.incoming_capacity = SESSION_CAPACITY
        session._jms = self
        self.session = session
        session.open()
        wire.pump(lambda: not session.state & Endpoint.REMOTE_UNINIT, what="the begin reply")
        if not hidden:
            wire.sessions.append(self)
        self.coordinator: _Coordinator | None = None
        if transacted:
            self.coordinator = _Coordinator(self)
        if self.coordinator is not None and declare:
            outcome = self.declare()
            if outcome.state != "declared":
                raise TransactionFailed("declare was not answered with declared", _error_of(outcome))

    # -- consumers -------------------------------------------------------------------------------------------------
    def consumer(
        self,
        destination: str | TemporaryDestination,
        kind: str = QUEUE,
        *,
        name: str | None = None,
        selector: str | None = None,
        no_local: bool = False,
        prefetch: int = PREFETCH,
        presettle: bool = False,
        browse: bool = False,
        check: bool = True,
        timeout: float | None = None,
    ) -> Consumer:
        """Attach a receiver shaped like §2.1-2.4 / §5.1, then ``flow(prefetch)`` (§5.5).

        ``kind``: QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC (implied by a TemporaryDestination), DURABLE,
        SHARED_DURABLE or SHARED (these three need ``name``; global naming follows from a missing ClientID).

        Raises:
            RefusedLocally (the client's own guards), LinkRefused (null source reply; unless ``check=False``,
            then the consumer comes back with ``refusal`` set).
        """
        if isinstance(destination, TemporaryDestination):
            kind, address = destination.kind, destination.address or ""
        else:
            address = self.wire.node_address(destination, _CONSUMER_KINDS[kind].capability)
        shape = _CONSUMER_KINDS[kind]
        selector = selector if selector and selector.strip() else None  # §2.4: blank means no filter
        if shape.shared and no_local:
            raise RefusedLocally("a JMS shared consumer has no no-local option")
        self._consumer_seq += 1
        if kind in (DURABLE, SHARED_DURABLE, SHARED):
            if name is None:
                raise RefusedLocally("a subscription needs a name")
            link_name = self.wire.subscriptions.reserve(name, kind, address, selector, self.wire.client_id is not None)
        else:
            name = None  # only subscriptions have names; other consumers are named after their consumer id
            link_name = f"qpid-jms:receiver:{self.id}:{self._consumer_seq}:{address}"
        capabilities = [shape.capability]
        if shape.shared:
            capabilities += ["shared"] if self.wire.client_id else ["shared", "global"]
        link = self.session.receiver(link_name)
        link.snd_settle_mode = Link.SND_SETTLED if presettle or browse else Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        source = link.source
        source.address = address
        source.durability = Terminus.DELIVERIES if shape.durable else Terminus.NONDURABLE
        source.expiry_policy = Terminus.EXPIRE_NEVER if shape.durable else Terminus.EXPIRE_WITH_LINK
        if shape.durable or browse:
            source.distribution_mode = Terminus.DIST_MODE_COPY
        _put_symbols(source.capabilities, capabilities)
        _put_symbols(source.outcomes, OUTCOMES)
        _put_filters(source.filter, selector, no_local)
        ask_shared = shape.shared and "SHARED-SUBS" not in self.wire.offered_capabilities
        self.wire._expect_attach(link_name, _AttachShape(True, ("SHARED-SUBS",) if ask_shared else ()))
        consumer = Consumer(self, link, kind, address, name, prefetch)
        link.open()
        consumer._await_attach(timeout, check)
        if consumer.refusal is None and ask_shared:
            consumer._check_shared_subs(timeout)
        if consumer.refusal is None and prefetch:
            consumer.flow(prefetch)
        return consumer

    def browser(self, queue: str, *, selector: str | None = None, prefetch: int = PREFETCH) -> Consumer:
        """A QueueBrowser link (§5.4): distribution-mode copy, snd-settle-mode settled, capability queue."""
        return self.consumer(queue, QUEUE, selector=selector, prefetch=prefetch, browse=True)

    def browse(self, queue: str, *, selector: str | None = None, prefetch: int = PREFETCH) -> list[Received]:
        """A whole enumeration the way Qpid JMS does it: drain until a drain brings nothing, re-flow, close."""
        browser = self.browser(queue, selector=selector, prefetch=prefetch)
        seen: list[Received] = []
        for _ in range(100_000):
            browser.drain()
            arrived = browser.take_buffered()
            if not arrived:
                break
            seen += arrived
            browser.top_up()
        browser.top_up()
        browser.close()
        return seen

    # -- producers -------------------------------------------------------------------------------------------------
    def producer(
        self,
        address: str | TemporaryDestination | None,
        kind: str = QUEUE,
        *,
        presettle: bool = False,
        check: bool = True,
        timeout: float | None = None,
    ) -> Producer:
        """A fixed producer (§5.2), or the anonymous relay producer for ``address=None``."""
        if isinstance(address, TemporaryDestination):
            kind, address = address.kind, address.address
        elif address is not None:
            address = self.wire.node_address(address, kind)
        self._producer_seq += 1
        producer_id = f"{self.id}:{self._producer_seq}"
        link = self.session.sender(f"qpid-jms:sender:{producer_id}:{'null' if address is None else address}")
        link.snd_settle_mode = Link.SND_SETTLED if presettle else Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.source.address = producer_id
        _put_symbols(link.source.outcomes, OUTCOMES)
        if address is not None:
            link.target.address = address
            _put_symbols(link.target.capabilities, [kind])
        ask_delay = "DELAYED_DELIVERY" not in self.wire.offered_capabilities
        self.wire._expect_attach(link.name, _AttachShape(False, ("DELAYED_DELIVERY",) if ask_delay else ()))
        producer = Producer(self, link, producer_id, address, kind, presettle)
        link.open()
        producer._await_attach(timeout, check)
        return producer

    # -- transactions (§6) -----------------------------------------------------------------------------------------
    def send_declare(self) -> Pending:
        """Send ``declare{}`` without waiting; ``wait()`` gives the declared outcome (or a rejection)."""
        return self._control(described_list(DECLARE, []))

    def send_discharge(self, fail: bool, txn_id: bytes | None = None) -> Pending:
        """Send ``discharge{txn-id, fail}`` without waiting (for hand-made pipelines)."""
        txn = txn_id if txn_id is not None else self.txn_id
        return self._control(described_list(DISCHARGE, [txn, fail]))

    def declare(self, timeout: float | None = None) -> Outcome:
        """Declare a transaction and wait; ``txn_id`` becomes the declared id (None after a rejection)."""
        return self._declared(self.send_declare().wait(timeout))

    def commit(self, *, redeclare: bool = True, timeout: float | None = None) -> Outcome:
        """discharge(fail=false), pipelined with the next declare as Qpid JMS does; returns the discharge outcome."""
        return self._discharge(False, redeclare, timeout)

    def rollback(self, *, redeclare: bool = True, timeout: float | None = None) -> Outcome:
        """§6.5: drain consumers with credit, discharge(fail=true) + declare, release the prefetch, re-flow."""
        active = [c for c in self.consumers if c.open]
        for consumer in active:
            consumer.drain(timeout)
        outcome = self._discharge(True, redeclare, timeout)
        for consumer in active:
            consumer.release_buffered()
            consumer.top_up()
        return outcome

    def _discharge(self, fail: bool, redeclare: bool, timeout: float | None) -> Outcome:
        discharge = self.send_discharge(fail)
        declare = self.send_declare() if redeclare else None
        outcome = discharge.wait(timeout)
        self.txn_id = None
        if declare is not None:
            self._declared(declare.wait(timeout))
        return outcome

    def _declared(self, outcome: Outcome) -> Outcome:
        self.declare_outcome = outcome
        self.txn_id = outcome.txn_id if outcome.state == "declared" else None
        return outcome

    def _control(self, body: Described) -> Pending:
        if self.coordinator is None:
            raise RefusedLocally("not a transacted session")
        return self.coordinator.control(_encode(Described(ulong(AMQP_VALUE), body)))

    def _rollback_on_close(self, timeout: float | None) -> None:
        if self.coordinator is not None and self.txn_id is not None and not self.ended:
            self.send_discharge(True).wait(timeout)
            self.txn_id = None

    # -- end -------------------------------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> RemoteError | None:
        """``Session.close()``: discharge(fail) if transacted, then ``end`` without detaching links (§1.7)."""
        self._rollback_on_close(timeout)
        if not self.session.state & Endpoint.LOCAL_CLOSED:
            self.session.close()
        self.wire.pump(lambda: self.ended, timeout, "the end reply")
        return self.remote_error

    def _remote_end(self) -> None:
        self.ended = True
        self.remote_error = RemoteError.of(self.session.remote_condition)
        for consumer in self.consumers:
            consumer._finished()
        if not self.session.state & Endpoint.LOCAL_CLOSED:
            self.session.close()


def _error_of(outcome: Outcome) -> RemoteError | None:
    return RemoteError(outcome.condition, outcome.description) if outcome.condition else None


# -- links ---------------------------------------------------------------------------------------------------------
class _LinkEnd:
    """Attach/detach bookkeeping shared by every link this client opens."""

    durable = False

    def __init__(self, wire: JmsWire, link: Link) -> None:
        self.wire = wire
        self.link = link
        self.refusal: RemoteError | None = None
        self.remote_closed: bool | None = None  # the closed flag of the broker's detach, once it arrived
        self.remote_error: RemoteError | None = None
        self._local_detached = False
        self._done = False
        link._jms = self

    @property
    def name(self) -> str:
        return str(self.link.name)

    @property
    def open(self) -> bool:
        return not self._done and not self._local_detached and self.remote_closed is None

    def _null_terminus(self) -> bool:
        terminus = self.link.remote_source if self.link.is_receiver else self.link.remote_target
        return terminus.type == Terminus.UNSPECIFIED

    def _await_attach(self, timeout: float | None, check: bool) -> None:
        """Wait for the attach reply; a null terminus means refusal: wait for the detach and answer it (§2.5)."""
        link = self.link
        self.wire.pump(
            lambda: not link.state & Endpoint.REMOTE_UNINIT or self.remote_closed is not None,
            timeout,
            f"attach reply for {self.name!r}",
        )
        if not self._null_terminus():
            return
        self.wire.pump(lambda: self.remote_closed is not None, timeout, f"the detach after refusing {self.name!r}")
        self.refusal = self.remote_error or RemoteError(None, "Link creation was refused")
        self._finished()
        if check:
            raise LinkRefused(f"attach {self.name!r} refused", self.refusal)

    def _remote_detach(self, closed: bool) -> None:
        self.remote_closed = closed
        self.remote_error = RemoteError.of(self.link.remote_condition)
        if not self._local_detached:  # §1.8: answer; durable consumers with closed=false (§2.6)
            self._local_detached = True
            if self.durable and not self._null_terminus():
                self.link.detach()
            else:
                self.link.close()
        self._finished()

    def close(self, timeout: float | None = None) -> RemoteError | None:
        """detach(closed=true); waits for the broker's detach and returns its error (None if it had none)."""
        return self._end(True, timeout)

    def detach(self, timeout: float | None = None) -> RemoteError | None:
        """detach(closed=false); waits for the broker's detach and returns its error."""
        return self._end(False, timeout)

    def _end(self, closed: bool, timeout: float | None) -> RemoteError | None:
        owner = getattr(self.link.session, "_jms", None)
        if (owner is not None and owner.ended) or self.wire.socket_closed:
            self._finished()  # the session or connection is gone: no detach to exchange
            return self.remote_error
        if not self._local_detached:
            self._local_detached = True
            if closed:
                self.link.close()
            else:
                self.link.detach()
        self.wire.pump(lambda: self.remote_closed is not None, timeout, f"the broker's detach of {self.name!r}")
        self._finished()
        return self.remote_error

    def _finished(self) -> None:
        self._done = True


class Received:
    """One message a consumer got: the raw bytes, the decoded proton Message and the delivery."""

    def __init__(self, consumer: Consumer, delivery: Delivery, raw: bytes) -> None:
        self.consumer = consumer
        self.delivery = delivery
        self.raw = raw
        self.message = Message()
        self.message.decode(raw)
        self.presettled = bool(delivery.settled)
        self.state: str | None = "settled" if self.presettled else None

    @property
    def body(self) -> Any:
        return self.message.body

    @property
    def delivery_count(self) -> int:
        """header.delivery-count (0 when there is no header, §5.7)."""
        return int(self.message.delivery_count or 0)

    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.message.properties or {})

    def accept(self, txn_id: bytes | None = None) -> Received:
        """accepted, or transactional-state{txn-id, accepted} in a transacted session (§6.4); settled."""
        txn = txn_id if txn_id is not None else self.consumer.session.txn_id
        if txn is not None:
            return self._settle("accepted", lambda d: _transactional(d, txn, ACCEPTED))
        return self._settle("accepted", lambda d: d.update(Delivery.ACCEPTED))

    def release(self) -> Received:
        return self._settle("released", lambda d: d.update(Delivery.RELEASED))

    def reject(self) -> Received:
        return self._settle("rejected", lambda d: d.update(Delivery.REJECTED))

    def modify(self, failed: bool = True, undeliverable: bool = False) -> Received:
        def update(delivery: Delivery) -> None:
            delivery.local.failed = failed
            delivery.local.undeliverable = undeliverable
            delivery.update(Delivery.MODIFIED)

        return self._settle("modified", update)

    def _settle(self, state: str, update: Callable[[Delivery], None]) -> Received:
        if self.state is not None:
            return self  # presettled (JMS sends nothing) or already settled
        update(self.delivery)
        self.delivery.settle()  # §5.6: every client disposition is settled=true, one per delivery
        self.state = state
        self.consumer.wire.flush()
        return self


def _transactional(delivery: Delivery, txn_id: bytes, outcome: int) -> None:
    """python-proton writes an unknown disposition type as described(type, local.data)."""
    delivery.local.data = [txn_id, described_list(outcome, [])]
    delivery.update(TRANSACTIONAL_STATE)


class Consumer(_LinkEnd):
    """A JMS MessageConsumer / TopicSubscriber / QueueBrowser link."""

    def __init__(
        self, session: JmsSession, link: Link, kind: str, address: str, subscription: str | None, prefetch: int
    ) -> None:
        super().__init__(session.wire, link)
        self.session = session
        self.kind = kind
        self.address = address
        self.subscription = subscription
        self.prefetch = prefetch
        self.durable = _CONSUMER_KINDS[kind].durable
        self.buffer: deque[Received] = deque()
        self.arrived = 0
        session.consumers.append(self)

    @property
    def credit(self) -> int:
        return int(self.link.credit)

    def _arrived(self, delivery: Delivery, raw: bytes) -> None:
        received = Received(self, delivery, raw)
        if received.presettled:
            delivery.settle()  # frees it locally; no frame for a delivery the broker already settled
        self.buffer.append(received)
        self.arrived += 1

    def receive(self, timeout: float | None = None) -> Received:
        """The next buffered message, waiting for one (TimeoutError). No credit and no drain are added."""
        self.wire.pump(lambda: bool(self.buffer), timeout, f"a message on {self.name!r}")
        return self.buffer.popleft()

    def poll(self, timeout: float = 0.3) -> Received | None:
        """The next message within ``timeout``, or None."""
        self.wire._pump(lambda: bool(self.buffer), timeout)
        return self.buffer.popleft() if self.buffer else None

    def take_buffered(self) -> list[Received]:
        taken = list(self.buffer)
        self.buffer.clear()
        return taken

    def flow(self, credit: int) -> None:
        """flow(link-credit = current + ``credit``, drain=false)."""
        self.link.flow(credit)
        self.wire.flush()

    def top_up(self) -> None:
        """Back to ``prefetch`` credit, as after a drain or a rollback."""
        missing = self.prefetch - self.credit
        if missing > 0 and self.open:
            self.flow(missing)

    def drain(self, timeout: float | None = None) -> int:
        """flow(drain=true) and wait for the broker's drained answer (credit 0). Returns how many messages arrived
        meanwhile (they stay buffered). Without credit nothing is sent, as in Qpid JMS."""
        link = self.link
        if link.credit <= 0 or not self.open:
            return 0
        before = self.arrived
        link.drain(0)
        self.wire.flush()
        self.wire.pump(lambda: link.credit == 0 or not self.open, timeout, f"the drain answer on {self.name!r}")
        link.drain_mode = False
        return self.arrived - before

    def release_buffered(self) -> int:
        """``released`` for every prefetched message never handed out (consumer close, rollback)."""
        taken = self.take_buffered()
        for received in taken:
            received.release()
        return len(taken)

    def _check_shared_subs(self, timeout: float | None) -> None:
        """§1.5: without the connection capability, the reply attach must offer SHARED-SUBS itself."""
        reply = self.wire.last_attach_from_broker(self.name)
        offered = reply["offered-capabilities"] if reply is not None else None
        names = {str(c) for c in (offered.elements if isinstance(offered, Array) else [offered] if offered else [])}
        if "SHARED-SUBS" in names:
            return
        self._end(not self.durable, timeout)
        self.refusal = RemoteError(None, "Remote peer does not support shared subscriptions")
        raise LinkRefused("shared subscription refused", self.refusal)

    def _finished(self) -> None:
        if not self._done and self.subscription is not None:
            self.wire.subscriptions.release(self.subscription, self.kind, self.name)
        super()._finished()


class Producer(_LinkEnd):
    """A JMS MessageProducer link (fixed, or the anonymous relay one when ``address`` is None)."""

    def __init__(
        self, session: JmsSession, link: Link, producer_id: str, address: str | None, kind: str, presettle: bool
    ) -> None:
        super().__init__(session.wire, link)
        self.session = session
        self.id = producer_id
        self.address = address
        self.kind = kind
        self.presettle = presettle
        self.sent_count = 0
        self._tags = _Tags()

    @property
    def credit(self) -> int:
        return int(self.link.credit)

    def send(
        self,
        message: Any = None,
        *,
        to: str | TemporaryDestination | None = None,
        to_kind: str = QUEUE,
        persistent: bool = True,
        priority: int = 4,
        ttl: int | None = None,
        delay: int | None = None,
        txn_id: bytes | None = None,
        sync: bool | None = None,
        timeout: float | None = None,
        **message_fields: Any,
    ) -> Pending:
        """Send a JMS-shaped message (``JmsMessage.of(message, **message_fields)``); ttl/delay in ms.

        ``to``/``to_kind`` are for the anonymous producer. In a transacted session the transfer carries
        transactional-state{txn-id} (§6.3). Persistent non-transacted sends are synchronous (§5.2) unless
        ``sync`` says otherwise; a synchronous send raises SendFailed when the outcome is not accepted.
        """
        jms_message = JmsMessage.of(message, **message_fields)
        if isinstance(to, TemporaryDestination):
            to_kind, to = to.kind, to.address
        elif to is not None:
            to = self.wire.node_address(to, to_kind)
        if self.address is not None:
            to, to_kind = self.address, self.kind
        txn = txn_id if txn_id is not None else self.session.txn_id
        self.sent_count += 1
        message_id = f"{self.id}-{self.sent_count}"  # §7.4 DEFAULT: the producer id already starts with "ID:"
        payload = encode_message(
            jms_message,
            message_id=message_id,
            to=to,
            to_kind=to_kind if to is not None else None,
            persistent=persistent,
            priority=priority,
            ttl=ttl,
            delay=delay,
        )
        self.wire.pump(lambda: self.link.credit > 0 or not self.open, timeout, f"credit on {self.name!r}")
        pending = self._transfer(payload, txn, message_id)
        if sync if sync is not None else (persistent and txn is None and not self.presettle):
            outcome = pending.wait(timeout)
            if not outcome.accepted:
                raise SendFailed(outcome)
        return pending

    def _transfer(self, payload: bytes, txn: bytes | None, message_id: str | None) -> Pending:
        link = self.link
        tag = b"" if self.presettle else self._tags.acquire()  # §5.2: presettled sends use an empty tag
        delivery = link.delivery(tag)
        if txn is not None:
            delivery.local.data = [txn]  # transactional-state{txn-id}, no outcome
            delivery.update(TRANSACTIONAL_STATE)
        link.send(payload)
        link.advance()
        if self.presettle:
            delivery.settle()
            pending: Pending = _Presettled(self.wire, delivery, message_id)
        else:
            pending = Pending(self.wire, delivery, self._tags, tag, message_id)
        self.wire.flush()
        return pending


class _Coordinator(Producer):
    """The transaction coordinator link of a transacted session (§6.1)."""

    def __init__(self, session: JmsSession) -> None:
        link = session.session.sender(f"qpid-jms:coordinator:{session.id}")
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        _put_symbols(link.source.outcomes, OUTCOMES)
        link.target.type = Terminus.COORDINATOR
        _put_symbols(link.target.capabilities, [LOCAL_TRANSACTIONS])
        super().__init__(session, link, session.id, None, QUEUE, False)
        link.open()
        try:
            self._await_attach(None, check=True)
        except LinkRefused:
            session.close()  # §6.1: the client ends the session and createSession fails
            raise

    def control(self, payload: bytes) -> Pending:
        """One unsettled declare/discharge transfer, once the coordinator has credit."""
        self.wire.pump(lambda: self.link.credit > 0 or not self.open, None, "credit on the coordinator")
        return self._transfer(payload, None, None)


class TemporaryDestination(_LinkEnd):
    """A temporary queue/topic: the creator link on the hidden session. ``address`` is the broker's name."""

    def __init__(self, wire: JmsWire, link: Link, kind: str) -> None:
        super().__init__(wire, link)
        self.kind = kind
        self.address: str | None = None

    def delete(self, timeout: float | None = None) -> RemoteError | None:
        """``TemporaryQueue.delete()``: detach(closed=true) on the creator link."""
        return self.close(timeout)


# -- subscription link names (§2.3) --------------------------------------------------------------------------------
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
