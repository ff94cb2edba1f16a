"""A durable queue's page window: which of its journaled messages are in the journal only, and asking for them.

Owns the paging state of one queue (docs/architecture.md, "Paging"): the range of sequences that may be in the
journal and not in memory (``after`` < seq <= ``upto``), how many messages that is (an estimate after a restart),
whether a page read is in flight, the highest journaled sequence taken into memory, and the callbacks that read a
page for the queue (``on_page``) or for one of its browsers (``on_browse``). ``engine.nodes.Queue`` decides when
to ask; this class keeps the books. No proton, no store; reactor thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from subgate.engine.messages import ALL, Message

if TYPE_CHECKING:
    from subgate.engine.nodes import Queue
    from subgate.engine.waiting import Waiting


def overtakes(message: Message, waiting: Waiting) -> bool:
    """Is ``message``'s priority above every priority waiting in memory (so it goes before all of them)?"""
    lanes = waiting.lanes
    return bool(lanes) and min(message.priority, 9) > min(lanes)


class PageWindow:
    """The page window of one queue (see the module docstring). ``limit`` 0: everything stays in memory."""

    __slots__ = (
        "limit", "on_page", "on_browse", "after", "upto", "count", "pending", "last_journaled", "kept", "_changed",
    )  # fmt: skip

    def __init__(self, changed: Callable[[bool], None]) -> None:
        self.limit = 0
        self.on_page: Callable[[Queue, int, int, int], None] | None = None  # (queue, after, upto, limit)
        # A browser's page read: (browser, after, upto, limit); the answer goes to the browser, not to the queue.
        self.on_browse: Callable[[Any, int, int, int], None] | None = None
        self.after = -1  # -1: not paging
        self.upto = 0
        self.count = 0  # messages only in the journal (an estimate after a restart)
        self.pending = False  # a page read is in flight
        self.last_journaled = 0  # highest journaled sequence taken into memory (not counting ``kept``)
        # Journaled messages above ``after`` held in memory anyway: their priority is above every priority in
        # memory, so they must not wait behind the paged ones. A page read that returns one skips it.
        self.kept: set[int] = set()
        self._changed = changed  # told when the queue starts (True) and stops (False) paging

    @property
    def paging(self) -> bool:
        return self.after >= 0

    def horizon(self) -> int:
        """Every available message up to this sequence is in memory (all of them when not paging)."""
        return self.after if self.after >= 0 else ALL

    def leaves_out(self, message: Message, waiting: Waiting) -> bool:
        """True if a journaled message stays in the journal only: the queue is paging and it is newer than every
        message in memory, or the queue holds ``limit`` available messages and it is newer than every journaled
        message in memory. Unless its priority is above every priority waiting in memory (``overtakes``): then it
        stays in memory (up to ``limit`` such messages more), so priority also orders what is paged out.

        A straggler (a transaction's message gets its sequence when sent and arrives at the commit, after later
        ones) inside the paged range stays in the journal too, so it keeps its place: its row was committed
        before it got here, and a page read that could have missed it was answered before (the writer commits
        and answers in order), so a later read returns it."""
        seq = message.seq
        if self.after >= 0:
            if seq <= self.after:
                return False  # older than everything paged out: its place is in memory
            if len(self.kept) < self.limit and overtakes(message, waiting):
                self.kept.add(seq)
                return False
            if seq > self.upto:
                self.upto = seq
            self.count += 1
            return True
        if seq > self.last_journaled and len(waiting) >= self.limit:
            if len(waiting) < 2 * self.limit and overtakes(message, waiting):
                return False
            self.start(seq - 1, seq, 1)
            return True
        return False

    def start(self, after: int, upto: int, count: int) -> None:
        was_paging = self.after >= 0
        self.after, self.upto, self.count = after, upto, count
        if not was_paging:
            self._changed(True)

    def stop(self) -> None:
        was_paging = self.after >= 0
        self.after, self.upto, self.count = -1, 0, 0
        self.kept.clear()  # a window that starts again starts above every one of them
        if was_paging:
            self._changed(False)

    def recover(self, after: int, upto: int, count: int) -> bool:
        """Recovery left journaled messages above ``after`` up to ``upto`` (about ``count``) unloaded."""
        if upto <= after:
            return False
        self.start(max(after, self.last_journaled), upto, count)
        return True

    def answered(self, after: int) -> bool:
        """A page read came back; False when it is stale (the queue was purged, or the answer was applied)."""
        self.pending = False
        return self.after == after

    def failed(self) -> None:
        """The page read in flight failed: the next request asks again."""
        self.pending = False

    def advance(self, loaded: int, reached: int) -> None:
        """``loaded`` messages of a page came into memory; the read went as far as ``reached``."""
        self.count = max(0, self.count - loaded)
        if reached >= self.upto:
            self.stop()
        else:
            self.after = reached
            if self.kept:
                self.kept = {seq for seq in self.kept if seq > reached}

    def request(self, queue: Queue) -> None:
        """Ask for the next page of ``queue`` unless one is in flight."""
        if self.pending or self.on_page is None or self.after < 0:
            return
        self.pending = True
        self.on_page(queue, self.after, self.upto, max(self.limit // 2, 1))

    def read_for(self, browser: Any, after: int, upto: int, limit: int) -> bool:
        """Ask for a browser's page of journal-only messages above ``after`` (``on_browse``); False when the
        queue has no journal to read."""
        if self.on_browse is None:
            return False
        self.on_browse(browser, after, upto, limit)
        return True
