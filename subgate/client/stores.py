"""Bookmark stores (seed 003): where a subscriber records what it received and discarded, to resume from.

Every store answers the same five calls, keyed by a subscription id (the subscription's ``name``, else its
address): ``log`` a received bookmark (False: drop the message, it is a duplicate), ``discard`` one when the
application is done with it, ``is_pending`` (received and not yet discarded), ``recovery_bookmark`` (the value to
resubscribe with) and ``set_start`` (a subscription started afresh at a given value).

- ``MemoryBookmarkStore`` keeps this in memory: a reconnect resumes exactly, a process restart does not.
- ``LoggedBookmarkStore`` also appends every record to a file, one ``write`` per record, and rebuilds itself from
  the file when opened. A process killed at any point leaves at most a partial last line, which is dropped: a
  received record lost that way only means the message comes again; a discard lost that way means the message
  comes again too (it was being discarded when the process died). Records reach the operating system before
  ``log``/``discard`` return, so a process crash loses nothing else; with ``fsync=True`` each record is also
  forced to disk (survives a machine crash, at the price of one fsync per record). The file compacts itself
  (rewritten to what is still needed, then renamed over the old one) when it holds ``compact_after`` records
  and four times more than are needed.

The recovery rule (AMPS's): resume after the last message before the earliest undiscarded one, skipping the
ones discarded after it; the server takes that as the list ``start,d1,d2,...`` (docs/bookmarks.md).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from subgate.client.bookmarks import SeqFilter, parse_bookmark, recovery_value

_quoted = json.encoder.encode_basestring_ascii  # a str as a JSON string (what json.dumps writes for it)


class _Record:
    """One subscription's position: where it started, what it received since (in order), and per publisher the
    highest seq of the discarded messages dropped from the head (``done``): a message of that publisher at or
    below it that is not pending was discarded. That catches what a durable subscription's server redelivers
    from before the start (its acknowledgements are persisted a moment after the discards)."""

    def __init__(self, start: str | None) -> None:
        self.start = start
        self.entries: dict[str, bool] = {}  # bookmark -> discarded, in the order received
        self.done: dict[str, int] = {}

    def is_done(self, bookmark: str) -> bool:
        state = self.entries.get(bookmark)
        if state is not None:
            return state
        if bookmark == self.start:
            return True
        parsed = parse_bookmark(bookmark)
        return parsed is not None and parsed[1] <= self.done.get(parsed[0], 0)

    def mark_done(self, bookmark: str) -> None:
        parsed = parse_bookmark(bookmark)
        if parsed is not None and parsed[1] > self.done.get(parsed[0], 0):
            self.done[parsed[0]] = parsed[1]

    def receive(self, bookmark: str) -> None:
        self.entries[bookmark] = self.entries.get(bookmark, False)

    def discard(self, bookmark: str) -> bool:
        if self.entries.get(bookmark) is not False:
            return False
        self.entries[bookmark] = True
        while self.entries:  # a discarded head becomes the start: the server resumes after it
            head = next(iter(self.entries))
            if not self.entries[head]:
                break
            del self.entries[head]
            self.start = head
            self.mark_done(head)
        return True

    def recovery(self) -> str | None:
        return recovery_value(self.start, list(self.entries.items()))


class BookmarkStore:
    """The interface every store answers, with the in-memory behaviour; subclasses add persistence."""

    filters_duplicates = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}
        self._filters: dict[str, SeqFilter] = {}

    @property
    def dropped(self) -> int:
        """Messages dropped as duplicates: already discarded, or out of order for their publisher."""
        return sum(f.dropped for f in self._filters.values())

    def _record(self, sub_id: str) -> _Record:
        return self._records.setdefault(sub_id, _Record(None))

    def log(self, sub_id: str, bookmark: str) -> bool:
        """Record ``bookmark`` as received; False when the message is to be dropped (a duplicate)."""
        with self._lock:
            record = self._record(sub_id)
            seq_filter = self._filters.setdefault(sub_id, SeqFilter())
            if record.is_done(bookmark):
                seq_filter.dropped += 1
                return False
            if self.filters_duplicates and not seq_filter.admit(bookmark):
                return False
            record.receive(bookmark)
            self._persist("R", sub_id, bookmark)
            return True

    def discard(self, sub_id: str, bookmark: str) -> None:
        """The application is done with the message of ``bookmark``: it must not come again."""
        with self._lock:
            if self._record(sub_id).discard(bookmark):
                self._persist("D", sub_id, bookmark)

    def is_pending(self, sub_id: str, bookmark: str) -> bool:
        """True when ``bookmark`` was received and not discarded."""
        with self._lock:
            return self._record(sub_id).entries.get(bookmark) is False

    def is_discarded(self, sub_id: str, bookmark: str) -> bool:
        """True when ``bookmark`` is known as discarded (or is the subscription's resume point)."""
        with self._lock:
            return self._record(sub_id).is_done(bookmark)

    def recovery_bookmark(self, sub_id: str) -> str | None:
        """The value to resubscribe with, or None when nothing is recorded for ``sub_id``."""
        with self._lock:
            record = self._records.get(sub_id)
            return record.recovery() if record is not None else None

    def set_start(self, sub_id: str, value: str) -> None:
        """Start ``sub_id`` afresh at ``value`` (an explicit bookmark given to subscribe)."""
        with self._lock:
            self._records[sub_id] = _Record(value)
            if sub_id in self._filters:
                self._filters[sub_id].reset()
            self._persist("S", sub_id, value)

    def close(self) -> None:
        """Release the store's resources; the in-memory store has none."""

    def _persist(self, kind: str, sub_id: str, value: str) -> None:
        """Write one record; the in-memory store keeps nothing outside the process."""


class MemoryBookmarkStore(BookmarkStore):
    """Bookmarks in memory: resumes exactly after a reconnect, not after the process ends."""


class LoggedBookmarkStore(BookmarkStore):
    """Bookmarks in memory and in an append-only file that a restarted process recovers from."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, compact_after: int = 10_000) -> None:
        super().__init__()
        self.path = Path(path)
        self.fsync = fsync
        self.compact_after = compact_after
        self._written = 0
        Path(f"{self.path}.compacting").unlink(missing_ok=True)  # a compaction the last process did not finish
        self._written = self._recover()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _recover(self) -> int:
        """Rebuild the records from the file; cut off a partial last line. Returns the records read."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return 0
        end = data.rfind(b"\n") + 1
        count = 0
        for line in data[:end].splitlines():
            kind, sub_id, value = json.loads(line)
            self._apply(kind, sub_id, value)
            count += 1
        if end < len(data):
            os.truncate(self.path, end)
        return count

    def _apply(self, kind: str, sub_id: str, value: str) -> None:
        if kind == "S":
            self._records[sub_id] = _Record(value)
        elif kind == "R":
            self._record(sub_id).receive(value)
        elif kind == "D":
            self._record(sub_id).discard(value)
        elif kind == "W":
            self._record(sub_id).mark_done(value)

    def _persist(self, kind: str, sub_id: str, value: str) -> None:
        # json.dumps([kind, sub_id, value]), the same text, without the general encoder's cost per call
        os.write(self._fd, f'["{kind}", {_quoted(sub_id)}, {_quoted(value)}]\n'.encode())
        if self.fsync:
            os.fsync(self._fd)
        self._written += 1
        if self._written >= self.compact_after and self._written > 4 * self._live():
            self._compact()

    def _live(self) -> int:
        return sum(1 + len(record.done) + 2 * len(record.entries) for record in self._records.values())

    def _lines(self) -> list[str]:
        lines = []
        for sub_id, record in self._records.items():
            if record.start is not None:
                lines.append(json.dumps(["S", sub_id, record.start]))
            for publisher, seq in record.done.items():
                lines.append(json.dumps(["W", sub_id, f"{publisher}|{seq}|"]))
            for bookmark, discarded in record.entries.items():
                lines.append(json.dumps(["R", sub_id, bookmark]))
                if discarded:
                    lines.append(json.dumps(["D", sub_id, bookmark]))
        return lines

    def _compact(self) -> None:
        """Rewrite the file to what recovery needs; the rename makes the switch atomic."""
        lines = self._lines()
        temporary = Path(f"{self.path}.compacting")
        with open(temporary, "w") as out:
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._written = len(lines)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
