"""``RingBookmarkStore``: a fixed-size file holding one resume value per subscription (seed 003).

Faster than the logged store and it never grows, but it does not filter: it keeps only the last discarded
bookmark of each subscription, so it suits applications that discard in the order they receive. A message
received and not discarded when the process dies comes again; one discarded out of order may come again too.

Layout: ``slots`` slots of two 512-byte entries each. An entry is ``counter (u64), length (u32), crc32 (u32)``
then ``[sub_id, value]`` as JSON. A write goes to the slot's older entry, so a write torn by a crash leaves the
newer one intact; on open the valid entry with the higher counter wins.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

from subgate.client.stores import BookmarkStore

_ENTRY = 512
_HEADER = struct.Struct("<QII")


class RingBookmarkStore(BookmarkStore):
    """The last discarded bookmark of each subscription, in a fixed-size file (no duplicate filtering)."""

    filters_duplicates = False

    def __init__(self, path: str | os.PathLike[str], *, slots: int = 64, fsync: bool = False) -> None:
        super().__init__()
        self.path = Path(path)
        self.slots = slots
        self.fsync = fsync
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size < slots * 2 * _ENTRY:
            os.ftruncate(self._fd, slots * 2 * _ENTRY)
        self._where: dict[str, tuple[int, int]] = {}  # sub_id -> (slot, counter of its newest entry)
        self._values: dict[str, str] = {}
        self._load()

    def _read_entry(self, slot: int, half: int) -> tuple[int, str, str] | None:
        raw = os.pread(self._fd, _ENTRY, (slot * 2 + half) * _ENTRY)
        counter, length, crc = _HEADER.unpack_from(raw)
        payload = raw[_HEADER.size : _HEADER.size + length]
        if counter == 0 or length > _ENTRY - _HEADER.size or zlib.crc32(payload) != crc:
            return None
        sub_id, value = json.loads(payload)
        return counter, sub_id, value

    def _load(self) -> None:
        for slot in range(self.slots):
            entries = [e for e in (self._read_entry(slot, 0), self._read_entry(slot, 1)) if e is not None]
            if entries:
                counter, sub_id, value = max(entries)
                self._where[sub_id] = (slot, counter)
                self._values[sub_id] = value

    def _write(self, sub_id: str, value: str) -> None:
        slot, counter = self._where.get(sub_id, (len(self._where), 0))
        if slot >= self.slots:
            raise ValueError(f"the ring store {self.path} has no free slot for subscription {sub_id!r}")
        payload = json.dumps([sub_id, value]).encode()
        if len(payload) > _ENTRY - _HEADER.size:
            raise ValueError(f"bookmark too long for the ring store: {value!r}")
        counter += 1
        entry = _HEADER.pack(counter, len(payload), zlib.crc32(payload)) + payload
        os.pwrite(self._fd, entry.ljust(_ENTRY, b"\0"), (slot * 2 + counter % 2) * _ENTRY)
        if self.fsync:
            os.fsync(self._fd)
        self._where[sub_id] = (slot, counter)
        self._values[sub_id] = value

    def log(self, sub_id: str, bookmark: str) -> bool:
        return True

    def discard(self, sub_id: str, bookmark: str) -> None:
        with self._lock:
            self._write(sub_id, bookmark)

    def is_pending(self, sub_id: str, bookmark: str) -> bool:
        return False

    def is_discarded(self, sub_id: str, bookmark: str) -> bool:
        with self._lock:
            return self._values.get(sub_id) == bookmark

    def recovery_bookmark(self, sub_id: str) -> str | None:
        with self._lock:
            return self._values.get(sub_id)

    def set_start(self, sub_id: str, value: str) -> None:
        with self._lock:
            self._write(sub_id, value)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
