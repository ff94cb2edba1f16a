"""A queue browser's walk (a JMS QueueBrowser: source distribution-mode ``copy``): every available message of the
queue once, in queue order, including those a paging queue left in the journal.

Owns one browser's position and the journal page read for it. A paging ``Queue`` keeps every available message up
to its ``horizon()`` in memory; the journal-only ones above it (up to ``paged_upto``) are read for the browser,
a page at a time and only as its credit allows, through the queue's ``on_browse`` hook (the gateway runs the
read on the journal writer thread, like the queue's own page reads, and hands the rows back to ``page_loaded``).
The walk merges memory and the page by sequence, so a message the queue paged in meanwhile is shown once. Nothing
here changes the queue: no acknowledgement, no paging state, no consumer sees a difference.

Browsing is not a snapshot (as in Artemis): a message consumed between the read and the copy may still be shown,
and a message that arrives behind the browser's position is not. A message is never shown twice: the position
(``browsed``) only moves forward. Pure: imports nothing from proton or the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from subgate.engine import nodes
from subgate.engine.nodes import ALL, Message, Queue


class Browser:
    """One browser of one queue. ``accepts`` is the browser's own filter (its JMS selector); the queue's journal
    rows come already filtered as the queue's own page reads filter them (a subscription's selector, no-local)."""

    __slots__ = ("queue", "accepts", "browsed", "reading", "failed", "closed", "on_rows", "_rows", "_covered")

    def __init__(self, queue: Queue, accepts: Callable[[Message], bool] | None = None) -> None:
        self.queue = queue
        self.accepts = accepts
        self.browsed = 0  # the highest sequence walked past (shown, or not for this browser)
        self.reading = False  # a page read for this browser is on its way
        self.failed = False  # a page read failed: the walk cannot go on
        self.closed = False
        self.on_rows: Callable[[], None] | None = None  # the gateway's continuation when a read is answered
        self._rows: deque[Message] = deque()  # the last page read for this browser, above ``browsed``
        self._covered = 0  # every journal-only message up to here is in ``_rows``, in memory, or walked past

    def take(self, credit: int) -> list[Message]:
        """Up to ``credit`` messages to show next, in order. When memory and the page read so far hold nothing
        more and the queue still has journal-only messages above them, asks for the next page (``reading``):
        the caller waits for ``on_rows`` before it calls this again for the rest."""
        if self.failed or self.closed:
            return []
        queue = self.queue
        known = self._known()  # every available message up to here is in memory or in _rows
        memory = queue.waiting.above(self.browsed)
        rows = self._rows
        taken: list[Message] = []
        now = 0
        i = 0
        while len(taken) < credit:
            browsed = self.browsed
            while i < len(memory) and memory[i].seq <= browsed:
                i += 1
            while rows and rows[0].seq <= browsed:
                rows.popleft()
            candidate = memory[i] if i < len(memory) else None
            if rows and (candidate is None or rows[0].seq < candidate.seq):
                candidate = rows[0]
            if candidate is None or candidate.seq > known:
                self._read_next(known, credit - len(taken))
                break
            self.browsed = candidate.seq
            if candidate.expires or candidate.deliver_at:
                now = now or nodes.now_ms()
                if 0 < candidate.expires <= now or candidate.deliver_at > now:
                    continue  # expired, or held until later: not available
            if self.accepts is None or self.accepts(candidate):
                taken.append(candidate)
        return taken

    def _known(self) -> int:
        queue = self.queue
        horizon = queue.pages.horizon()
        if horizon == ALL or self._covered >= queue.pages.upto:
            return ALL  # nothing (more) is in the journal only: memory has the rest
        return max(horizon, self._covered)

    def _read_next(self, known: int, credit: int) -> None:
        queue = self.queue
        upto = queue.pages.upto
        if self.reading or known >= upto:
            return
        limit = max(1, min(credit, queue.pages.limit // 2))
        self.reading = queue.pages.read_for(self, max(known, self.browsed), upto, limit)

    def page_loaded(self, rows: list[Message], reached: int) -> None:
        """The answer to a read: the queue's journal rows (filtered as the queue filters them) above the read's
        ``after`` up to ``reached``, in order. A page for a closed browser is dropped."""
        self.reading = False
        if self.closed:
            return
        self._rows = deque(m for m in rows if m.seq > self.browsed)
        self._covered = max(self._covered, reached)
        if self.on_rows is not None:
            self.on_rows()

    def page_failed(self) -> None:
        """The read failed (the store is unusable): the walk ends; the gateway closes the link."""
        self.reading = False
        if self.closed:
            return
        self.failed = True
        if self.on_rows is not None:
            self.on_rows()

    def close(self) -> None:
        """The browser's link ended: nothing more is read, a late answer is dropped."""
        self.closed = True
        self.on_rows = None
        self._rows = deque()
