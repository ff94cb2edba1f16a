"""Duplicate detection by publisher identity (design.md §3, "Publisher identity and duplicates").

Owns the rule and the in-memory books: a message carrying message annotations ``x-opt-publisher-id`` (string)
and ``x-opt-publisher-seq`` (ulong) is a duplicate when its seq is not above the high-water mark of its publisher
id; the marks (loaded from the store at start-up, kept there by the journal rows of the messages, written in
their transaction: ``storage.high_water``) and the duplicates dropped per publisher. The reactor raises a mark
when it takes a message, before the commit, so that a re-send arriving while the first copy is on its way to
the journal is caught too; a message it refuses gets the mark back as it was, and a write that fails lowers it
again, so that the re-send is not lost. No proton, no store.
"""

from __future__ import annotations

from collections import Counter

from subgate.engine.codec.memo import AnnotationMemo
from subgate.engine.codec.types import ULong
from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.store_values import MAX_PUBLISHER_ID, MAX_SEQ, SEQ_RANGE, seq_problem, text_problem

PUBLISHER_ID = "x-opt-publisher-id"
PUBLISHER_SEQ = "x-opt-publisher-seq"


def publisher_identity(annotations: dict[str, object] | None) -> tuple[str, int] | None:
    """The (publisher id, seq) a message carries, or None when it carries neither annotation.

    Raises:
        Refused: ``amqp:invalid-field`` when only one of them is set, or either has the wrong type or range (the
            rules of ``mapping.store_values``, as for a bookmark: a seq from 0 to 2^63 - 1, an id of 1 to 512
            characters without U+0000).
    """
    if not annotations:
        return None
    publisher_id = annotations.get(PUBLISHER_ID)
    seq = annotations.get(PUBLISHER_SEQ)
    if type(seq) is ULong and type(publisher_id) is str:  # the usual case, checked at once
        # An ASCII id without U+0000 is text the store holds; any other is judged by text_problem below.
        if (
            seq <= MAX_SEQ
            and 0 < len(publisher_id) <= MAX_PUBLISHER_ID
            and publisher_id.isascii()
            and "\x00" not in publisher_id
        ):
            return publisher_id, int(seq)
    if publisher_id is None and seq is None:
        return None
    if publisher_id is None or seq is None:
        missing = PUBLISHER_SEQ if seq is None else PUBLISHER_ID
        raise Refused(INVALID_FIELD, f"{PUBLISHER_ID} and {PUBLISHER_SEQ} go together: {missing} is missing")
    if text_problem(PUBLISHER_ID, publisher_id, MAX_PUBLISHER_ID) is not None:  # U+0000, a surrogate: refused too
        raise Refused(INVALID_FIELD, f"{PUBLISHER_ID} must be a string of 1 to {MAX_PUBLISHER_ID} characters")
    if seq_problem(PUBLISHER_SEQ, seq) is not None:
        raise Refused(INVALID_FIELD, f"{PUBLISHER_SEQ} must be a ulong from {SEQ_RANGE}")
    # A plain int: the journal binds it for every row, and the drivers take an int subclass (ULong) the slow way
    # (about 1 µs a row on SQLite, bench: the writer's CPU per row).
    return str(publisher_id), int(seq)  # type: ignore[call-overload]  # an int, checked above


def identity_through(memo: AnnotationMemo, hits: int, annotations: dict[str, object]) -> tuple[str, int] | None:
    """``publisher_identity`` of a map that ``scan`` read through ``memo`` (``hits``: the memo's count before).

    A recalled map is the memo's template but for the seq (the template's hole, which the memo hands over as
    ``memo.seq``), so the publisher id found valid in it (kept as the memo's note, "" for a map with neither
    annotation) is taken again and only the seq is checked: one of the costs a numbered message adds in the
    server, where every call is dear.

    Raises:
        Refused: as ``publisher_identity``.
    """
    note = memo.note
    if note is not None and memo.hits != hits:
        if not note:
            return None
        seq = memo.seq
        if seq <= MAX_SEQ:
            return note, seq
    identity = publisher_identity(annotations)
    memo.note = "" if identity is None else identity[0]
    return identity


# What ``PublisherMarks.check`` answers for a duplicate (never an identity: a publisher id is never empty).
DUPLICATE: tuple[str, int] = ("", -1)


class PublisherMarks:
    """The high-water mark of every publisher id seen, and the duplicates dropped per publisher id.

    ``check`` judges a message as it arrives and raises its publisher's mark at once; when the server then refuses
    the message for another reason (a full queue, say), ``refused`` puts the mark back: nothing was stored, so
    its re-send is new.
    """

    __slots__ = ("marks", "dropped", "_previous")

    def __init__(self, marks: dict[str, int] | None = None) -> None:
        self.marks: dict[str, int] = dict(marks or {})
        self.dropped: Counter[str] = Counter()
        self._previous: int | None = None  # the mark the last check raised, as it was before

    def check(self, memo: AnnotationMemo, hits: int, annotations: dict[str, object]) -> tuple[str, int] | None:
        """The (publisher id, seq) of a message ``scan`` read through ``memo`` (``identity_through``), its mark
        raised to it; None when it carries neither annotation; ``DUPLICATE`` (and counted) when its seq is not
        above its mark. The reactor raises the mark before the commit, so that a re-send arriving while the first
        copy is on its way to the journal is caught too.

        Raises:
            Refused: as ``publisher_identity``.
        """
        identity = identity_through(memo, hits, annotations)
        if identity is None:
            return None
        publisher_id, seq = identity
        marks = self.marks
        mark = marks.get(publisher_id)
        if mark is not None and seq <= mark:
            self.dropped[publisher_id] += 1
            return DUPLICATE
        marks[publisher_id] = seq
        self._previous = mark
        return publisher_id, seq

    def refused(self, identity: tuple[str, int]) -> None:
        """The message the last ``check`` let through (``identity``) was refused after all: its publisher's mark
        is what it was before."""
        if self._previous is None:
            self.marks.pop(identity[0], None)
        else:
            self.marks[identity[0]] = self._previous

    def not_written(self, publisher_id: str, seq: int) -> None:
        """The message taken with ``seq`` was not journaled: lower the mark below it, so that a re-send is
        taken (later messages of the publisher still in flight may then be taken twice: a duplicate, never a
        loss)."""
        mark = self.marks.get(publisher_id)
        if mark is not None and mark >= seq:
            self.marks[publisher_id] = seq - 1

    def view(self, publisher_id: str) -> dict[str, int | str]:
        return {
            "publisher-id": publisher_id,
            "high-water": self.marks.get(publisher_id, -1),
            "duplicates": self.dropped[publisher_id],
        }
