"""Paging durable queues from the journal (reactor side): recovery of the first page, reads of the next ones.

Owns the link between a durable ``Queue`` (which decides when it pages: ``engine.nodes``) and the journal: a
page read goes to the journal writer thread (``JournalWriter.submit_page``), which runs it after everything
submitted before it is committed and hands the rows back through the container's ``EventInjector`` like a
commit. The reactor thread never waits on the store. Rows become ``Message`` objects here, filtered as the
queue's topic would have filtered them when they were published (JMS selector, no-local). A browser's page
(``engine.browsing``) is the same read, answered to the browser instead of the queue.

Why paging and why reads go through the writer: docs/architecture.md, "Paging".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from subgate.engine import codec
from subgate.engine.browsing import Browser
from subgate.engine.nodes import Message, Queue
from subgate.engine.records import PageRead, StoredMessage

log = logging.getLogger("subgate.paging")

RowFilter = Callable[[StoredMessage], bool]
REPLAY_PAGE = 2000  # messages a replaying queue keeps in memory when paging is otherwise off (--page-messages 0)


def restored(stored: StoredMessage) -> Message:
    """A journal row as a routed message (the bytes as stored, bookmark included)."""
    env = codec.scan(stored.payload)
    return Message(
        stored.id,
        stored.payload,
        header_count=env.delivery_count,
        durable=env.durable,
        priority=env.priority,
        expires=stored.expires_ms or 0,
        deliver_at=stored.deliver_ms or 0,
        journaled=True,
        group=env.group_id,
        group_seq=env.group_sequence,
    )


def row_filter(
    no_local_id: str | None, matcher: Callable[[bytes], bool] | None, skip: frozenset[int] = frozenset()
) -> RowFilter | None:
    """What a subscription takes from its topic's journal rows: not its own ClientID's messages when no-local
    (the publisher id is ``<container-id>/<link name>``), what its JMS selector matches, and none of the rows a
    replay skips (the later bookmarks of a list: ``mapping.bookmarks``)."""
    if no_local_id is None and matcher is None and not skip:
        return None
    own = f"{no_local_id}/" if no_local_id is not None else None

    def accepts(stored: StoredMessage) -> bool:
        if stored.id in skip:
            return False
        if own is not None and (stored.publisher_id or "").startswith(own):
            return False
        return matcher is None or matcher(stored.payload)

    return accepts


def _reached(read: PageRead, rows: list[StoredMessage]) -> int:
    """How far a page read got: a short answer read the whole range; a full one stopped at its last row."""
    return read.upto if len(rows) < read.limit else rows[-1].id


class _PageToken:
    """Comes back from the writer with the rows of one read (or the error)."""

    __slots__ = ("pager", "queue", "read", "accepts")

    def __init__(self, pager: Pager, queue: Queue, read: PageRead, accepts: RowFilter | None) -> None:
        self.pager = pager
        self.queue = queue
        self.read = read
        self.accepts = accepts

    def __call__(self, outcome: list[StoredMessage] | BaseException | None) -> None:
        queue, read = self.queue, self.read
        if not isinstance(outcome, list):
            log.warning("page read of %r failed: %s", queue.name, outcome)
            queue.pages.failed()  # the next dispatch asks again
            return
        reached = _reached(read, outcome)
        accepts = self.accepts
        rows = [(restored(s), s.failures) for s in outcome if accepts is None or accepts(s)]
        self.pager.pages += 1
        queue.page_loaded(rows, read.after, reached)


class _BrowseToken:
    """Comes back from the writer with the rows of one read for a browser (or the error)."""

    __slots__ = ("browser", "read", "accepts")

    def __init__(self, browser: Browser, read: PageRead, accepts: RowFilter | None) -> None:
        self.browser = browser
        self.read = read
        self.accepts = accepts

    def __call__(self, outcome: list[StoredMessage] | BaseException | None) -> None:
        browser, read = self.browser, self.read
        if not isinstance(outcome, list):
            log.warning("browse page read of %r failed: %s", browser.queue.name, outcome)
            browser.page_failed()
            return
        if browser.closed:
            browser.page_loaded([], read.after)  # the link is gone: drop the page
            return
        reached = _reached(read, outcome)
        accepts = self.accepts
        browser.page_loaded([restored(s) for s in outcome if accepts is None or accepts(s)], reached)


class Pager:
    """Attaches durable queues to the journal: ``attach`` at creation, ``recover`` at start-up."""

    def __init__(self, writer: Any, page_messages: int, non_durable_after: int = 0) -> None:
        self._writer = writer
        self.page_messages = page_messages
        # Journal rows with durable = false (non-persistent messages) count only above this id: those of earlier
        # runs did not survive the restart.
        self.non_durable_after = non_durable_after
        self.pages = 0

    def attach(
        self,
        queue: Queue,
        cursor_id: int,
        address: str,
        accepts: RowFilter | None = None,
        *,
        replaying: bool = False,
        prefix: bool = False,
    ) -> None:
        """From now on ``queue`` keeps at most about ``page_messages`` messages in memory. A queue that replays
        (``cursor_id`` 0 when it has no cursor: no acks to leave out) pages even when paging is off, by
        ``REPLAY_PAGE``: a replay of any length is read in pages. With ``prefix``, ``address`` is a topic path
        prefix (a topic selector's replay: ``accepts`` keeps the rows of the topics it selects)."""
        limit = self.page_messages if self.page_messages > 0 else (REPLAY_PAGE if replaying else 0)
        if limit <= 0:
            return

        def on_page(q: Queue, after: int, upto: int, limit: int) -> None:
            read = PageRead(cursor_id, address, after, upto, limit, self.non_durable_after, prefix)
            self._writer.submit_page(read, _PageToken(self, q, read, accepts))

        def on_browse(browser: Browser, after: int, upto: int, limit: int) -> None:
            read = PageRead(cursor_id, address, after, upto, limit, self.non_durable_after, prefix)
            self._writer.submit_page(read, _BrowseToken(browser, read, accepts))

        queue.use_journal_pages(limit, on_page, on_browse)

    def recover(
        self,
        session: Any,
        queue: Queue,
        cursor: Any,
        upto: int,
        accepts: RowFilter | None = None,
        *,
        prefix: bool = False,
    ) -> tuple[int, int]:
        """Start-up: load the first page of a durable queue's backlog (the rest stays in the journal until its
        consumers get there); with ``prefix``, of every topic under the cursor's address (a topic selector's
        subscription). Returns (messages loaded, messages left in the journal)."""
        from subgate.storage.catalog import backlog, backlog_count  # storage reads belong to start-up only

        limit = self.page_messages if self.page_messages > 0 else None
        loaded = 0
        last = cursor.low_water
        for stored in backlog(session, cursor, non_durable_after=self.non_durable_after, prefix=prefix):
            if limit is not None and loaded >= limit:
                break
            last = stored.id
            if accepts is None or accepts(stored):
                queue.push(restored(stored), stored.failures)
                loaded += 1
        else:
            return loaded, 0
        left = backlog_count(session, cursor, last, upto, self.non_durable_after, prefix)
        queue.page_from(last, upto, left)
        return loaded, left
