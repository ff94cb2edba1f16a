"""Bookmarks: the ``subgate-bookmark`` source filter's values and the bookmark string itself (design.md §3).

Owns the pure rules of replay: what a filter value asks for (EPOCH ``0``, NOW ``0|1|``, a UTC timestamp
``YYYYmmddTHHMMSS``, one bookmark ``publisherId|seq|``, or a comma-separated list of bookmarks), refusing a
malformed value with ``amqp:invalid-field`` and a description that names it (so is a bookmark the store cannot
look up: a sequence number above 2^63 - 1, a publisher id longer than its column or holding U+0000, by the rules
of ``mapping.store_values``, the same as a message's ``x-opt-publisher-seq``); how a bookmark is written and read
back; and where a replay starts once the journal has said which sequence each named bookmark has (after the
earliest, skipping the later ones the list names). No proton, no store: the gateway asks the journal, this
module decides. The decisions are written down in docs/bookmarks.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.store_values import MAX_PUBLISHER_ID, parse_seq, text_problem

BOOKMARK_SYMBOL = "subgate:bookmark:string"
BOOKMARK_KEY = "subgate-bookmark"
EPOCH = "0"
NOW = "0|1|"
MAX_LIST = 1024  # bookmarks in one list
MAX_VALUE = 256 * 1024  # characters of one filter value

_TIMESTAMP = re.compile(r"\d{8}T\d{6}")


class Start(Enum):
    """What kind of replay start a filter value names."""

    EPOCH = "epoch"
    NOW = "now"
    TIME = "time"
    BOOKMARKS = "bookmarks"


@dataclass(frozen=True, slots=True)
class Bookmark:
    """One message's bookmark: its publisher id and that publisher's sequence number."""

    publisher_id: str
    seq: int

    def __str__(self) -> str:
        return format_bookmark(self.publisher_id, self.seq)


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """A parsed filter value: ``value`` as the client sent it (echoed), ``after_ms`` for a timestamp (the replay
    starts with the first message journaled after it), ``bookmarks`` for one bookmark or a list."""

    start: Start
    value: str
    after_ms: int = 0
    bookmarks: tuple[Bookmark, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplayPoint:
    """Where a replay starts: messages with journal sequence above ``after``, except those in ``skip``."""

    after: int
    skip: frozenset[int] = frozenset()


def format_bookmark(publisher_id: str, seq: int) -> str:
    return f"{publisher_id}|{seq}|"


def parse_bookmark(text: str) -> Bookmark | None:
    """``publisherId|seq|`` → its parts; None when ``text`` is not one (the publisher id may itself hold ``|``:
    the sequence is the last field).

    Raises:
        Refused: ``amqp:invalid-field`` for a bookmark of that form the store cannot look up: a sequence number
            above 2^63 - 1, a publisher id longer than ``MAX_PUBLISHER_ID`` or not text the store can hold.
    """
    if not text.endswith("|"):
        return None
    publisher_id, bar, digits = text[:-1].rpartition("|")
    if not bar or not publisher_id:
        return None
    seq = parse_seq(f"{BOOKMARK_KEY} {_shown(text)}: its sequence number", digits)
    if seq is None:
        return None
    problem = text_problem(f"{BOOKMARK_KEY} {_shown(text)}: its publisher id", publisher_id, MAX_PUBLISHER_ID)
    if problem is not None:
        raise Refused(INVALID_FIELD, problem)
    return Bookmark(publisher_id, seq)


def parse_replay(value: object) -> ReplayRequest:
    """Read a ``subgate-bookmark`` filter value.

    Raises:
        Refused: ``amqp:invalid-field`` naming the value when it is not a string, empty, too long, a timestamp
            that is not a date, a bookmark the store cannot look up (``parse_bookmark``), or neither of the forms
            above.
    """
    if not isinstance(value, str):
        raise Refused(INVALID_FIELD, f"the {BOOKMARK_KEY} filter must carry a string, not {type(value).__name__}")
    text = value.strip()
    if len(text) > MAX_VALUE:
        raise Refused(INVALID_FIELD, f"bookmark value is longer than {MAX_VALUE} characters")
    if text == EPOCH:
        return ReplayRequest(Start.EPOCH, value)
    if text == NOW:
        return ReplayRequest(Start.NOW, value)
    if _TIMESTAMP.fullmatch(text):
        return ReplayRequest(Start.TIME, value, after_ms=_timestamp_ms(text, value))
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > MAX_LIST:
        raise Refused(INVALID_FIELD, f"bookmark list {_shown(value)} names more than {MAX_LIST} bookmarks")
    bookmarks = []
    for part in parts:
        bookmark = parse_bookmark(part)
        if bookmark is None or part == NOW:
            raise Refused(INVALID_FIELD, _malformed(value, part))
        bookmarks.append(bookmark)
    return ReplayRequest(Start.BOOKMARKS, value, bookmarks=tuple(bookmarks))


def replay_point(request: ReplayRequest, found: dict[Bookmark, int]) -> ReplayPoint:
    """Where a list of bookmarks starts: after the earliest (by journal sequence), skipping the later ones it
    names. ``found`` maps each bookmark to its journal sequence.

    Raises:
        Refused: ``amqp:invalid-field`` naming the first bookmark the journal does not hold (unknown, or deleted
            by retention).
    """
    for bookmark in request.bookmarks:
        if bookmark not in found:
            raise Refused(INVALID_FIELD, unknown_bookmark(str(bookmark)))
    sequences = sorted({found[b] for b in request.bookmarks})
    return ReplayPoint(sequences[0], frozenset(sequences[1:]))


def unknown_bookmark(bookmark: str) -> str:
    return f"bookmark {_shown(bookmark)} is not in the journal: unknown, or older than the retained range"


def before_retention(value: str) -> str:
    return f"bookmark {_shown(value)} is older than the retained range of the journal"


def _timestamp_ms(text: str, value: str) -> int:
    try:
        moment = datetime.strptime(text, "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        raise Refused(INVALID_FIELD, f"bookmark timestamp {_shown(value)} is not a valid UTC date and time") from None
    return int(moment.timestamp() * 1000)


def _malformed(value: str, part: str) -> str:
    if part == value.strip():
        return (
            f"malformed bookmark {_shown(value)}: expected 0 (EPOCH), 0|1| (NOW), YYYYmmddTHHMMSS (UTC), "
            "publisherId|seq| or a comma-separated list of bookmarks"
        )
    return f"malformed bookmark {_shown(part)} in the list {_shown(value)}: expected publisherId|seq|"


def _shown(text: str) -> str:
    """A value as a refusal names it: quoted, cut to 200 characters (descriptions are bounded)."""
    return repr(text if len(text) <= 200 else text[:200] + "…")
