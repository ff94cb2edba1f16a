"""A message as the engine holds it, and the shapes of what queues hand messages to.

Owns ``Message`` (immutable, shared by every queue it was routed to), the ``Consumer`` and ``Cursor`` protocols
that ``engine.nodes`` talks to (the gateway's outbound links, and the journal cursor of a durable queue),
``ALL`` (a sequence above every sequence) and ``now_ms``. Standard library only.
"""

from __future__ import annotations

import time
from typing import Protocol


class Message:
    """One routed message: the bytes to forward plus what the broker schedules by."""

    __slots__ = (
        "seq",
        "raw",
        "header_count",
        "durable",
        "priority",
        "expires",
        "deliver_at",
        "origin",
        "journaled",
        "annotations",
        "group",
        "group_seq",
        "holders",
    )

    def __init__(
        self,
        seq: int,
        raw: bytes,
        *,
        header_count: int = 0,
        durable: bool = False,
        priority: int = 4,
        expires: int = 0,
        deliver_at: int = 0,
        origin: str | None = None,
        journaled: bool = False,
        annotations: dict[str, object] | None = None,
        group: str | None = None,
        group_seq: int | None = None,
    ) -> None:
        self.seq = seq
        self.raw = raw
        self.header_count = header_count
        self.durable = durable
        self.priority = priority
        self.expires = expires  # ms since epoch; 0 = never
        self.deliver_at = deliver_at  # ms since epoch; 0 = at once
        # The publishing connection's container-id (no-local): a string, not the connection's state, so a queued
        # message does not keep a connection that went away (its links, proton objects) in memory.
        self.origin = origin
        self.journaled = journaled
        self.annotations = annotations
        self.group = group  # JMSXGroupID (engine.groups)
        self.group_seq = group_seq  # JMSXGroupSeq as the uint on the wire
        self.holders = 0  # queues holding it in memory: its bytes count once on the server's gauge (engine.memory)

    def as_journaled(self, journaled: bool, raw: bytes | None = None) -> Message:
        """The same message marked as in the journal or not (with ``raw``, its bytes as journaled: the bookmark
        stamped in); a new object, since a message is shared by every queue it was routed to."""
        return Message(
            self.seq,
            self.raw if raw is None else raw,
            header_count=self.header_count,
            durable=self.durable,
            priority=self.priority,
            expires=self.expires,
            deliver_at=self.deliver_at,
            origin=self.origin,
            journaled=journaled,
            group=self.group,
            group_seq=self.group_seq,
        )


class Consumer(Protocol):
    """What a queue needs from a consumer (the gateway's outbound link)."""

    credit: int

    def deliver(self, message: Message, failures: int) -> None: ...

    def accepts(self, message: Message) -> bool: ...


class Cursor(Protocol):
    """Durable bookkeeping of a queue: what it discarded and how often a message failed."""

    cursor_id: int
    acks_since_low_water: int

    def discarded(self, seq: int) -> None: ...

    def failed(self, seq: int, failures: int) -> None: ...


ALL = 1 << 62  # a sequence above every sequence


def now_ms() -> int:
    return int(time.time() * 1000)
