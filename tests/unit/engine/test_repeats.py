"""The rule that holds back repeated log lines of one kind (engine.repeats) and the logging filter that applies
it (cli.log_repeats), with a fake clock."""

from __future__ import annotations

import logging

import pytest

from subgate.cli.log_repeats import RepeatFilter
from subgate.engine.repeats import REFUSAL, RepeatLimit, Summary, refused_as


def test_the_first_lines_of_a_window_pass_and_the_rest_are_summarized_when_it_ends():
    limit = RepeatLimit(burst=3, interval=10.0)
    admitted = [limit.admit("handshake-deadline", 100.0 + i * 0.001)[0] for i in range(3000)]
    assert admitted[:3] == [True] * 3 and not any(admitted[3:])
    assert limit.next_due() == 110.0
    assert limit.due(109.9) == []
    assert limit.due(110.0) == [Summary("handshake-deadline", 2997, 10.0)]
    assert limit.next_due() is None and limit.due(1e9) == []  # said once


def test_the_next_line_after_a_window_opens_a_new_one_and_brings_the_summary():
    limit = RepeatLimit(burst=1, interval=10.0)
    assert limit.admit("auth-failure", 0.0) == (True, None)
    assert limit.admit("auth-failure", 5.0) == (False, None)
    assert limit.admit("auth-failure", 10.0) == (True, Summary("auth-failure", 1, 10.0))
    assert limit.admit("auth-failure", 19.0) == (False, None)


def test_kinds_are_counted_apart_and_a_window_that_left_nothing_out_ends_quietly():
    limit = RepeatLimit(burst=2, interval=1.0)
    for _ in range(2):
        assert limit.admit("a", 0.0)[0] and limit.admit("b", 0.0)[0]
    assert limit.admit("a", 0.5) == (False, None)
    assert limit.next_due() == 1.0
    assert limit.due(2.0) == [Summary("a", 1, 1.0)]  # "b" left nothing out: no summary


def test_the_summary_text_carries_the_count_and_the_window():
    assert Summary("handshake-deadline", 2996, 10.0).text() == (
        "… and 2,996 more handshake-deadline refusals in the last 10 s"
    )


@pytest.mark.parametrize("burst, interval", [(-1, 1.0), (1, 0.0)])
def test_a_limit_needs_sane_figures(burst, interval):
    with pytest.raises(ValueError):
        RepeatLimit(burst, interval)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(kind: str | None) -> logging.LogRecord:
    record = logging.LogRecord("subgate.io", logging.INFO, __file__, 1, "closing connection", (), None)
    if kind is not None:
        setattr(record, REFUSAL, kind)
    return record


def test_the_filter_passes_other_records_holds_back_refusals_and_writes_summaries(caplog):
    clock = _Clock()
    repeats = RepeatFilter(RepeatLimit(burst=2, interval=10.0), clock)
    try:
        caplog.set_level(logging.INFO, "subgate.refusals")
        assert all(repeats.filter(_record(None)) for _ in range(50))  # not a refusal: untouched
        passed = [repeats.filter(_record("handshake-deadline")) for _ in range(30)]
        assert passed == [True, True] + [False] * 28
        clock.now = 10.0
        repeats.flush()
        (summary,) = [r for r in caplog.records if r.name == "subgate.refusals"]
        assert summary.getMessage() == "… and 28 more handshake-deadline refusals in the last 10 s"
        assert (summary.event, summary.refusal_kind, summary.left_out) == (
            "refusals-summarized",
            "handshake-deadline",
            28,
        )  # type: ignore[attr-defined]
        assert not hasattr(summary, REFUSAL)  # a summary is never held back itself
    finally:
        repeats.close()


def test_closing_the_filter_writes_the_windows_still_open(caplog):
    repeats = RepeatFilter(RepeatLimit(burst=0, interval=3600.0), _Clock())
    caplog.set_level(logging.INFO, "subgate.refusals")
    assert not repeats.filter(_record("auth-failure"))
    repeats.close()
    assert [r.getMessage() for r in caplog.records] == ["… and 1 more auth-failure refusals in the last 3600 s"]


def test_refused_as_names_the_kind_in_extra():
    assert refused_as("attach-refused") == {REFUSAL: "attach-refused"}
