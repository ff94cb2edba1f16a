"""The sections of an AMQP 1.0 message: ``scan`` reads the header, message-annotations and properties into an
``Envelope`` and records the spans of the rest; ``application_properties`` decodes that section on demand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from subgate.engine.codec.decode import READERS, compound, elements, leftover, pairs, read_value, skip, truncated
from subgate.engine.codec.memo import AnnotationMemo
from subgate.engine.codec.types import CodecError, Symbol, UByte, UInt, ULong

# --------------------------------------------------------------------------------------------------
# Message sections.

_HEADER, _DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS, _PROPERTIES = 0x70, 0x71, 0x72, 0x73
_APPLICATION_PROPERTIES, _DATA, _SEQUENCE, _VALUE, _FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78

_SECTION_NAMES = {
    "amqp:header:list": _HEADER,
    "amqp:delivery-annotations:map": _DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": _MESSAGE_ANNOTATIONS,
    "amqp:properties:list": _PROPERTIES,
    "amqp:application-properties:map": _APPLICATION_PROPERTIES,
    "amqp:data:binary": _DATA,
    "amqp:amqp-sequence:list": _SEQUENCE,
    "amqp:value:*": _VALUE,
    "amqp:footer:map": _FOOTER,
}


def _allowed_transitions() -> frozenset[int]:
    """Pairs (previous << 8 | next) of section codes allowed by AMQP 1.0 part 3, section 3.2.

    header? delivery-annotations? message-annotations? properties? application-properties?
    (data+ | amqp-sequence+ | amqp-value) footer?   -- the body is optional here, as proton allows.
    """
    allowed: set[int] = set()
    for previous in (0, *range(_HEADER, _APPLICATION_PROPERTIES + 1)):
        allowed.update(previous << 8 | nxt for nxt in range(max(previous + 1, _HEADER), _FOOTER + 1))
    for body in (_DATA, _SEQUENCE, _VALUE):
        allowed.add(body << 8 | _FOOTER)
    allowed.update((_DATA << 8 | _DATA, _SEQUENCE << 8 | _SEQUENCE))
    return frozenset(allowed)


_TRANSITIONS = _allowed_transitions()


def section_code(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read the descriptor of the section at ``pos``; return (section code, offset of its value)."""
    if buf[pos] != 0x00:
        raise CodecError(f"expected a described section at offset {pos}, found 0x{buf[pos]:02x}")
    if pos + 3 <= end and buf[pos + 1] == 0x53:  # smallulong descriptor: what everyone sends
        return buf[pos + 2], pos + 3
    descriptor, nxt = read_value(buf, pos + 1, end)
    if isinstance(descriptor, ULong):
        return (descriptor if descriptor <= 0xFF else 0), nxt
    if isinstance(descriptor, Symbol):
        return _SECTION_NAMES.get(descriptor, 0), nxt
    raise CodecError(f"section descriptor at offset {pos + 1} is neither a ulong nor a symbol")


def _order_error(previous: int, code: int, pos: int) -> CodecError:
    if not _HEADER <= code <= _FOOTER:
        return CodecError(f"unknown section descriptor 0x{code:x} at offset {pos}")
    return CodecError(f"section 0x{code:x} at offset {pos} may not follow section 0x{previous:x}")


_LIST_WIDTHS = {0xC0: 1, 0xD0: 4, 0x45: 0}
_MAP_WIDTHS = {0xC1: 1, 0xD1: 4}


def _composite(buf: bytes, pos: int, end: int, widths: dict[int, int], what: str) -> tuple[int, int]:
    """Check that the value at ``pos`` is a list (or map) as ``widths`` allows; return its size width
    (0 for list0) and the offset just past its format code."""
    if pos >= end:
        raise truncated(what, pos)
    width = widths.get(buf[pos])
    if width is None:
        kind = "list" if widths is _LIST_WIDTHS else "map"
        raise CodecError(f"{what} at offset {pos} has format code 0x{buf[pos]:02x}, not a {kind}")
    return width, pos + 1


def _fields(buf: bytes, pos: int, end: int, what: str) -> tuple[list[Any], int]:
    """Read the list at ``pos`` (format code included) as its elements."""
    width, pos = _composite(buf, pos, end, _LIST_WIDTHS, what)
    if width == 0:
        return [], pos
    return elements(buf, pos, end, width, what)


def _map_items(buf: bytes, pos: int, end: int, what: str) -> tuple[list[Any], int]:
    """Read the map at ``pos`` (format code included) as a flat [key, value, ...] list."""
    width, pos = _composite(buf, pos, end, _MAP_WIDTHS, what)
    return elements(buf, pos, end, width, what)


_NO_FIELDS = (None,) * 13
_Header = tuple[bool, int, "int | None", bool, int]
_DEFAULT_HEADER: _Header = (False, 4, None, False, 0)


_HEADER_CACHE: dict[bytes, _Header] = {}  # few distinct headers exist: decode each encoding once
_HEADER_CACHE_MAX = 1024


def _header(buf: bytes, pos: int, end: int) -> tuple[_Header, int]:
    """Decode the header list into (durable, priority, ttl, first-acquirer, delivery-count)."""
    nxt = skip(buf, pos, end)
    encoded = buf[pos:nxt]
    header = _HEADER_CACHE.get(encoded)
    if header is None:
        header = _decode_header(buf, pos, nxt)
        if len(_HEADER_CACHE) >= _HEADER_CACHE_MAX:
            _HEADER_CACHE.clear()
        _HEADER_CACHE[encoded] = header
    return header, nxt


def _decode_header(buf: bytes, pos: int, end: int) -> _Header:
    fields, _ = _fields(buf, pos, end, "header")
    if len(fields) < 5:
        fields += _NO_FIELDS[len(fields) : 5]
    durable, priority, ttl, first, count = fields[:5]
    if not (
        (durable is None or type(durable) is bool)
        and (priority is None or type(priority) is UByte)
        and (ttl is None or type(ttl) is UInt)
        and (first is None or type(first) is bool)
        and (count is None or type(count) is UInt)
    ):
        raise CodecError(f"header at offset {pos} has a field of the wrong type: {fields[:5]!r}")
    # Plain ints: these go to storage and arithmetic, where the AMQP type no longer matters.
    return (
        durable is True,
        4 if priority is None else int(priority),
        None if ttl is None else int(ttl),
        first is True,
        0 if count is None else int(count),
    )


def _annotations(buf: bytes, pos: int, end: int) -> tuple[dict[str, object], int]:
    """Decode the message-annotations map; keys become plain str (ulong 7 becomes "7")."""
    width, pos = _composite(buf, pos, end, _MAP_WIDTHS, "message-annotations")
    count, p, stop = compound(buf, pos, end, width, "message-annotations")
    if count & 1:
        raise CodecError(f"message-annotations at offset {pos} has an odd element count {count}")
    out: dict[str, object] = {}
    readers = READERS
    for _ in range(count >> 1):
        if p >= stop:
            raise truncated("message-annotations key", p)
        key, p = readers[buf[p]](buf, p + 1, stop)
        if p >= stop:
            raise truncated("message-annotations value", p)
        value, p = readers[buf[p]](buf, p + 1, stop)
        out[str(key)] = value
    if p != stop:
        raise leftover("message-annotations", pos, stop - p)
    return out, stop


def _properties(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
    """Decode the properties list, padded to 13 fields and type-checked where the broker reads it.
    Message and correlation ids keep their AMQP type (ULong, UUID, bytes or str)."""
    fields, nxt = _fields(buf, pos, end, "properties")
    if len(fields) < 13:
        fields += _NO_FIELDS[len(fields) : 13]
    _, user_id, to, subject, reply_to, _, ctype, _, expiry, created, group, group_seq, reply_group = fields[:13]
    if not (
        (user_id is None or type(user_id) is bytes)
        and (to is None or isinstance(to, str))
        and (subject is None or isinstance(subject, str))
        and (reply_to is None or isinstance(reply_to, str))
        and (ctype is None or isinstance(ctype, str))
        and (expiry is None or isinstance(expiry, int))
        and (created is None or isinstance(created, int))
        and (group is None or isinstance(group, str))
        and (group_seq is None or (isinstance(group_seq, int) and type(group_seq) is not bool))
        and (reply_group is None or isinstance(reply_group, str))
    ):
        raise CodecError(f"properties at offset {pos} has a field of the wrong type: {fields[:13]!r}")
    if expiry is not None:
        fields[8] = int(expiry)  # plain int milliseconds, like the header fields
    if created is not None:
        fields[9] = int(created)
    if group_seq is not None:
        fields[11] = int(group_seq)  # a plain int, like the timestamps
    return fields, nxt


@dataclass(slots=True)
class Envelope:
    """What the broker routes on, read by ``scan``.

    Spans are [start, end) byte offsets of whole sections, descriptor included; an absent header is
    (0, 0), any other absent section (-1, -1). Header fields and the two timestamps are plain ints
    (milliseconds); ``annotations`` has plain str keys (a ulong key 7 becomes "7") and decoded values;
    ``message_id``/``correlation_id`` keep their AMQP type (str, ULong, uuid.UUID or bytes);
    ``group_sequence`` is a plain int. ``body_start`` is the first body section, else the footer, else
    ``len(raw)``.
    Treat it as read-only: ``with_delivery_count``/``with_annotations`` take it as a map of ``raw``.
    """

    header_start: int = 0
    header_end: int = 0
    durable: bool = False
    priority: int = 4
    ttl: int | None = None
    first_acquirer: bool = False
    delivery_count: int = 0
    annotations_start: int = -1
    annotations_end: int = -1
    annotations: dict[str, object] = field(default_factory=dict)
    properties_start: int = -1
    properties_end: int = -1
    to: str | None = None
    message_id: object = None
    creation_time: int | None = None
    absolute_expiry_time: int | None = None
    group_id: str | None = None
    subject: str | None = None
    correlation_id: object = None
    reply_to: str | None = None
    user_id: bytes | None = None
    content_type: str | None = None
    app_properties_start: int = -1
    app_properties_end: int = -1
    body_start: int = 0
    group_sequence: int | None = None
    reply_to_group_id: str | None = None


def scan(raw: bytes, memo: AnnotationMemo | None = None) -> Envelope:
    """Walk the sections of an encoded message once and return its ``Envelope``.

    Decodes the header, message-annotations and properties; records the spans of the other sections,
    skipping each through its size prefix without decoding it. With a ``memo`` (one per publisher link), a
    message-annotations section like the link's previous one is not decoded again (``codec.memo``).

    Raises:
        CodecError: the sections are malformed, truncated, unknown or out of order.
    """
    try:
        return _scan(raw if type(raw) is bytes else bytes(raw), memo)
    except RecursionError:
        raise CodecError("message-annotations or properties nested too deeply") from None


def _scan(raw: bytes, memo: AnnotationMemo | None) -> Envelope:
    end = len(raw)
    pos = previous = 0
    header_end = 0
    header = _DEFAULT_HEADER
    annotations: dict[str, object] = {}
    ann_start = ann_end = prop_start = prop_end = app_start = app_end = body_start = -1
    props: Sequence[Any] = _NO_FIELDS
    lead = memo.recall_lead(raw) if memo is not None else None
    if lead is not None:  # header and annotations as in the link's previous message (codec.memo)
        (header, header_end, ann_start), annotations, pos = lead
        ann_end, previous = pos, _MESSAGE_ANNOTATIONS
    while pos < end:
        start = pos
        code, pos = section_code(raw, pos, end)
        if (previous << 8 | code) not in _TRANSITIONS:
            raise _order_error(previous, code, start)
        previous = code
        if code == _MESSAGE_ANNOTATIONS:
            recalled = memo.recall(raw, start) if memo is not None else None
            if recalled is not None:
                annotations, pos = recalled
            else:
                annotations, pos = _annotations(raw, pos, end)
                if memo is not None:
                    memo.learn(raw, start, pos, annotations, (header, header_end, start))
            ann_start, ann_end = start, pos
        elif code == _PROPERTIES:
            props, pos = _properties(raw, pos, end)
            prop_start, prop_end = start, pos
        elif code == _HEADER:
            header, pos = _header(raw, pos, end)
            header_end = pos
        else:
            pos = skip(raw, pos, end)
            if code == _APPLICATION_PROPERTIES:
                app_start, app_end = start, pos
            elif code >= _DATA and body_start < 0:
                body_start = start
    msg_id, user_id, to, subject, reply_to, corr_id, ctype, _, expiry, created, group, seq, reply_group = props[:13]
    durable, priority, ttl, first, count = header
    return Envelope(
        0, header_end, durable, priority, ttl, first, count,
        ann_start, ann_end, annotations, prop_start, prop_end,
        to, msg_id, created, expiry, group, subject, corr_id, reply_to, user_id, ctype,
        app_start, app_end, end if body_start < 0 else body_start, seq, reply_group,
    )  # fmt: skip


def application_properties(raw: bytes, env: Envelope) -> dict[str, object]:
    """Decode the application-properties section that ``scan`` located (``{}`` when there is none).

    Raises:
        CodecError: the section is malformed or a key is not a string.
    """
    if env.app_properties_start < 0:
        return {}
    end = env.app_properties_end
    raw = raw if type(raw) is bytes else bytes(raw)
    try:
        _, pos = section_code(raw, env.app_properties_start, end)
        items, _ = _map_items(raw, pos, end, "application-properties")
    except RecursionError:
        raise CodecError("application-properties nested too deeply") from None
    props = {}
    for key, value in pairs(items, env.app_properties_start, "application-properties"):
        if not isinstance(key, str):
            raise CodecError(f"application-properties key {key!r} is not a string")
        props[str(key)] = value
    return props
