"""A publisher's identity kept in a small local file: its id, and how far its seqs are reserved.

The server drops a message whose seq is not above its publisher's high-water mark (docs/bookmarks.md), so a
publisher that restarts under the same id must number its *new* messages above everything it sent before,
confirmed or not. The file says up to where seqs may have been used: before a seq at or past that mark is
used, the mark is moved ``block`` seqs further and the file is replaced (written, fsynced, renamed). A restart
continues at the mark, so a crash costs at most a gap in the numbering, which the server accepts.

Format: the id on the first line, ``next-seq N`` on the second. One publisher per file at a time.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

BLOCK = 10_000


class PublisherIdFile:
    """The id and the reserved seqs of one publisher, in ``path`` (created with a new id the first time)."""

    def __init__(self, path: str | os.PathLike[str], block: int = BLOCK) -> None:
        self.path = Path(path)
        self.block = block
        lines = self.path.read_text().split("\n") if self.path.exists() else []
        self.publisher_id = lines[0].strip() if lines and lines[0].strip() else f"pub-{uuid.uuid4().hex}"
        reserved = lines[1].split() if len(lines) > 1 else []
        self.reserved = int(reserved[1]) if len(reserved) == 2 and reserved[1].isdigit() else 1
        if not lines:
            self._write(self.reserved)

    @property
    def next_seq(self) -> int:
        """Where a restarted publisher continues: no seq at or above it was used."""
        return self.reserved

    def cover(self, upto: int) -> None:
        """Make sure seqs below ``upto`` are reserved (in the file) before they are used."""
        if upto > self.reserved:
            self._write(upto + self.block)

    def _write(self, reserved: int) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w") as out:
            out.write(f"{self.publisher_id}\nnext-seq {reserved}\n")
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(self.path)
        self.reserved = reserved
