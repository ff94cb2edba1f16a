"""The bytes of a publisher's messages, built without proton's ``Message`` for the common bodies.

Every message of a publisher starts the same way: a header section (``durable=true``) and the message
annotations ``{x-opt-publisher-id: ID, x-opt-publisher-seq: ulong SEQ}``. ``MessageEncoder`` builds that prefix
once, up to the 8 bytes of the seq (the annotations map is a ``map32`` and the seq a fixed-width ``ulong``, so
the prefix does not depend on the seq), and per message writes the seq and one body section:

- ``bytes``: a ``data`` section (AMQP 1.0 §3.2.6), as every AMQP client sends opaque payloads;
- ``str``: an ``amqp-value`` section holding a ``string`` (what proton's ``Message`` writes for a str body).

Any other body, and any message with application properties, is encoded by proton's ``Message`` with the same
header and annotations (``encode_with_proton``). A receiver decodes both kinds the same way (proton gives back
``bytes`` for a data section and ``str`` for a string value). Pure: no I/O, no state beyond the prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proton import Message, symbol, ulong

PUBLISHER_ID = "x-opt-publisher-id"
PUBLISHER_SEQ = "x-opt-publisher-seq"

HEADER_DURABLE = b"\x00\x53\x70\xc0\x02\x01\x41"  # header: list8, size 2, count 1, durable=true
MESSAGE_ANNOTATIONS = b"\x00\x53\x72"  # descriptor 0x72, then the map
DATA = b"\x00\x53\x75"  # descriptor 0x75: a data section (binary)
AMQP_VALUE = b"\x00\x53\x77"  # descriptor 0x77: an amqp-value section
ULONG = b"\x80"


def _sym8(name: str) -> bytes:
    raw = name.encode("ascii")
    return b"\xa3" + bytes((len(raw),)) + raw


def _variable(raw: bytes, code8: int, code32: int) -> bytes:
    """A variable-width value's constructor and size (``vbin8``/``vbin32``, ``str8``/``str32``)."""
    size = len(raw)
    if size < 256:
        return bytes((code8, size))
    return bytes((code32,)) + size.to_bytes(4, "big")


def encode_with_proton(body: Any, properties: Mapping[str, Any] | None, publisher_id: str, seq: int) -> bytes:
    """One persistent numbered message through proton's ``Message``: any body type, application properties."""
    message = Message(
        body=body,
        durable=True,
        properties=dict(properties) if properties else None,
        annotations={symbol(PUBLISHER_ID): publisher_id, symbol(PUBLISHER_SEQ): ulong(seq)},
    )
    return bytes(message.encode())


class MessageEncoder:
    """The bytes of ``publisher_id``'s messages; see the module's rules."""

    def __init__(self, publisher_id: str) -> None:
        self.publisher_id = publisher_id
        raw_id = publisher_id.encode("utf-8")
        entries = _sym8(PUBLISHER_ID) + _variable(raw_id, 0xA1, 0xB1) + raw_id + _sym8(PUBLISHER_SEQ) + ULONG
        size = 4 + len(entries) + 8  # map32 size: the count field, the entries, the seq's 8 bytes
        annotations = MESSAGE_ANNOTATIONS + b"\xd1" + size.to_bytes(4, "big") + (4).to_bytes(4, "big") + entries
        self.prefix = HEADER_DURABLE + annotations

    def encode(self, body: Any, properties: Mapping[str, Any] | None, seq: int) -> bytes:
        """The message with ``body``, ``properties`` and publisher seq ``seq``, ready for the sender link."""
        kind = type(body)
        if not properties:
            if kind is bytes:
                return b"".join((self.prefix, seq.to_bytes(8, "big"), DATA, _variable(body, 0xA0, 0xB0), body))
            if kind is str:
                raw = body.encode("utf-8")
                return b"".join((self.prefix, seq.to_bytes(8, "big"), AMQP_VALUE, _variable(raw, 0xA1, 0xB1), raw))
        return encode_with_proton(body, properties, self.publisher_id, seq)

    def encode_bytes(self, bodies: list[bytes], first_seq: int) -> list[bytes]:
        """Many ``bytes`` bodies numbered from ``first_seq`` (the caller checked their type)."""
        prefix = self.prefix
        out = []
        seq = first_seq
        for body in bodies:
            out.append(b"".join((prefix, seq.to_bytes(8, "big"), DATA, _variable(body, 0xA0, 0xB0), body)))
            seq += 1
        return out
