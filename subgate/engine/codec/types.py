"""The AMQP 1.0 value types as Python classes that remember their exact AMQP type, and ``CodecError``.

Part of ``subgate.engine.codec`` (its package docstring has the theory of operation); standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


class CodecError(ValueError):
    """Malformed or truncated AMQP bytes (the message says what and at which offset), or a value that
    has no AMQP encoding in its declared type (out of range)."""


# --------------------------------------------------------------------------------------------------
# Wrapper types: a Python value that remembers its exact AMQP type.


class _ExactInt(int):
    """Base of the integer wrappers. ``str()`` gives the plain number, ``repr()`` names the type."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int.__repr__(self)})"

    __str__ = int.__repr__


class UByte(_ExactInt):
    """AMQP ubyte (0..255)."""

    __slots__ = ()


class UShort(_ExactInt):
    """AMQP ushort (0..65535)."""

    __slots__ = ()


class UInt(_ExactInt):
    """AMQP uint (0..2**32-1)."""

    __slots__ = ()


class ULong(_ExactInt):
    """AMQP ulong (0..2**64-1)."""

    __slots__ = ()


class Byte(_ExactInt):
    """AMQP byte (-128..127)."""

    __slots__ = ()


class Short(_ExactInt):
    """AMQP short (-32768..32767)."""

    __slots__ = ()


class Int(_ExactInt):
    """AMQP int (32-bit signed)."""

    __slots__ = ()


class Timestamp(_ExactInt):
    """AMQP timestamp: milliseconds since the Unix epoch (64-bit signed)."""

    __slots__ = ()


class Symbol(str):
    """AMQP symbol (ASCII)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Char(str):
    """AMQP char: one Unicode code point."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Char({str.__repr__(self)})"


class Float(float):
    """AMQP float (IEEE 754 binary32); a plain ``float`` encodes as double."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float({float.__repr__(self)})"


class Decimal32(bytes):
    """AMQP decimal32, kept as its 4 raw IEEE 754 bytes."""

    __slots__ = ()


class Decimal64(bytes):
    """AMQP decimal64, kept as its 8 raw IEEE 754 bytes."""

    __slots__ = ()


class Decimal128(bytes):
    """AMQP decimal128, kept as its 16 raw IEEE 754 bytes."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Described:
    """A described value: ``descriptor`` (usually a Symbol or ULong) and the value it describes."""

    descriptor: object
    value: object
