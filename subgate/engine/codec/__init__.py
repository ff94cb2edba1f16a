"""AMQP 1.0 message bytes: read what the broker routes on, rewrite header and annotations in place.

This module owns the AMQP 1.0 type system as bytes (AMQP 1.0 part 1, "Types") and the section layout of a
message (part 3, section 3.2). It knows nothing about links, deliveries or proton and imports only the
standard library: the broker forwards every message as the bytes it received and never decodes and
re-encodes a whole message.

Theory of operation
-------------------
* ``scan`` walks the sections once. It decodes the header, the message-annotations and the properties,
  and only records the spans of delivery-annotations, application-properties, body sections and footer,
  skipping each with its size prefix (O(1) per section). The result is one small ``Envelope``.
* ``with_delivery_count`` and ``with_annotations`` build the few new bytes and splice them between
  unchanged slices of the original; existing annotation entries are copied byte for byte.
* ``decode_value`` reads any AMQP value. Every reader has the shape ``read(buf, pos, end) -> (value, next)``
  where ``pos`` is just past the format code and ``end`` bounds the enclosing value, so a value can never
  run past its container. Readers check bounds themselves: malformed or truncated input raises
  ``CodecError`` with an offset, never ``IndexError`` or ``struct.error``.
* Exact AMQP types that matter when a value is encoded again (symbol, ulong, byte, timestamp, ...) decode
  to the small wrapper classes below, which are ``int``/``str``/``float``/``bytes`` subclasses and compare
  equal to plain values. ``long`` decodes to ``int``, ``double`` to ``float``, ``string`` to ``str``,
  ``binary`` to ``bytes``, ``uuid`` to ``uuid.UUID``, lists and arrays to ``list``, maps to ``dict``;
  decimals stay as their raw bytes. Symbols are read as UTF-8 (a superset of the ASCII the spec asks
  for) but only ASCII symbols are written.
* Work a hostile peer can cause is bounded by the input size: a list or map may not count more elements
  than it has bytes, and an array (whose elements may take no bytes, as proton's arrays of null do) not
  more than the whole buffer has bytes. Nesting too deep for Python's stack is a ``CodecError``.
* Two bounded caches, emptied when full, keep repeated work off the hot path: the ``Symbol`` for each
  symbol spelling seen, and the decoded header for each header encoding (there are few distinct ones).
* ``scan(raw, memo)`` with an ``AnnotationMemo`` per publisher link decodes a message-annotations section
  that repeats the link's previous one (all but the ulong publisher seq), and the header before it, only once
  (``codec.memo``).
"""

from __future__ import annotations

from subgate.engine.codec.decode import decode_value
from subgate.engine.codec.encode import encode_value
from subgate.engine.codec.memo import AnnotationMemo
from subgate.engine.codec.rewrite import moved_copy, with_annotations, with_delivery_count, with_string_annotation
from subgate.engine.codec.sections import Envelope, application_properties, scan
from subgate.engine.codec.types import (
    Byte,
    Char,
    CodecError,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

__all__ = [
    "AnnotationMemo",
    "Byte",
    "Char",
    "CodecError",
    "Decimal128",
    "Decimal32",
    "Decimal64",
    "Described",
    "Envelope",
    "Float",
    "Int",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "application_properties",
    "decode_value",
    "encode_value",
    "moved_copy",
    "scan",
    "with_annotations",
    "with_delivery_count",
    "with_string_annotation",
]
