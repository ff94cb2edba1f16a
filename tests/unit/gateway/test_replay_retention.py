"""Placing a replay from the journal's answer (gateway.replay.place) and the steps of a retention pass
(gateway.retention.Retention) with a fake journal and a fake scheduler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from subgate.engine.records import ReplayAnswer, RetentionAnswer, RetentionRun
from subgate.gateway.replay import Placed, place
from subgate.gateway.retention import STEP_WINDOW, Retention
from subgate.mapping.bookmarks import ReplayPoint, parse_replay
from subgate.mapping.errors import INVALID_FIELD, Refused


def answer(found: dict[tuple[str, int], int] | None = None, after: int = 0) -> ReplayAnswer:
    return ReplayAnswer(found or {}, after, oldest=1, rows=7)


def test_epoch_time_and_bookmarks_are_placed_from_the_answer():
    assert place(parse_replay("0"), answer()) == Placed(ReplayPoint(0), 7)
    assert place(parse_replay("20261124T000000"), answer(after=41)) == Placed(ReplayPoint(41), 7)
    listed = place(parse_replay("a|2|,b|1|"), answer({("a", 2): 30, ("b", 1): 12}))
    assert listed == Placed(ReplayPoint(12, frozenset({30})), 7)


def test_a_bookmark_missing_from_the_answer_is_refused():
    with pytest.raises(Refused) as caught:
        place(parse_replay("a|2|"), answer())
    assert caught.value.condition == INVALID_FIELD


class FakeJournal:
    def __init__(self) -> None:
        self.runs: list[tuple[RetentionRun, Callable[[Any], None]]] = []

    def submit_read(self, run: RetentionRun, token: Callable[[Any], None]) -> None:
        self.runs.append((run, token))


def test_a_pass_steps_through_the_journal_then_waits_for_the_next():
    journal = FakeJournal()
    timers: list[tuple[float, Callable[[], None]]] = []
    retention = Retention("1h", 30.0, journal, lambda delay, fn: timers.append((delay, fn)), stale_below=5)  # type: ignore[arg-type]
    retention.start()
    assert [delay for delay, _ in timers] == [30.0]
    timers.pop()[1]()  # the pass begins
    run, token = journal.runs.pop()
    assert (run.after, run.window, run.stale_below, run.upto) == (0, STEP_WINDOW, 5, None)
    token(RetentionAnswer(deleted=3, reached=20_000, upto=50_000))
    timers.pop()[1]()  # the next step at once
    run, token = journal.runs.pop()
    assert (run.after, run.upto) == (20_000, 50_000)  # the first step's finding, not searched again
    token(RetentionAnswer(deleted=2, reached=50_000, upto=50_000))
    assert retention.deleted == 5 and retention.passes == 1
    assert [delay for delay, _ in timers] == [30.0]  # the next pass
    token(RuntimeError("store gone"))  # a failed step waits for the next pass too
    assert retention.passes == 2
    retention.stop()
    for _, fn in timers:
        fn()
    assert journal.runs == []
