"""Applying a retention plan (``subgate pipeline retention``) to the store: ``subgate journal compact --plan``.

Owns the plan's check and the deletes. The plan names, per address, the journal sequence up to which every row
may go (computed by Spark from the positions at that moment) and those positions (every cursor: id, owner,
address, low-water mark). Positions only move forward, so a plan stays safe while they do; it is refused when
the store's positions changed in a way the plan did not see: a queue or durable subscription created since (it
may need the rows, a replay from the start of the journal for one), or a cursor whose low-water mark is now
below the plan's. The deletes run in bounded batches (at most ``batch`` rows of one address per transaction,
found on the ``(address, id)`` index), so a running server's journal writer waits at most one short batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, delete, select

from subgate.storage.errors import StoreError
from subgate.storage.high_water import fold_deleted
from subgate.storage.models import AckCursor, JournalMessage, table_of

PLAN_NAME = "subgate-journal-compaction"
_MESSAGES = table_of(JournalMessage)


class PlanRefused(StoreError):
    """The plan is malformed, or older than a change of the store's positions that it did not see."""


@dataclass(frozen=True, slots=True)
class Deletion:
    topic: str
    kind: str
    through: int


def parse_plan(plan: Mapping[str, Any]) -> tuple[dict[int, tuple[str, int]], list[Deletion]]:
    """The plan's cursors (id -> (owner, low-water)) and deletions; PlanRefused when it is not a plan."""
    if plan.get("plan") != PLAN_NAME or plan.get("version") != 1:
        raise PlanRefused("not a journal compaction plan (made by 'subgate pipeline retention --out DIR')")
    try:
        cursors = {int(c["id"]): (str(c["owner"]), int(c["low_water"])) for c in plan["cursors"]}
        deletions = [Deletion(str(d["topic"]), str(d["kind"]), int(d["through"])) for d in plan["delete"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanRefused(f"the plan is malformed: {exc!r}") from exc
    return cursors, deletions


def check_positions(engine: Engine, cursors: Mapping[int, tuple[str, int]]) -> None:
    """PlanRefused when the store has a cursor the plan did not see, or one set below the plan's mark."""
    with engine.connect() as conn:
        rows = conn.execute(select(AckCursor.id, AckCursor.owner, AckCursor.low_water)).all()
    for cursor_id, owner, low_water in rows:
        seen = cursors.get(cursor_id)
        if seen is None or seen[0] != owner:
            raise PlanRefused(
                f"the plan is older than the store's positions: '{owner}' (cursor {cursor_id}) was created after "
                "it; make a new plan"
            )
        if low_water < seen[1]:
            raise PlanRefused(f"the plan is older than the store's positions: '{owner}' moved back; make a new plan")


def compact(
    engine: Engine,
    plan: Mapping[str, Any],
    *,
    batch: int = 10_000,
    progress: Callable[[Deletion, int], None] | None = None,
) -> int:
    """Check the plan against the store, then delete what it names, ``batch`` sequences per transaction.
    Returns the rows deleted."""
    cursors, deletions = parse_plan(plan)
    check_positions(engine, cursors)
    total = 0
    for deletion in deletions:
        start = -1
        while start < deletion.through:
            with engine.begin() as conn:
                end = _batch_end(conn, deletion, start, batch)
                doomed = (
                    _MESSAGES.c.address == deletion.topic,
                    _MESSAGES.c.node_kind == deletion.kind,
                    _MESSAGES.c.id > start,
                    _MESSAGES.c.id <= end,
                )
                fold_deleted(conn, select(_MESSAGES.c.id).where(*doomed))  # marks outlive their rows
                deleted = int(conn.execute(delete(_MESSAGES).where(*doomed)).rowcount or 0)
            total += deleted
            if progress is not None and deleted:
                progress(deletion, deleted)
            start = end
    return total


def _batch_end(conn: Connection, deletion: Deletion, start: int, batch: int) -> int:
    """The sequence of the ``batch``-th row of the address above ``start`` (the ``(address, id)`` index), or the
    plan's bound when fewer are left."""
    nth = (
        select(JournalMessage.id)
        .where(
            JournalMessage.address == deletion.topic,
            JournalMessage.node_kind == deletion.kind,
            JournalMessage.id > start,
            JournalMessage.id <= deletion.through,
        )
        .order_by(JournalMessage.id)
        .offset(batch - 1)
        .limit(1)
    )
    found = conn.scalar(nth)
    return deletion.through if found is None else int(found)
