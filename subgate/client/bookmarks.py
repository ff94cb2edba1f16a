"""Bookmark values and the per-publisher order filter of the client SDK (seed 003), with no I/O.

A bookmark is the string the server stamps on every journaled message as the annotation ``x-opt-bookmark``:
``publisherId|seq|`` (docs/bookmarks.md). The publisher id may itself contain ``|``; the seq is the last field.
Besides bookmarks, a subscription's start can be ``EPOCH`` (the first retained message), ``NOW`` (no replay) or a
UTC time ``YYYYmmddTHHMMSS``; those three are *start values*, never the bookmark of a message.

``SeqFilter`` is AMPS's out-of-order rule: from one publisher id, a seq at or below the highest seen in this
process is dropped (1000, 1002, then 999: 999 is dropped) and counted.
"""

from __future__ import annotations

import re
import time

EPOCH = "0"
NOW = "0|1|"
_TIMESTAMP = re.compile(r"^\d{8}T\d{6}$")
RECOVERY_MARGIN = 2.0  # seconds before the subscribe that a store's first recovery point lies (clock skew, rounding)


def time_bookmark(epoch_seconds: float) -> str:
    """The start value ``YYYYmmddTHHMMSS`` (UTC) of an instant, rounded down to the second: the server starts at
    the first message journaled after it (docs/bookmarks.md)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(epoch_seconds))


def recovery_point(now: float, margin: float = RECOVERY_MARGIN) -> str:
    """Where a store-backed subscription with nothing recorded starts, and resumes until its first discard: a
    time ``margin`` seconds before ``now`` (the subscribe), so that nothing journaled after the subscribe is
    missed even when the client's clock runs ahead of the server's by up to ``margin``."""
    return time_bookmark(now - margin)


def parse_bookmark(value: str) -> tuple[str, int] | None:
    """``(publisher_id, seq)`` of a message bookmark ``publisherId|seq|``; None for a start value or garbage."""
    if value == NOW or not value.endswith("|"):
        return None
    publisher, sep, seq = value[:-1].rpartition("|")
    if not sep or not publisher or not seq.isdigit():
        return None
    return publisher, int(seq)


def is_message_bookmark(value: str) -> bool:
    """True for the bookmark of a message (not EPOCH, NOW, a time or a list)."""
    return "," not in value and parse_bookmark(value) is not None


def is_start_value(value: str) -> bool:
    """True for EPOCH, NOW or a UTC time, the starts that are not the bookmark of a message."""
    return value in (EPOCH, NOW) or bool(_TIMESTAMP.match(value))


def recovery_value(start: str | None, entries: list[tuple[str, bool]]) -> str | None:
    """Where a subscription resumes, from its start and its received bookmarks in order (with a discarded flag).

    The entries are assumed pruned: the first one, if any, is not discarded (a discarded head becomes the start).
    The answer is the start alone when it is not a message bookmark (the client then filters the discarded ones
    itself), else the list ``start,d1,d2,...``: the server resumes after the start and skips the listed ones.
    """
    if start is None:
        return None
    if not is_message_bookmark(start):
        return start
    discarded = [bookmark for bookmark, done in entries if done]
    return ",".join([start, *discarded])


class SeqFilter:
    """The highest seq seen per publisher id in this process; what is not above it is dropped and counted."""

    def __init__(self) -> None:
        self._highest: dict[str, int] = {}
        self.dropped = 0

    def reset(self) -> None:
        """Forget the seqs seen (a subscription started afresh replays them on purpose); keep the count."""
        self._highest.clear()

    def admit(self, bookmark: str) -> bool:
        """True when the message of ``bookmark`` is new; False (counted) when it is out of order or seen."""
        parsed = parse_bookmark(bookmark)
        if parsed is None:
            return True
        publisher, seq = parsed
        if seq <= self._highest.get(publisher, 0):
            self.dropped += 1
            return False
        self._highest[publisher] = seq
        return True
