"""The server's memory high-water mark: what the server holds in memory plus what the credit it granted may still
bring, against one mark, whatever the number of queues and publisher links.

Owns the rule and the two figures, not their counting on the hot path (``engine.nodes.Queue`` adds and takes away
held bytes inline, ``gateway.transacting`` the sends of open transactions) and not the wire (``gateway.links.Inbound``
asks ``grant`` before it gives a publisher link credit). Pure Python, no I/O; everything here runs on the reactor
thread. Why and the operator's view: docs/architecture.md "Memory limit", docs/operations.md "The memory mark".

- **held** (``bytes``): the bytes of message bodies that queues hold in memory, journaled or not (a message shared
  by several queues counts once: ``Message.holders``), and of the sends held by open transactions.
  Held too: the messages in the journal's hands, from their arrival to their commit (``gateway.publish``).
- **reserved**: for every publisher link, its *slots* (credit granted and not used yet) times the *unit*, the
  largest message the server takes (``--max-message-size``). Credit is reserved before the bytes arrive; a slot is
  freed when its message arrives, which is held from then on (at its real size, at most the unit).

The rule:

1. a publisher link gets ``n`` more credits only while ``held + reserved + n * unit <= mark``; so what publisher
   links can bring never takes the server past its mark, however many queues and links share it;
2. no link holds more than its share of the mark, ``max(1, mark // unit // max(4, links))`` slots, so one busy
   link cannot starve the others; it is topped up in steps of at least half its share or window (not a flow frame
   per message); a link that got nothing for want of room waits in line (``waiting``, first come first served)
   and is topped up as room comes back (a reservation freed, a message taken away). While links wait, the credit
   of a link idle for a tick is taken back (``gateway.links.Inbound.reclaim``: a flow with a lower link-credit)
   and that link waits in line in turn, so idle links cannot hold the mark's credit from busy ones;
3. **blocked**: from when held leaves no room for one more message of the unit (``held > mark - unit``) until it
   drops to the low-water mark (80 % of the mark, or ``mark - 2 * unit`` when that is lower, so the two thresholds
   never cross), no publisher link gets credit at all. ``on_blocked`` and ``on_unblocked`` are called once per
   crossing (the gateway logs one line each and tops up every publisher link).

Links to ``$management`` are not counted (their requests are answered at once, not held). Without a unit (0, the
server's mark off, or a gauge made for a unit test) nothing is reserved and the mark only blocks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

UNLIMITED = 1 << 62
RESUME_PERCENT = 80  # publishers get credit again once the server holds at most this share of its mark
MIN_SHARERS = 4  # a link's share is at most a quarter of the mark's credit, so the first links leave room for more


class Waiter(Protocol):
    """A publisher link as the waiting line sees it (``gateway.links.Inbound``)."""

    queued: bool  # in the line now

    def top_up(self) -> None: ...


def mark_problem(mark: int, unit: int) -> str | None:
    """Why a mark of ``mark`` bytes cannot work with messages of up to ``unit`` bytes, or None (0: no mark)."""
    if mark and mark < unit:
        return (
            f"--memory-high-water ({mark} bytes) must be at least --max-message-size ({unit} bytes): the credit of "
            "a single publisher link reserves room for a message of that size"
        )
    return None


def low_water(mark: int, unit: int) -> int:
    """Where a blocked server gives credit again: 80 % of the mark, below the blocking point by two units."""
    return max(0, min(mark * RESUME_PERCENT // 100, mark - 2 * unit))


class HighWater:
    """The server's held and reserved bytes against its mark (see the module docstring). ``bytes`` is added to and
    taken from inline by the queues; ``add`` and ``drop`` are for the rest."""

    __slots__ = (
        "bytes", "reserved", "high", "low", "block_at", "unit", "links", "share", "blocked", "waiting",
        "on_blocked", "on_unblocked",
    )  # fmt: skip

    def __init__(self, high: int = 0, unit: int = 0) -> None:
        problem = mark_problem(high, unit)
        if problem is not None:
            raise ValueError(problem)
        self.bytes = 0  # held
        self.reserved = 0  # slots of every publisher link times the unit
        self.high = high or UNLIMITED
        self.unit = unit if high else 0
        self.low = low_water(high, self.unit) if high else UNLIMITED
        self.block_at = self.high - self.unit + 1 if self.unit else self.high  # held at which no message fits
        self.links = 0  # publisher links sharing the mark
        self.share = UNLIMITED  # slots one link may hold
        self.blocked = False  # from block_at down to the low-water mark: no credit for publishers
        self.waiting: deque[Waiter] = deque()
        self.on_blocked: Callable[[], None] | None = None
        self.on_unblocked: Callable[[], None] | None = None

    # -- held ------------------------------------------------------------------------------------------------
    def add(self, size: int) -> None:
        self.bytes += size
        if self.bytes >= self.block_at and not self.blocked:
            self.block()

    def drop(self, size: int) -> None:
        self.bytes -= size
        if self.blocked:
            if self.bytes <= self.low:
                self.release()
        elif self.waiting:
            self.wake()

    def block(self) -> None:
        """No room for one more message: publishers get no more credit."""
        self.blocked = True
        if self.on_blocked is not None:
            self.on_blocked()

    def release(self) -> None:
        """Down to the low-water mark: publishers get credit again."""
        self.blocked = False
        if self.on_unblocked is not None:
            self.on_unblocked()
        if self.waiting:
            self.wake()

    # -- reserved --------------------------------------------------------------------------------------------
    def join(self) -> None:
        """A publisher link now shares the mark."""
        self.links += 1
        self._share()

    def leave(self, slots: int) -> None:
        """A publisher link ended; ``slots`` of its reservation go with it (what it has in the journal stays
        reserved until each message is answered: ``reserve``)."""
        self.links -= 1
        self._share()
        self.reserve(-slots)

    def _share(self) -> None:
        if self.unit:
            self.share = max(1, self.high // self.unit // max(MIN_SHARERS, self.links))

    def reserve(self, slots: int) -> None:
        """A link's slots changed by ``slots`` (negative: a message arrived and was held, or was answered)."""
        self.reserved += slots * self.unit
        if slots < 0 and self.waiting and not self.blocked:
            self.wake()

    def grant(self, slots: int, wanted: int) -> int:
        """How many of ``wanted`` more credits a link holding ``slots`` may be given now (rules 1 to 3)."""
        if self.blocked:
            return 0
        unit = self.unit
        if not unit:
            return wanted
        room = (self.high - self.bytes - self.reserved) // unit
        return max(0, min(wanted, self.share - slots, room))

    @property
    def room(self) -> int:
        """Bytes of the mark neither held nor reserved."""
        return self.high - self.bytes - self.reserved

    # -- the waiting line ------------------------------------------------------------------------------------
    def wait(self, link: Waiter) -> None:
        """``link`` got no credit for want of room: it is topped up when room comes back."""
        if not link.queued:
            link.queued = True
            self.waiting.append(link)

    def wake(self) -> None:
        """Top up the links waiting in line, first come first served, while one more message fits. A link that
        finds no room again goes back to the end of the line, and then no room is left: the loop ends."""
        waiting = self.waiting
        unit = self.unit or 1
        while waiting and not self.blocked and self.high - self.bytes - self.reserved >= unit:
            link = waiting.popleft()
            link.queued = False
            link.top_up()

    def figures(self) -> tuple[int, int, int, bool]:
        """(held, reserved, mark, blocked), the mark 0 when there is none: what status and metrics report."""
        return self.bytes, self.reserved, 0 if self.high == UNLIMITED else self.high, self.blocked
