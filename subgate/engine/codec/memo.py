"""A publisher link's message-annotations, decoded once: ``AnnotationMemo``.

The messages of one publisher carry the same message-annotations section, byte for byte, except perhaps one
ulong that counts up (``x-opt-publisher-seq``): a JMS producer sends the same ``x-opt-jms-msg-type`` and
``x-opt-jms-dest`` every time, a publisher with an id the same id. Decoding that map is the costliest part of
``scan`` for such a message (measured in the server: 5 to 8 µs of the reactor's time per message). The memo keeps
the last section that decoded and, when the next one is the same bytes around the same 8-byte hole, takes the
decoded map from it and reads only the hole. Anything else is decoded in full, and becomes the new template.

Exactness: a hit requires every byte of the section outside the hole to be equal to the template's (so the map's
size and count, every key and every other value are the same), and the hole is the ulong value of ``hole_key``
at the one place its encoding occurs in the template. Templates hold immutable scalar values only, so a copied
map shares nothing a caller could change.
"""

from __future__ import annotations

import struct

from subgate.engine.codec.types import ULong

_U64 = struct.Struct(">Q")
_SCALARS = (str, int, float, bytes, bool, type(None))
_MAX_SECTION = 512  # bytes: larger maps are decoded every time


class AnnotationMemo:
    """The last message-annotations section seen on one link, and its decoded map (one per publisher link)."""

    __slots__ = ("hole_key", "_marker", "_prefix", "_suffix", "_hole", "_size", "_template", "hits")

    def __init__(self, hole_key: str | None = None) -> None:
        self.hole_key = hole_key
        self._marker = b"\xa3" + bytes((len(hole_key),)) + hole_key.encode("ascii") + b"\x80" if hole_key else b""
        self._prefix = b""  # the section's bytes up to the hole (the whole section when there is no hole)
        self._suffix = b""  # after the hole
        self._hole = -1  # offset of the 8-byte hole from the section's start; -1: no hole
        self._size = 0
        self._template: dict[str, object] | None = None
        self.hits = 0

    def recall(self, raw: bytes, start: int) -> tuple[dict[str, object], int] | None:
        """The decoded map of the section at ``start`` and its end, if it matches the template; else None."""
        template = self._template
        if template is None or not raw.startswith(self._prefix, start):
            return None
        hole = self._hole
        if hole < 0:
            self.hits += 1
            return template.copy(), start + self._size
        at = start + hole
        if not raw.startswith(self._suffix, at + 8):
            return None
        annotations = template.copy()
        annotations[self.hole_key] = ULong(_U64.unpack_from(raw, at)[0])  # type: ignore[index]
        self.hits += 1
        return annotations, start + self._size

    def learn(self, raw: bytes, start: int, end: int, annotations: dict[str, object]) -> None:
        """Make the section ``raw[start:end]``, which decoded to ``annotations``, the template (if it may be)."""
        self._template = None
        size = end - start
        if size > _MAX_SECTION or not all(isinstance(v, _SCALARS) for v in annotations.values()):
            return
        section = raw[start:end]
        hole = -1
        seq = annotations.get(self.hole_key) if self.hole_key else None
        if type(seq) is ULong:
            found = section.find(self._marker)
            if found >= 0 and section.find(self._marker, found + 1) < 0:
                hole = found + len(self._marker)
                if int.from_bytes(section[hole : hole + 8]) != seq:  # not the value: leave it to full decoding
                    return
        self._hole = hole
        self._size = size
        self._prefix = section if hole < 0 else section[:hole]
        self._suffix = b"" if hole < 0 else section[hole + 8 :]
        self._template = dict(annotations)
