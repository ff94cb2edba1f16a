"""Queues and topics in memory: ordering, competing consumers, fan-out, redelivery, expiry and delay.

Owns the per-node message state and the dispatch loop. It imports nothing from proton or the store: consumers
are any object with the ``Consumer`` shape (the gateway's outbound links), and durable queues report removals
and failed deliveries to a ``Cursor`` (the gateway wires that to the journal writer). Everything here runs on
the reactor thread.

A ``Message`` is immutable and shared by every queue it was routed to (fan-out costs no copies); per-queue state
(failed-delivery counts, consumers that declined it) lives in the queue, keyed by sequence, and only for the
few messages that have any.

Paging: a durable queue with ``page_limit`` set keeps at most about that many available messages in memory. A
journaled message that arrives when the queue is full is not kept (the journal has it): the queue only remembers
the range of sequences that may be in the journal and not in memory (``_paged_after`` < seq <= ``_paged_upto``)
and, once its consumers have taken it down to half the limit, asks for the next page through ``on_page``. The
gateway reads the page on the journal thread and hands the rows back to ``page_loaded``. Every available message
up to ``horizon()`` is in memory; a browser (``engine.browsing``) reads what lies beyond through ``on_browse``,
without changing any of this. Why and the ordering argument: docs/architecture.md, "Paging".

Memory limit: a queue counts the messages it holds that are not in the journal (they cannot page) and their
bytes, from ``_take`` to ``_discard``; ``admits`` answers whether one more may come (the rule and the policy:
``engine.memory``), and under the policy ``block`` the queue is ``blocked`` from the limit until it drains to
the low-water mark, when ``on_unblocked`` tells the gateway to give its publishers credit again.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from subgate.engine.memory import NO_LIMIT, UNLIMITED, Answer, MemoryLimit, Sender, answer
from subgate.engine.messages import ALL, Consumer, Cursor, Message, now_ms
from subgate.mapping.outcomes import Settlement


def _seq(message: Message) -> int:
    return message.seq


class Queue:
    """A point-to-point node, or one topic subscription's private queue.

    Available messages are the merge, by sequence, of ``_ready`` (arrival order) and ``_returned`` (released
    messages going back to their original place). Messages held until their delivery time wait in
    ``_scheduled``.
    """

    kind = "queue"

    def __init__(self, name: str, *, durable: bool = True, cursor: Cursor | None = None) -> None:
        self.name = name
        self.durable = durable
        self.cursor = cursor
        self.consumers: list[Consumer] = []
        self._ready: deque[Message] = deque()
        self._ready_unordered = False  # a lower sequence arrived after a higher one (see push)
        self._returned: list[tuple[int, Message]] = []
        self._scheduled: list[tuple[int, int, Message]] = []
        self._failures: dict[int, int] = {}
        self._declined: dict[int, set[int]] = {}
        self._outstanding: dict[int, Message] = {}  # delivered, not settled yet
        self._rr = 0
        self.on_schedule: Callable[[int], None] | None = None  # asks the gateway for a timer at that ms
        self.expired_count = 0
        self.dead_count = 0
        # Paging (see the module docstring). page_limit 0: everything stays in memory.
        self.page_limit = 0
        self.on_page: Callable[[Queue, int, int, int], None] | None = None  # (queue, after, upto, limit)
        # A browser's page read: (browser, after, upto, limit); the answer goes to the browser, not to the queue.
        self.on_browse: Callable[[Any, int, int, int], None] | None = None
        self.on_paging: Callable[[bool], None] | None = None  # told when the queue starts (True) and stops paging
        self._paged_after = -1  # -1: not paging
        self._paged_upto = 0
        self._paged_count = 0  # messages only in the journal (an estimate after a restart)
        self._page_pending = False
        self._last_journaled = 0  # highest journaled sequence taken into memory
        # Memory limit (see the module docstring): messages held that are not in the journal, and their bytes.
        self.memory = NO_LIMIT
        self._memory_count = 0
        self._memory_bytes = 0
        self._full_count = self._full_bytes = self._resume_count = self._resume_bytes = UNLIMITED
        self.blocked = False  # publisher links get no credit (policy block, from the limit to the low-water mark)
        self.on_unblocked: Callable[[Queue], None] | None = None
        self.dropped_count = 0  # topic copies not taken because the queue was full

    def limit_memory(self, limit: MemoryLimit) -> None:
        """Set the limit on messages held in memory only (engine.memory)."""
        self.memory = limit
        self._full_count, self._full_bytes = limit.full_at()
        self._resume_count, self._resume_bytes = limit.resume_at()

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Messages held: available (in memory or paged out to the journal), scheduled and delivered-but-unsettled."""
        held = len(self._ready) + len(self._returned) + len(self._scheduled) + len(self._outstanding)
        return held + self._paged_count

    @property
    def paging(self) -> bool:
        """Some of this queue's messages are in the journal only."""
        return self._paged_after >= 0

    @property
    def available(self) -> int:
        return len(self._ready) + len(self._returned)

    @property
    def paged_upto(self) -> int:
        """The highest sequence that may be in the journal only (0 when not paging)."""
        return self._paged_upto

    @property
    def memory_held(self) -> tuple[int, int]:
        """(messages, bytes) this queue holds that are not in the journal: what its memory limit counts."""
        return self._memory_count, self._memory_bytes

    def admits(self, sender: Sender) -> Answer:
        """May one more message that is not in the journal come from ``sender`` (engine.memory)? Below the
        limit this is two compares."""
        if self._memory_count < self._full_count and self._memory_bytes < self._full_bytes:
            return Answer.TAKE
        return answer(self.memory, sender, self._memory_count, self._memory_bytes)

    def offer(self, message: Message) -> bool:
        """A topic's copy: pushed, or dropped (and counted) when it is not in the journal and the queue is full."""
        if not message.journaled and self.admits(Sender.FANOUT) is not Answer.TAKE:
            self.dropped_count += 1
            return False
        self.push(message)
        return True

    def horizon(self) -> int:
        """Every available message up to this sequence is in memory (all of them when not paging)."""
        return self._paged_after if self._paged_after >= 0 else ALL

    def low_water(self) -> int:
        """The highest sequence below every message this queue still holds (for the journal cursor)."""
        candidates = [m.seq for m in self._outstanding.values()]
        if self._ready:
            ready = self._ready
            candidates.append(min(m.seq for m in ready) if self._ready_unordered else ready[0].seq)
        if self._returned:
            candidates.append(self._returned[0][0])
        candidates.extend(seq for _, seq, _ in self._scheduled)
        if self._paged_after >= 0:
            candidates.append(self._paged_after + 1)
        return min(candidates) - 1 if candidates else -1

    # -- input ---------------------------------------------------------------------------------------------
    def push(self, message: Message, failures: int = 0) -> None:
        """Enqueue a new (or recovered) message and dispatch; a journaled one may be left to the journal (paging)."""
        if message.journaled and self.page_limit and self._page_out(message):
            return
        self._take(message, failures)
        if self.consumers:
            self.dispatch()

    def _page_out(self, message: Message) -> bool:
        """True if the message stays in the journal only: the queue is paging and it is newer than every message
        in memory, or the queue is full and it is newer than every journaled message in memory.

        A straggler (a transaction's message gets its sequence when sent and arrives at the commit, after later
        ones) inside the paged range stays in the journal too, so it keeps its place: its row was committed
        before it got here, and a page read that could have missed it was answered before (the writer commits
        and answers in order), so a later read returns it."""
        seq = message.seq
        if self._paged_after >= 0:
            if seq <= self._paged_after:
                return False  # older than everything paged out: its place is in memory
            if seq > self._paged_upto:
                self._paged_upto = seq
            self._paged_count += 1
            return True
        if seq > self._last_journaled and len(self._ready) + len(self._returned) >= self.page_limit:
            self._start_paging(seq - 1, seq, 1)
            return True
        return False

    def _start_paging(self, after: int, upto: int, count: int) -> None:
        was_paging = self._paged_after >= 0
        self._paged_after = after
        self._paged_upto = upto
        self._paged_count = count
        if not was_paging and self.on_paging is not None:
            self.on_paging(True)

    def page_from(self, after: int, upto: int, count: int) -> None:
        """Recovery: journaled messages above ``after`` up to ``upto`` (about ``count``) were not loaded."""
        if upto > after:
            self._start_paging(max(after, self._last_journaled), upto, count)
            self._request_page()

    def page_loaded(self, rows: list[tuple[Message, int]], after: int, reached: int) -> None:
        """The answer to ``on_page``: the messages (with failure counts), in order, of this queue's journal rows
        above ``after`` up to ``reached`` (the read went that far; rows it filtered out are not here)."""
        self._page_pending = False
        if self._paged_after != after:
            return  # purged meanwhile, or an answer already applied: stale
        for message, failures in rows:
            self._take(message, failures)
        self._paged_count = max(0, self._paged_count - len(rows))
        if reached >= self._paged_upto:
            self._stop_paging()
        else:
            self._paged_after = reached
        if self.consumers:
            self.dispatch()

    def _stop_paging(self) -> None:
        was_paging = self._paged_after >= 0
        self._paged_after = -1
        self._paged_upto = 0
        self._paged_count = 0
        if was_paging and self.on_paging is not None:
            self.on_paging(False)

    def page_failed(self) -> None:
        """The page read failed; the next dispatch asks again."""
        self._page_pending = False

    def _request_page(self) -> None:
        if self._page_pending or self.on_page is None or self._paged_after < 0:
            return
        self._page_pending = True
        self.on_page(self, self._paged_after, self._paged_upto, max(self.page_limit // 2, 1))

    def _take(self, message: Message, failures: int) -> None:
        if message.journaled:
            if message.seq > self._last_journaled:
                self._last_journaled = message.seq
        else:
            self._memory_count += 1
            self._memory_bytes += len(message.raw)
            if self._memory_count >= self._full_count or self._memory_bytes >= self._full_bytes:
                self.blocked = self.memory.blocks
        if failures:
            self._failures[message.seq] = failures
        if message.deliver_at and message.deliver_at > now_ms():
            heapq.heappush(self._scheduled, (message.deliver_at, message.seq, message))
            if self.on_schedule is not None:
                self.on_schedule(message.deliver_at)
            return
        ready = self._ready
        if ready and message.seq < ready[-1].seq:
            # A journaled message is routed when its commit completes, so it can arrive behind a later,
            # non-journaled one: ``_ready`` is then no longer sorted and low_water() must look at all of it.
            self._ready_unordered = True
        ready.append(message)

    def next_due(self) -> int | None:
        """When the earliest held (delayed) message becomes deliverable, if any."""
        return self._scheduled[0][0] if self._scheduled else None

    def release_scheduled(self, now: int | None = None) -> int | None:
        """Make due scheduled messages available; returns the next due time, if any."""
        now = now_ms() if now is None else now
        moved = False
        while self._scheduled and self._scheduled[0][0] <= now:
            _, seq, message = heapq.heappop(self._scheduled)
            heapq.heappush(self._returned, (seq, message))
            moved = True
        if moved:
            self.dispatch()
        return self._scheduled[0][0] if self._scheduled else None

    # -- consumers -----------------------------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        # Exclusions are by id(): once the consumer is gone its id may be reused by a new one.
        for declined in self._declined.values():
            declined.discard(id(consumer))

    def _peek(self) -> Message | None:
        ready, returned = self._ready, self._returned
        if returned and (not ready or returned[0][0] < ready[0].seq):
            return returned[0][1]
        return ready[0] if ready else None

    def _pop(self, message: Message) -> None:
        returned = self._returned
        if returned and returned[0][1] is message:
            heapq.heappop(returned)
        else:
            self._ready.popleft()
            if not self._ready:
                self._ready_unordered = False

    def dispatch(self) -> None:
        """Give available messages to consumers with credit, round robin, in queue order."""
        consumers = self.consumers
        count = len(consumers)
        if not count:
            return
        now = 0
        idle = 0
        declined = False  # a consumer with credit did not want the current message
        skipped: list[Message] | None = None
        while True:
            message = self._peek()
            if message is None:
                break
            if message.expires:
                now = now or now_ms()
                if message.expires <= now:
                    self._pop(message)
                    self._expire(message)
                    continue
            if idle >= count:
                if not declined:
                    break  # no consumer has credit
                # Every consumer with credit declined it (undeliverable-here, filter): it keeps its place for
                # others, and the messages behind it go on (a JMS consumer must not be stalled by one it refused).
                self._pop(message)
                if skipped is None:
                    skipped = []
                skipped.append(message)
                idle = 0
                declined = False
                continue
            consumer = consumers[self._rr % count]
            self._rr += 1
            if consumer.credit <= 0:
                idle += 1
                continue
            if not self._wants(consumer, message):
                idle += 1
                declined = True
                continue
            self._pop(message)
            self._outstanding[message.seq] = message
            consumer.deliver(message, self._failures.get(message.seq, 0))
            idle = 0
            declined = False
        if skipped is not None:
            for message in skipped:
                heapq.heappush(self._returned, (message.seq, message))
        if self._paged_after >= 0 and len(self._ready) + len(self._returned) <= self.page_limit // 2:
            self._request_page()

    def _wants(self, consumer: Consumer, message: Message) -> bool:
        declined = self._declined.get(message.seq)
        if declined is not None and id(consumer) in declined:
            return False
        return consumer.accepts(message)

    def browsable(self, after: int) -> list[Message]:
        """Browse: the available messages in memory above sequence ``after``, in queue order (nothing is
        removed)."""
        found = [m for m in self._ready if m.seq > after]
        found.extend(m for seq, m in self._returned if seq > after)
        found.sort(key=_seq)
        return found

    def read_for(self, browser: Any, after: int, upto: int, limit: int) -> bool:
        """Ask for a browser's page of this queue's journal-only messages above ``after`` (``on_browse``); False
        when the queue has no journal to read."""
        if self.on_browse is None:
            return False
        self.on_browse(browser, after, upto, limit)
        return True

    # -- settlement ----------------------------------------------------------------------------------------
    def settle(
        self, message: Message, settlement: Settlement, consumer: Consumer | None, *, recorded: bool = False
    ) -> None:
        """Apply a consumer's outcome (mapping.outcomes) to a delivered message. ``recorded``: the removal is
        already in the journal (a committed transaction wrote it), so the cursor is not told again."""
        self._outstanding.pop(message.seq, None)
        if settlement.remove:
            if settlement.dead_letter:
                self.dead_count += 1
            self._discard(message, record=not recorded)
            return
        if settlement.failed:
            failures = self._failures.get(message.seq, 0) + 1
            self._failures[message.seq] = failures
            if message.journaled and self.cursor is not None:
                self.cursor.failed(message.seq, failures)
        if settlement.exclude_consumer and consumer is not None:
            self._declined.setdefault(message.seq, set()).add(id(consumer))
        heapq.heappush(self._returned, (message.seq, message))
        self.dispatch()

    def discard_delivered(self, message: Message) -> None:
        """A pre-settled delivery: the message is gone as soon as it is sent."""
        self._outstanding.pop(message.seq, None)
        self._discard(message)

    def _discard(self, message: Message, *, record: bool = True) -> None:
        seq = message.seq
        self._failures.pop(seq, None)
        self._declined.pop(seq, None)
        if message.journaled:
            if record and self.cursor is not None:
                self.cursor.discarded(seq)
            return
        self._memory_count -= 1
        self._memory_bytes -= len(message.raw)
        if self.blocked and self._memory_count <= self._resume_count and self._memory_bytes <= self._resume_bytes:
            self.blocked = False
            if self.on_unblocked is not None:
                self.on_unblocked(self)

    def _expire(self, message: Message) -> None:
        self.expired_count += 1
        self._discard(message)

    def expire_due(self, now: int | None = None) -> int:
        """Drop expired messages that are waiting (not delivered); returns how many."""
        now = now_ms() if now is None else now
        keep: deque[Message] = deque()
        dropped = 0
        for message in self._ready:
            if message.expires and message.expires <= now:
                self._expire(message)
                dropped += 1
            else:
                keep.append(message)
        if dropped:
            self._ready = keep
        returned = [(s, m) for s, m in self._returned if not (m.expires and m.expires <= now)]
        for _, m in self._returned:
            if m.expires and m.expires <= now:
                self._expire(m)
                dropped += 1
        if len(returned) != len(self._returned):
            heapq.heapify(returned)
            self._returned = returned
        return dropped

    def purge(self) -> None:
        """Discard everything waiting (not what is out for delivery)."""
        for message in list(self._ready) + [m for _, m in self._returned] + [m for _, _, m in self._scheduled]:
            self._discard(message)
        self._ready.clear()
        self._ready_unordered = False
        self._returned.clear()
        self._scheduled.clear()
        self._stop_paging()


class Topic:
    """A publish-subscribe node: every subscription queue gets the message (if its filter takes it and it is not
    full: ``Queue.offer``)."""

    kind = "topic"
    blocked = False  # a topic never withholds its publishers' credit (engine.memory)

    def __init__(self, name: str, *, durable: bool = True) -> None:
        self.name = name
        self.durable = durable
        self.subscriptions: list[Queue] = []
        self.filters: dict[int, Callable[[Message], bool]] = {}
        self.durable_subscriptions = 0  # messages are journaled only while this is above zero
        self.paging_subscriptions = 0  # durable subscription queues paging now (queue_paging keeps count)
        self.current: Message | None = None  # the last message published (a topic's current value)

    def subscribe(self, queue: Queue, accepts: Callable[[Message], bool] | None = None) -> None:
        self.subscriptions.append(queue)
        if accepts is not None:
            self.filters[id(queue)] = accepts

    def queue_paging(self, started: bool) -> None:
        """A durable subscription queue's ``on_paging``: while one pages, non-persistent messages to this topic
        are journaled too (docs/architecture.md, "Paging")."""
        self.paging_subscriptions += 1 if started else -1

    def unsubscribe(self, queue: Queue) -> None:
        if queue in self.subscriptions:
            self.subscriptions.remove(queue)
        self.filters.pop(id(queue), None)

    def publish(self, message: Message) -> int:
        """Route to every matching subscription; returns how many took it."""
        self.current = message
        taken = 0
        filters = self.filters
        for queue in self.subscriptions:
            accepts = filters.get(id(queue)) if filters else None
            if (accepts is None or accepts(message)) and queue.offer(message):
                taken += 1
        return taken


__all__ = ["ALL", "Consumer", "Cursor", "Message", "Queue", "Topic", "now_ms"]
