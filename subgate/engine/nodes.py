"""Queues in memory: ordering, competing consumers, redelivery, expiry and delay (topics: ``engine.topic_node``).

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

Limits, counted from ``_take`` to ``_discard``: the messages not in the journal and their bytes (``admits``:
``engine.memory``; under ``block`` the queue is ``blocked`` until it drains, then ``on_unblocked``), every body's
bytes on the server's ``HighWater`` gauge (``engine.memory_mark``), and a durable queue's depth against its backlog
limit (``backlog_full`` and ``on_backlog``: ``engine.backlog``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from subgate.engine.backlog import NO_BACKLOG_LIMIT, BacklogLimit
from subgate.engine.groups import GroupTable
from subgate.engine.memory import NO_LIMIT, UNLIMITED, Answer, MemoryLimit, Sender, answer
from subgate.engine.messages import ALL, Consumer, Cursor, Message, now_ms
from subgate.engine.pages import PageWindow
from subgate.engine.topic_node import Topic
from subgate.engine.waiting import Waiting
from subgate.mapping.address_settings import DEFAULTS, EXPIRED, MAX_DELIVERY_ATTEMPTS, REJECTED, AddressSettings
from subgate.mapping.outcomes import Settlement

_MAX_HELD_PASSED = 1000  # messages waiting for their group's owner that one dispatch walks past


def limit_backlog(queue: Queue, limit: BacklogLimit) -> None:
    """Set a durable queue's backlog limit (engine.backlog; a temporary queue has none), and whether it is full
    under it now."""
    if not queue.durable:
        return
    queue.backlog, queue._backlog_limit, queue._backlog_resume = limit, limit.messages, limit.resume_at()
    if queue.backlog_full and queue.depth <= queue._backlog_resume:
        _backlog_changed(queue, False)
    elif not queue.backlog_full and queue.depth >= limit.full_at():
        _backlog_changed(queue, True)


def _backlog_changed(queue: Queue, full: bool) -> None:
    """``queue`` reached its backlog limit, or drained to its resume mark (engine.backlog)."""
    queue.backlog_full = full
    if queue.on_backlog is not None:
        queue.on_backlog(queue, full)
    if not full and queue.backlog.blocks and queue.on_unblocked is not None:
        queue.on_unblocked(queue)


def _offers(declined: dict[int, set[int]], message: Message, consumer: Consumer) -> bool:
    """Would ``consumer`` take ``message`` (it has not declined it before, its filter accepts it)?"""
    refused = declined.get(message.seq)
    return (refused is None or id(consumer) not in refused) and consumer.accepts(message)


class Queue:
    """A point-to-point node, or one topic subscription's private queue.

    Available messages wait in ``waiting`` (``engine.waiting``: arrivals merged by sequence with released messages
    going back to their place); messages held until their delivery time wait in ``_scheduled``; ``pages``
    (``engine.pages``) keeps the books of what is in the journal only.
    """

    kind = "queue"
    confirm_on_receipt = False  # publisher mode store_send_noconfirm (mapping.branch_modes; set by the router)

    def __init__(self, name: str, *, durable: bool = True, cursor: Cursor | None = None) -> None:
        self.name = name
        self.durable = durable
        self.cursor = cursor
        self.consumers: list[Consumer] = []
        self.waiting = Waiting()
        self._scheduled: list[tuple[int, int, Message]] = []
        self._failures: dict[int, int] = {}
        self._declined: dict[int, set[int]] = {}
        self._outstanding: dict[int, Message] = {}  # delivered, not settled yet
        self._rr = 0
        self.groups: GroupTable[Consumer] = GroupTable()  # JMSXGroupID -> its consumer (engine.groups)
        self.on_schedule: Callable[[int], None] | None = None  # asks the gateway for a timer at that ms
        self.expired_count = 0
        self.dead_count = 0
        # Dead letters and expiry (mapping.address_settings): ``on_move(queue, message, reason)`` takes a message
        # to its dead letter or expiry address; until ``moved`` it stays held here (delivered, to low_water).
        self.address = name  # what the address settings match and x-opt-ORIG-ADDRESS names (a topic's name)
        self.address_settings: AddressSettings = DEFAULTS
        self.on_move: Callable[[Queue, Message, str], None] | None = None
        # Paging (see the module docstring): limit 0 (the default) keeps everything in memory.
        self.on_paging: Callable[[bool], None] | None = None  # told when the queue starts (True) and stops paging
        self.pages = PageWindow(lambda started: self.on_paging(started) if self.on_paging is not None else None)
        # Memory limit (see the module docstring): messages held that are not in the journal, and their bytes.
        self.memory = NO_LIMIT
        self._memory_count = 0
        self._memory_bytes = 0
        self._full_count = self._full_bytes = self._resume_count = self._resume_bytes = UNLIMITED
        self.blocked = False  # publisher links get no credit (policy block, from the limit to the low-water mark)
        self.on_unblocked: Callable[[Queue], None] | None = None
        self.gauge = NO_LIMIT.gauge
        self.backlog, self.backlog_full = NO_BACKLOG_LIMIT, False
        self._backlog_limit, self._backlog_resume = 0, UNLIMITED  # 0: none
        self.on_backlog: Callable[[Queue, bool], None] | None = None  # a subscription's topic (engine.backlog)
        self.dropped_count = 0  # topic copies not taken because the queue was full
        self.messages_in = 0  # routed here by a publisher (gateway.publish), for /metrics
        self.messages_out = 0  # deliveries sent to consumers (redeliveries included)

    def use_journal_pages(
        self,
        limit: int,
        on_page: Callable[[Queue, int, int, int], None],
        on_browse: Callable[[Any, int, int, int], None] | None = None,
    ) -> None:
        """Page through the journal: keep about ``limit`` available messages in memory, read the rest with
        ``on_page(queue, after, upto, limit)``, and a browser's with ``on_browse(browser, after, upto, limit)``."""
        pages = self.pages
        pages.limit, pages.on_page, pages.on_browse = limit, on_page, on_browse

    def limit_memory(self, limit: MemoryLimit) -> None:
        """Set the limit on messages held in memory only (engine.memory), and on remembered message groups."""
        self.groups.max_groups = limit.groups
        self.memory = limit
        self._full_count, self._full_bytes = limit.full_at()
        self._resume_count, self._resume_bytes = limit.resume_at()
        self.gauge = limit.gauge
        if limit.backlog is not None:
            limit_backlog(self, limit.backlog)

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Messages held: available (in memory or paged out to the journal), scheduled and delivered-but-unsettled."""
        held = len(self.waiting) + len(self._scheduled) + len(self._outstanding)
        return held + self.pages.count

    @property
    def paging(self) -> bool:
        """Some of this queue's messages are in the journal only."""
        return self.pages.paging

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

    def low_water(self) -> int:
        """The highest sequence below every message this queue still holds (for the journal cursor)."""
        candidates = [m.seq for m in self._outstanding.values()]
        lowest = self.waiting.lowest_seq()
        if lowest is not None:
            candidates.append(lowest)
        candidates.extend(seq for _, seq, _ in self._scheduled)
        if self.pages.after >= 0:
            candidates.append(self.pages.after + 1)
        return min(candidates) - 1 if candidates else -1

    # -- input ---------------------------------------------------------------------------------------------
    def push(self, message: Message, failures: int = 0, *, kept: bool = False) -> None:
        """Enqueue a new (or recovered) message and dispatch; a journaled one may be left to the journal (paging).
        ``kept``: recovery loads it beyond the first page because its priority overtakes that page (PageWindow)."""
        limit = self._backlog_limit
        if limit and not self.backlog_full and self.depth + 1 >= limit:
            _backlog_changed(self, True)
        if kept:
            self.pages.kept.add(message.seq)
        elif message.journaled and self.pages.limit and self.pages.leaves_out(message, self.waiting):
            return
        self._take(message, failures)
        if self.consumers:
            self.dispatch()

    def page_from(self, after: int, upto: int, count: int) -> None:
        """Recovery: journaled messages above ``after`` up to ``upto`` (about ``count``) were not loaded."""
        if self.pages.recover(after, upto, count):
            self.pages.request(self)
        if self._backlog_limit and not self.backlog_full and self.depth >= self._backlog_limit:
            _backlog_changed(self, True)

    def page_loaded(self, rows: list[tuple[Message, int]], after: int, reached: int) -> None:
        """The answer to ``on_page``: the messages (with failure counts), in order, of this queue's journal rows
        above ``after`` up to ``reached`` (the read went that far; rows it filtered out are not here)."""
        if not self.pages.answered(after):
            return  # purged meanwhile, or an answer already applied: stale
        kept = self.pages.kept  # in memory already: their priority overtook the paged messages
        loaded = 0
        for message, failures in rows:
            if not kept or message.seq not in kept:
                self._take(message, failures)
                loaded += 1
        self.pages.advance(loaded, reached)
        if self.consumers:
            self.dispatch()

    def _take(self, message: Message, failures: int) -> None:
        holders = message.holders
        message.holders = holders + 1
        if not holders:  # shared by several queues, it is in memory once
            gauge = self.gauge
            gauge.bytes += len(message.raw)
            if gauge.bytes >= gauge.block_at and not gauge.blocked:
                gauge.block()
        if message.journaled:
            pages = self.pages
            if message.seq > pages.last_journaled and not (pages.kept and message.seq in pages.kept):
                pages.last_journaled = message.seq
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
        # A journaled message is routed when its commit completes, so it can arrive behind a later, non-journaled
        # one: ``Waiting.append`` notes it, and low_water() then looks at every waiting message.
        self.waiting.append(message)

    def release_scheduled(self, now: int | None = None) -> int | None:
        """Make due scheduled messages available; returns the next due time, if any."""
        now = now_ms() if now is None else now
        moved = False
        while self._scheduled and self._scheduled[0][0] <= now:
            _, _, message = heapq.heappop(self._scheduled)
            self.waiting.give_back(message)
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
        self.groups.release(consumer)  # its groups move to the next consumer to take one of their messages
        # Exclusions are by id(): once the consumer is gone its id may be reused by a new one.
        for declined in self._declined.values():
            declined.discard(id(consumer))

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
        waiting = self.waiting
        while True:
            message = waiting.peek()
            if message is None:
                break
            if message.expires:
                now = now or now_ms()
                if message.expires <= now:
                    waiting.pop(message)
                    self._expire(message)
                    continue
            if idle >= count:
                if not declined:
                    break  # no consumer has credit
                # Every consumer with credit declined it (undeliverable-here, filter): it keeps its place for
                # others, and the messages behind it go on (a JMS consumer must not be stalled by one it refused).
                waiting.pop(message)
                if skipped is None:
                    skipped = []
                skipped.append(message)
                idle = 0
                declined = False
                continue
            if message.group is not None:
                owner = self.groups.owner(message.group)
                if owner is not None:
                    # Its group's owner takes it, or it waits for the owner while later messages go on.
                    waiting.pop(message)
                    if owner.credit > 0 and _offers(self._declined, message, owner):
                        self._deliver(message, owner)
                    else:
                        if skipped is None:
                            skipped = []
                        skipped.append(message)
                        if len(skipped) >= _MAX_HELD_PASSED:
                            break  # bounded work per dispatch while owners have no credit
                    continue
            consumer = consumers[self._rr % count]
            self._rr += 1
            if consumer.credit <= 0:
                idle += 1
                continue
            if not _offers(self._declined, message, consumer):
                idle += 1
                declined = True
                continue
            waiting.pop(message)
            self._deliver(message, consumer)
            idle = 0
            declined = False
        if skipped is not None:
            for message in skipped:
                waiting.give_back(message)
        pages = self.pages
        if pages.after >= 0 and len(waiting) <= pages.limit // 2:
            pages.request(self)

    def _deliver(self, message: Message, consumer: Consumer) -> None:
        self._outstanding[message.seq] = message
        self.messages_out += 1
        if message.group is not None:
            self.groups.delivered(message.group, consumer, message.group_seq)
        consumer.deliver(message, self._failures.get(message.seq, 0))

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
                if not recorded and self.on_move is not None:
                    self._outstanding[message.seq] = message  # held until moved (as below)
                    self.on_move(self, message, REJECTED)
                    return
            self._discard(message, record=not recorded)
            return
        wait = 0
        if settlement.failed:
            failures = self._failures.get(message.seq, 0) + 1
            self._failures[message.seq] = failures
            if self.on_move is not None and self.address_settings.gives_up(failures):
                self.dead_count += 1
                self._outstanding[message.seq] = message  # held until moved (as below)
                self.on_move(self, message, MAX_DELIVERY_ATTEMPTS)
                return
            if message.journaled and self.cursor is not None:
                self.cursor.failed(message.seq, failures)
            wait = self.address_settings.redelivery_wait(failures)
        if settlement.exclude_consumer and consumer is not None:
            self._declined.setdefault(message.seq, set()).add(id(consumer))
        if wait:  # redelivery delay: back once it has passed
            until = now_ms() + wait
            heapq.heappush(self._scheduled, (until, message.seq, message))
            if self.on_schedule is not None:
                self.on_schedule(until)
            return
        self.waiting.give_back(message)
        self.dispatch()

    def moved(self, message: Message, *, recorded: bool, failed: bool = False) -> None:
        """A message handed to ``on_move`` is on its new address (``recorded``: the journal has its removal from
        here already, in the move's own database transaction), or was dropped; or, ``failed``, its move could not
        be committed and it stays here, available again."""
        if self._outstanding.pop(message.seq, None) is None:
            return
        if failed:
            self.waiting.give_back(message)
            self.dispatch()
        else:
            self._discard(message, record=not recorded)

    def _expire(self, message: Message) -> None:
        self.expired_count += 1
        if self.on_move is not None and self.address_settings.expiry_address:
            self._outstanding[message.seq] = message  # held until moved
            self.on_move(self, message, EXPIRED)
        else:
            self._discard(message)

    def discard_delivered(self, message: Message) -> None:
        """A pre-settled delivery: the message is gone as soon as it is sent."""
        self._outstanding.pop(message.seq, None)
        self._discard(message)

    def _discard(self, message: Message, *, record: bool = True) -> None:
        seq = message.seq
        self._failures.pop(seq, None)
        self._declined.pop(seq, None)
        size = len(message.raw)
        holders = message.holders - 1
        message.holders = holders
        if not holders:
            gauge = self.gauge
            gauge.bytes -= size
            if gauge.blocked:
                if gauge.bytes <= gauge.low:
                    gauge.release()
            elif gauge.waiting:
                gauge.wake()  # room for a publisher link waiting for its share (engine.memory_mark)
        if self.backlog_full and self.depth <= self._backlog_resume:
            _backlog_changed(self, False)
        if message.journaled:
            if record and self.cursor is not None:
                self.cursor.discarded(seq)
            return
        self._memory_count -= 1
        self._memory_bytes -= size
        if self.blocked and self._memory_count <= self._resume_count and self._memory_bytes <= self._resume_bytes:
            self.blocked = False
            if self.on_unblocked is not None:
                self.on_unblocked(self)

    def expire_due(self, now: int | None = None) -> int:
        """Drop expired messages that are waiting (not delivered); returns how many."""
        return self.waiting.expire(now_ms() if now is None else now, self._expire)

    def purge(self, limit: int | None = None) -> int:
        """Discard what waits (not what is out for delivery): scheduled messages, then available ones, at most
        ``limit`` of them (None: all); once nothing waits in memory, the journal-only ones too (paging stops,
        and the cursor's low-water mark is written past them at the next pass). Returns how many went."""
        if limit is None:
            chosen = [m for _, _, m in self._scheduled] + self.waiting.drain()
            self._scheduled.clear()
        else:
            chosen = [heapq.heappop(self._scheduled)[2] for _ in range(min(limit, len(self._scheduled)))]
            while len(chosen) < limit and (message := self.waiting.peek()) is not None:
                self.waiting.pop(message)
                chosen.append(message)
        for message in chosen:
            self._discard(message)
        if self._scheduled or len(self.waiting):
            return len(chosen)
        paged = self.pages.count
        if paged and self.cursor is not None:
            self.cursor.acks_since_low_water += 1
        self.pages.stop()
        if self.backlog_full and self.depth <= self._backlog_resume:
            _backlog_changed(self, False)
        return len(chosen) + paged


__all__ = ["ALL", "Consumer", "Cursor", "Message", "Queue", "Topic", "now_ms"]
