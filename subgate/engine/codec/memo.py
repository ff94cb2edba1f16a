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

The memo also keeps the bytes before the section (the header, which a publisher repeats too) and what ``scan``
read from them: ``recall_lead`` then takes header and map at once from a message that starts with those bytes, and
``scan`` walks on from the section's end (half of ``scan``'s time for a message with a header and annotations).
A message whose header differs from the template's still recalls its map through ``recall``.
"""

from __future__ import annotations

import struct
from typing import Any

from subgate.engine.codec.types import ULong

_U64 = struct.Struct(">Q")
_SCALARS = (str, int, float, bytes, bool, type(None))
_MAX_SECTION = 512  # bytes: larger maps are decoded every time
_MAX_LEAD = 64  # bytes before the section (a header; delivery-annotations perhaps): longer ones are not kept


class AnnotationMemo:
    """The last message-annotations section seen on one link, and its decoded map (one per publisher link)."""

    __slots__ = (
        "hole_key",
        "_marker",
        "_prefix",
        "_suffix",
        "_hole",
        "_size",
        "_template",
        "_read",
        "_head",
        "_at",
        "_end",
        "_seq",
        "hits",
        "seq",
        "note",
    )

    def __init__(self, hole_key: str | None = None) -> None:
        self.hole_key = hole_key
        self._marker = b"\xa3" + bytes((len(hole_key),)) + hole_key.encode("ascii") + b"\x80" if hole_key else b""
        self._prefix = b""  # the section's bytes up to the hole (the whole section when there is no hole)
        self._suffix = b""  # after the hole
        self._hole = -1  # offset of the 8-byte hole from the section's start; -1: no hole
        self._size = 0
        self._template: dict[str, object] | None = None
        self._read: Any = None  # what scan read from the lead (None: recall_lead never hits)
        self._head = b""  # the lead and the section up to the hole (the whole section when there is no hole)
        self._at = -1  # offset of the hole from the message's start; -1: no hole
        self._end = 0  # the section's end from the message's start
        self._seq = 0  # the template's hole_key value when it has no hole (a plain int; 0 when not an int)
        self.hits = 0
        self.seq = 0  # the hole_key value of the last map recalled, as a plain int
        # What the memo's owner derived from the template's map (a recalled map differs from it at most in the
        # hole): None until the owner sets it, and again whenever the template changes.
        self.note: Any = None

    def recall_lead(self, raw: bytes) -> tuple[Any, dict[str, object], int] | None:
        """For a message that starts with the template's lead: what ``scan`` read from the lead, the decoded map
        of the section after it, and the section's end; else None."""
        read = self._read
        if read is None or not raw.startswith(self._head):  # the lead and the section up to the hole
            return None
        annotations = self._template.copy()  # type: ignore[union-attr]  # (_read is None without a template)
        at = self._at
        if at >= 0:
            if not raw.startswith(self._suffix, at + 8):
                return None
            self.seq = seq = _U64.unpack_from(raw, at)[0]
            annotations[self.hole_key] = ULong(seq)  # type: ignore[index]
        else:
            self.seq = self._seq
        self.hits += 1
        return read, annotations, self._end

    def recall(self, raw: bytes, start: int) -> tuple[dict[str, object], int] | None:
        """The decoded map of the section at ``start`` and its end, if it matches the template; else None."""
        template = self._template
        if template is None or not raw.startswith(self._prefix, start):
            return None
        hole = self._hole
        if hole < 0:
            self.seq = self._seq
            self.hits += 1
            return template.copy(), start + self._size
        at = start + hole
        if not raw.startswith(self._suffix, at + 8):
            return None
        annotations = template.copy()
        self.seq = seq = _U64.unpack_from(raw, at)[0]
        annotations[self.hole_key] = ULong(seq)  # type: ignore[index]
        self.hits += 1
        return annotations, start + self._size

    def learn(self, raw: bytes, start: int, end: int, annotations: dict[str, object], read: Any = None) -> None:
        """Make the section ``raw[start:end]``, which decoded to ``annotations``, the template (if it may be), and
        the bytes before it its lead, from which ``scan`` read ``read`` (an immutable value; None: no lead)."""
        self._template = self._read = self.note = None
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
        self._seq = int(seq) if isinstance(seq, int) else 0
        self._size = size
        self._prefix = section if hole < 0 else section[:hole]
        self._suffix = b"" if hole < 0 else section[hole + 8 :]
        self._template = dict(annotations)
        if start <= _MAX_LEAD:
            self._read = read
            self._head = raw[:start] + self._prefix
            self._at = start + hole if hole >= 0 else -1
            self._end = end
