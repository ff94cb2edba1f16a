"""AMQP type encodings written byte by byte, for frames no client library would send.

proton's encoder refuses a string that is not valid UTF-8 or a symbol that is not ASCII, so the tests that check
how the server takes such input build the frames here: each function returns the encoding of one value
(AMQP 1.0 part 1.6), and ``described_list`` wraps fields as a performative body.
"""

from __future__ import annotations

import struct


def null() -> bytes:
    return b"\x40"


def sym(raw: bytes) -> bytes:
    """A symbol with these exact bytes (sym8, or sym32 when longer than 255)."""
    if len(raw) < 256:
        return b"\xa3" + bytes([len(raw)]) + raw
    return b"\xb3" + struct.pack(">I", len(raw)) + raw


def string(raw: bytes) -> bytes:
    """A string with these exact bytes (str8 or str32), valid UTF-8 or not."""
    if len(raw) < 256:
        return b"\xa1" + bytes([len(raw)]) + raw
    return b"\xb1" + struct.pack(">I", len(raw)) + raw


def binary(raw: bytes) -> bytes:
    if len(raw) < 256:
        return b"\xa0" + bytes([len(raw)]) + raw
    return b"\xb0" + struct.pack(">I", len(raw)) + raw


def uint(value: int) -> bytes:
    return b"\x70" + struct.pack(">I", value)


def boolean(value: bool) -> bytes:
    return b"\x41" if value else b"\x42"


def ubyte(value: int) -> bytes:
    return b"\x50" + bytes([value])


def list32(encoded_items: list[bytes]) -> bytes:
    body = b"".join(encoded_items)
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(encoded_items)) + body


def described_list(code: int, encoded_fields: list[bytes]) -> bytes:
    """``described(smallulong(code), list32(fields))``: a performative, terminus or section body."""
    return b"\x00\x53" + bytes([code]) + list32(encoded_fields)


def map32(encoded_pairs: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(key + value for key, value in encoded_pairs)
    return b"\xd1" + struct.pack(">II", len(body) + 4, 2 * len(encoded_pairs)) + body
