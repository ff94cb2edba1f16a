"""Rewriting a message at byte level: a new header (``with_delivery_count``) or extra message annotations
(``with_annotations``) spliced between unchanged slices of the original bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from subgate.engine.codec.decode import U32, compound, read_value, skip
from subgate.engine.codec.encode import ENCODERS, compound_bytes, compound_head, encode_symbol, encode_value
from subgate.engine.codec.sections import Envelope, section_code
from subgate.engine.codec.types import CodecError, Symbol, UByte, UInt

# --------------------------------------------------------------------------------------------------
# Rewrites.

_LARGE_TAIL = 64 * 1024  # below this, copying a slice is cheaper than making a memoryview of it


def _splice(raw: bytes, start: int, middle: bytes, stop: int) -> bytes:
    """``raw[:start] + middle + raw[stop:]``, without an extra copy of a large tail."""
    tail: bytes | memoryview = raw[stop:] if len(raw) - stop < _LARGE_TAIL else memoryview(raw)[stop:]
    return b"".join((raw[:start], middle, tail))


def _encode_uint(value: int) -> bytes:
    return ENCODERS[UInt](value)


def _header_section(durable: bool, priority: int, ttl: int | None, first: bool, count: int) -> bytes:
    """Encode a header section; default fields are null and trailing defaults are left out."""
    fields = [
        b"\x41" if durable else b"\x40",
        b"\x40" if priority == 4 else ENCODERS[UByte](priority),
        b"\x40" if ttl is None else _encode_uint(ttl),
        b"\x41" if first else b"\x40",
        b"\x40" if count == 0 else _encode_uint(count),
    ]
    while fields and fields[-1] == b"\x40":
        fields.pop()
    if not fields:
        return b"\x00\x53\x70\x45"
    body = b"".join(fields)
    return bytes((0x00, 0x53, 0x70, 0xC0, len(body) + 1, len(fields))) + body


def with_delivery_count(raw: bytes, env: Envelope, count: int) -> bytes:
    """Return the message with header delivery-count set to ``count``.

    Every other header field is kept and a header is added when the message had none; the bytes after
    the header are copied unchanged. ``env`` must come from ``scan(raw)``.

    Raises:
        CodecError: ``count`` is not a uint.
    """
    if not 0 <= count <= 0xFFFFFFFF:
        raise CodecError(f"delivery-count {count} is out of range for AMQP uint")
    header = _header_section(env.durable, env.priority, env.ttl, env.first_acquirer, count)
    return _splice(raw, 0, header, env.header_end)


def _annotation_entries(raw: bytes, env: Envelope) -> tuple[bytes, list[tuple[object, int, int]]]:
    """Split the existing message-annotations section into its descriptor bytes and the
    (key, start, stop) span of every key/value entry."""
    end = env.annotations_end
    raw = raw if type(raw) is bytes else bytes(raw)
    _, pos = section_code(raw, env.annotations_start, end)
    width = 1 if raw[pos] == 0xC1 else 4
    count, p, _ = compound(raw, pos + 1, end, width, "map")
    entries = []
    for _ in range(count // 2):
        key, value_pos = read_value(raw, p, end)
        stop = skip(raw, value_pos, end)
        entries.append((key, p, stop))
        p = stop
    return raw[env.annotations_start : pos], entries


_ANNOTATION_KEYS: dict[str, bytes] = {}


def _annotation_section(descriptor: bytes, entries: Iterable[bytes], count: int) -> bytes:
    return descriptor + compound_bytes(0xC1, 0xD1, 2 * count, b"".join(entries))


def _appended(raw: bytes, env: Envelope, fresh: dict[str, bytes]) -> bytes:
    """The message with ``fresh`` entries (none of whose keys it has) appended to its annotation map: the
    existing entries are copied as one slice, only the map's size and count are written anew."""
    start, end = env.annotations_start, env.annotations_end
    if raw[start + 1] == 0x53 and raw[start + 3] == 0xD1:  # the usual descriptor and a map32, as scan read them
        pos, count, body = start + 3, U32.unpack_from(raw, start + 8)[0], start + 12
    elif raw[start + 1] == 0x53 and raw[start + 3] == 0xC1:  # map8
        pos, count, body = start + 3, raw[start + 5], start + 6
    else:
        _, pos = section_code(raw, start, end)
        width = 1 if raw[pos] == 0xC1 else 4
        count, body, _ = compound(raw, pos + 1, end, width, "map")
    entries = (raw[body:end], *fresh.values())
    section = raw[start:pos] + compound_bytes(0xC1, 0xD1, count + 2 * len(fresh), b"".join(entries))
    return _splice(raw, start, section, end)


def with_annotations(raw: bytes, env: Envelope, extra: dict[str, object]) -> bytes:
    """Return the message with the ``extra`` message-annotations added or replaced (symbol keys).

    Existing entries keep their exact bytes and position; a replaced entry is re-encoded in place and
    new ones go at the end. Without a message-annotations section one is inserted after the header and
    delivery-annotations. ``env`` must come from ``scan(raw)``.

    Raises:
        CodecError: a key is not an ASCII string or a value is out of range.
        TypeError: a value has no AMQP encoding.
    """
    if not extra:
        return bytes(raw)
    fresh: dict[str, bytes] = {}
    for key, value in extra.items():
        if not isinstance(key, str):
            raise CodecError(f"message-annotation key {key!r} is not a string")
        encoded_key = _ANNOTATION_KEYS.get(key)
        if encoded_key is None:
            encoded_key = encode_symbol(key)
            if len(_ANNOTATION_KEYS) < 64:  # the broker's own few keys (x-opt-bookmark): encoded once
                _ANNOTATION_KEYS[key] = encoded_key
        fresh[key] = encoded_key + encode_value(value)
    if env.annotations_start < 0:
        at = _new_section_at(raw, env)
        section = _annotation_section(b"\x00\x53\x72", fresh.values(), len(fresh))
        return _splice(raw, at, section, at)
    if env.annotations.keys().isdisjoint(fresh):
        return _appended(raw, env, fresh)
    descriptor, entries = _annotation_entries(raw, env)
    parts = []
    for name, start, stop in entries:
        replaced = fresh.pop(name, None) if isinstance(name, Symbol) else None
        parts.append(raw[start:stop] if replaced is None else replaced)
    parts.extend(fresh.values())
    section = _annotation_section(descriptor, parts, len(parts))
    return _splice(raw, env.annotations_start, section, env.annotations_end)


def _new_section_at(raw: bytes, env: Envelope) -> int:
    """Where a message without message-annotations gets them: before the first of properties,
    application-properties and body (every message has a body)."""
    at = env.properties_start
    if at < 0:
        at = env.app_properties_start if env.app_properties_start >= 0 else env.body_start
    return len(raw) if at < 0 else at


def _map_head(size: int, count: int) -> bytes:
    """The message-annotations descriptor and the map's constructor, size and count, for a body of ``size``."""
    return b"\x00\x53\x72" + compound_head(0xC1, 0xD1, count, size)


def with_string_annotation(raw: bytes, env: Envelope, key: str, text: str) -> bytes:
    """``with_annotations(raw, env, {key: text})`` for one string value, the broker's own ``x-opt-bookmark`` on
    every journaled message: the usual cases (no section yet; a section in the usual descriptor and map form
    without ``key``) build the result in one join, without the general path's dictionaries. Same bytes.

    Raises:
        CodecError: as ``with_annotations``.
    """
    start = env.annotations_start
    if start >= 0 and (key in env.annotations or raw[start + 1] != 0x53 or raw[start + 2] != 0x72):
        return with_annotations(raw, env, {key: text})
    encoded_key = _ANNOTATION_KEYS.get(key)
    if encoded_key is None:
        return with_annotations(raw, env, {key: text})
    value = text.encode("utf-8")
    entry = encoded_key + (b"\xa1" + bytes((len(value),)) if len(value) < 256 else b"\xb1" + U32.pack(len(value)))
    if start < 0:
        at = stop = _new_section_at(raw, env)
        body, count, size = b"", 2, len(entry) + len(value)
    else:
        at, stop, code = start, env.annotations_end, raw[start + 3]
        if code == 0xD1:
            count, first = U32.unpack_from(raw, start + 8)[0] + 2, start + 12
        elif code == 0xC1:
            count, first = raw[start + 5] + 2, start + 6
        else:
            return with_annotations(raw, env, {key: text})
        body = raw[first:stop]
        size = stop - first + len(entry) + len(value)
    head = _map_head(size, count)
    tail: bytes | memoryview = raw[stop:] if len(raw) - stop < _LARGE_TAIL else memoryview(raw)[stop:]
    return b"".join((raw[:at], head, body, entry, value, tail))


_ABSOLUTE_EXPIRY = 8  # the properties field absolute-expiry-time


def _properties_without_expiry(raw: bytes, env: Envelope) -> bytes:
    """The message with properties.absolute-expiry-time null (the other fields keep their bytes)."""
    start, end = env.properties_start, env.properties_end
    if start < 0 or env.absolute_expiry_time is None:
        return raw
    _, pos = section_code(raw, start, end)
    if raw[pos] == 0x45:  # list0: no fields at all
        return raw
    width = 1 if raw[pos] == 0xC0 else 4
    count, p, _ = compound(raw, pos + 1, end, width, "list")
    fields: list[bytes] = []
    for _ in range(count):
        stop = skip(raw, p, end)
        fields.append(raw[p:stop])
        p = stop
    fields[_ABSOLUTE_EXPIRY] = b"\x40"
    section = raw[start:pos] + compound_bytes(0xC0, 0xD0, count, b"".join(fields))
    return _splice(raw, start, section, end)


def moved_copy(raw: bytes, env: Envelope, annotations: dict[str, object], *, keep_expiry: bool) -> bytes:
    """A message moved to a dead letter or expiry address: the ``annotations`` added, delivery-count 0 (a new
    message on its new queue), and, unless ``keep_expiry``, no header ttl nor properties absolute-expiry-time
    (an expired message's copy must not expire again, nor be dropped by a client's own expiry check).

    Each step rewrites only bytes after the offsets of ``env`` that the following steps use, so one ``scan``
    serves all three.

    Raises:
        CodecError: as ``with_annotations``.
    """
    if not keep_expiry:
        raw = _properties_without_expiry(raw, env)
    raw = with_annotations(raw, env, annotations)
    ttl = env.ttl if keep_expiry else None
    header = _header_section(env.durable, env.priority, ttl, env.first_acquirer, 0)
    return _splice(raw, 0, header, env.header_end)
