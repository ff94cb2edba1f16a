"""Placing a replay: where a new topic subscription with a ``subgate-bookmark`` filter starts (design.md §3).

Owns the attach's wait for the journal: a start that needs the store (EPOCH, a time, bookmarks) is asked of the
journal writer (``JournalPort.submit_read``, answered on the reactor after everything submitted before it is
committed) while the attach is held by a ``HeldReplay`` link state; the answer is kept for the link and the
attach is run again, which then finds it (``take``). NOW needs nothing from the store. The rules (what a value
means, which bookmark is unknown) are ``mapping.bookmarks``'; the reactor never waits on the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from proton import Link

from subgate.engine.ports import JournalPort
from subgate.engine.records import ReplayAnswer, ReplayRead
from subgate.gateway.links import ConnectionState, LinkState
from subgate.mapping.bookmarks import Bookmark, ReplayPoint, ReplayRequest, Start, replay_point
from subgate.mapping.errors import INTERNAL_ERROR, Refused

log = logging.getLogger("subgate.replay")


@dataclass(frozen=True, slots=True)
class Placed:
    """A replay's start, and about how many rows of the topic lie above it (for depth)."""

    point: ReplayPoint
    rows: int


class HeldReplay(LinkState):
    """A subscription attach waiting for the journal to place its replay."""

    __slots__ = ()

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.closed = True


def place(request: ReplayRequest, answer: ReplayAnswer) -> Placed:
    """The start the journal's ``answer`` gives ``request``.

    Raises:
        Refused: ``amqp:invalid-field`` for a bookmark the journal does not hold.
    """
    if request.start is Start.EPOCH:
        return Placed(ReplayPoint(0), answer.rows)
    if request.start is Start.TIME:
        return Placed(ReplayPoint(answer.after), answer.rows)
    found = {Bookmark(publisher_id, seq): value for (publisher_id, seq), value in answer.found.items()}
    return Placed(replay_point(request, found), answer.rows)


class Replays:
    """Replays being placed, by link (see the module docstring)."""

    def __init__(self, journal: JournalPort, last_seq: Callable[[], int]) -> None:
        self._journal = journal
        self._last_seq = last_seq
        self._placed: dict[Link, Placed | Refused] = {}

    def take(self, link: Link) -> Placed | Refused | None:
        """The answer kept for ``link`` by an earlier pass of its attach, if any (given once)."""
        return self._placed.pop(link, None)

    def now(self) -> Placed:
        return Placed(ReplayPoint(self._last_seq()), 0)

    def hold(
        self, link: Link, state: ConnectionState, request: ReplayRequest, address: str, resume: Callable[[], None]
    ) -> None:
        """Ask the journal where ``request`` starts on topic ``address``; ``resume`` releases the held link state
        and runs the attach again once it has answered (not when the link or its connection ended meanwhile)."""
        held = HeldReplay(link, state)
        state.adopt(held)
        read = ReplayRead(
            address,
            bookmarks=tuple((b.publisher_id, b.seq) for b in request.bookmarks),
            at_ms=request.after_ms if request.start is Start.TIME else None,
        )

        def answered(outcome: ReplayAnswer | BaseException | None) -> None:
            if held.closed or state.closed:
                return
            self._placed[link] = self._placed_from(request, outcome)
            resume()  # the attach releases the held state and runs again

        self._journal.submit_read(read, answered)

    @staticmethod
    def _placed_from(request: ReplayRequest, outcome: ReplayAnswer | BaseException | None) -> Placed | Refused:
        if not isinstance(outcome, ReplayAnswer):
            log.warning("placing the replay %r failed: %s", request.value, outcome)
            return Refused(INTERNAL_ERROR, f"the journal could not place the replay {request.value!r}")
        try:
            return place(request, outcome)
        except Refused as refusal:
            return refusal
