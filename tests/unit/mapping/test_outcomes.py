"""mapping.outcomes: every row of the outcome table (mapping doc §5.7) as one parametrized case."""

from __future__ import annotations

import dataclasses

import pytest

from subgate.mapping.outcomes import (
    ACCEPTED,
    MODIFIED,
    OUTCOMES,
    REJECTED,
    RELEASED,
    Settlement,
    settle_outcome,
    settle_unsettled,
)

REMOVE = Settlement(remove=True)
DEAD = Settlement(remove=True, dead_letter=True)
BACK = Settlement(remove=False)
BACK_FAILED = Settlement(remove=False, failed=True)
BACK_ELSEWHERE = Settlement(remove=False, exclude_consumer=True)
BACK_FAILED_ELSEWHERE = Settlement(remove=False, failed=True, exclude_consumer=True)


@pytest.mark.parametrize(
    ("outcome", "failed", "undeliverable_here", "expected"),
    [
        (ACCEPTED, False, False, REMOVE),
        (REJECTED, False, False, DEAD),
        (RELEASED, False, False, BACK),
        (MODIFIED, False, False, BACK),  # modified{} with neither flag: like released
        (MODIFIED, True, False, BACK_FAILED),
        (MODIFIED, False, True, BACK_ELSEWHERE),
        (MODIFIED, True, True, BACK_FAILED_ELSEWHERE),
        (None, False, False, BACK),  # no outcome at all: like released
        ("received", False, False, BACK),  # not a terminal outcome: the message goes back
        # the modified flags mean nothing for the other outcomes
        (ACCEPTED, True, True, REMOVE),
        (REJECTED, True, True, DEAD),
        (RELEASED, True, True, BACK),
        (None, True, True, BACK),
    ],
)
def test_settle_outcome(outcome, failed, undeliverable_here, expected):
    assert settle_outcome(outcome, failed=failed, undeliverable_here=undeliverable_here) == expected


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [(ACCEPTED, REMOVE), (REJECTED, DEAD), (RELEASED, BACK), (MODIFIED, BACK), (None, BACK)],
)
def test_settle_outcome_defaults_to_no_flags(outcome, expected):
    assert settle_outcome(outcome) == expected


@pytest.mark.parametrize(
    ("abrupt", "expected"),
    [
        (False, BACK),  # orderly detach: released, delivery-count unchanged
        (True, BACK_FAILED),  # abrupt loss: the default outcome modified{delivery-failed}, count + 1
    ],
)
def test_settle_unsettled(abrupt, expected):
    assert settle_unsettled(abrupt) == expected


def test_outcome_names_are_the_amqp_names():
    assert (ACCEPTED, REJECTED, RELEASED, MODIFIED) == ("accepted", "rejected", "released", "modified")
    assert set(OUTCOMES) == {ACCEPTED, REJECTED, RELEASED}


def test_settlement_defaults_and_immutability():
    settlement = Settlement(remove=False)
    assert (settlement.dead_letter, settlement.failed, settlement.exclude_consumer) == (False, False, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settlement.remove = True  # type: ignore[misc]
