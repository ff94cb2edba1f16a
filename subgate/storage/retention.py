"""Deleting journal rows past retention (``mapping.retention`` states the rule), one bounded step at a time.

Owns the query behind ``RetentionRun``, run by the journal writer between batches of messages: the step looks
at a window of journal sequences (so that a pass over a long journal is many short steps, and publishing never
waits long behind one) and deletes the rows in it that are old enough and that no queue or durable subscription
of their address still needs.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, delete, func, not_, or_, select

from subgate.engine.records import RetentionAnswer, RetentionRun
from subgate.storage.high_water import fold_deleted
from subgate.storage.models import Ack, AckCursor, JournalMessage, table_of
from subgate.storage.replay import last_at_or_before

_MESSAGES = table_of(JournalMessage)


def retain(conn: Connection, run: RetentionRun) -> RetentionAnswer:
    start, upto = run.after, run.upto
    if upto is None:  # the pass's first step: where the journal starts, and its last row old enough
        oldest = conn.execute(select(func.min(JournalMessage.id))).scalar() or 0
        if not oldest:
            return RetentionAnswer(0, run.after, run.after)
        upto = last_at_or_before(conn, run.cutoff_ms, oldest)
        start = max(start, oldest - 1)
    end = min(upto, start + run.window)
    if end <= start:
        return RetentionAnswer(0, upto, upto)
    accepted_above = (
        select(Ack.message_id)
        .where(Ack.cursor_id == AckCursor.id, Ack.message_id == JournalMessage.id)
        .correlate_except(Ack)
        .exists()
    )
    unaccepted = (
        select(AckCursor.id)
        .where(
            AckCursor.address == JournalMessage.address,
            AckCursor.low_water < JournalMessage.id,
            not_(accepted_above),
        )
        .correlate_except(AckCursor)
        .exists()
    )
    stale = and_(JournalMessage.durable.is_(False), JournalMessage.id <= run.stale_below)
    doomed = select(JournalMessage.id).where(
        JournalMessage.id > start, JournalMessage.id <= end, or_(stale, not_(unaccepted))
    )
    fold_deleted(conn, doomed)  # the publishers' marks outlive their rows (storage.high_water)
    deleted = conn.execute(delete(_MESSAGES).where(_MESSAGES.c.id.in_(doomed))).rowcount
    return RetentionAnswer(int(deleted or 0), end, upto)
