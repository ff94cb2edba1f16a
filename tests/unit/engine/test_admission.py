"""engine.admission: the connection limits and the per-connection deadlines, without sockets."""

from __future__ import annotations

import pytest

from subgate.engine.admission import REFUSALS_IN_FLIGHT, Admission, ChannelClock, ConnectionLimits, Verdict

LIMITS = ConnectionLimits(max_connections=3, max_per_address=2, handshake_timeout=10, frame_timeout=30, close_grace=5)


def test_admits_up_to_the_per_address_limit_then_refuses_with_the_address():
    admission = Admission(LIMITS)
    assert admission.decide("10.0.0.1")[0] is Verdict.ADMIT
    assert admission.decide("10.0.0.1")[0] is Verdict.ADMIT
    verdict, reason = admission.decide("10.0.0.1")
    assert verdict is Verdict.REFUSE and "10.0.0.1" in reason and "max-connections-per-address 2" in reason
    assert admission.decide("10.0.0.2")[0] is Verdict.ADMIT


def test_the_total_limit_counts_every_address():
    admission = Admission(LIMITS)
    for address in ("a", "b", "c"):
        assert admission.decide(address)[0] is Verdict.ADMIT
    verdict, reason = admission.decide("d")
    assert verdict is Verdict.REFUSE and "max-connections 3" in reason


def test_released_connections_free_their_slots():
    admission = Admission(LIMITS)
    admission.decide("a")
    admission.decide("a")
    admission.release("a", Verdict.ADMIT)
    assert admission.decide("a")[0] is Verdict.ADMIT
    assert admission.open == 2


def test_refusals_in_flight_are_bounded_then_dropped():
    admission = Admission(ConnectionLimits(max_connections=1))
    admission.decide("a")
    for _ in range(REFUSALS_IN_FLIGHT):
        assert admission.decide("b")[0] is Verdict.REFUSE
    assert admission.decide("b")[0] is Verdict.DROP
    admission.release("b", Verdict.REFUSE)
    assert admission.decide("b")[0] is Verdict.REFUSE
    assert admission.open == 1


def test_a_refused_connection_ending_does_not_free_an_open_slot():
    admission = Admission(LIMITS)
    admission.decide("a")
    admission.decide("a")
    admission.decide("a")  # refused
    admission.release("a", Verdict.REFUSE)
    assert admission.decide("a")[0] is Verdict.REFUSE


def test_handshake_deadline_applies_until_the_open_arrives():
    clock = ChannelClock(now=100.0)
    assert clock.overdue(109.0, LIMITS, frames_in=0, closing=False) is None
    assert clock.overdue(110.5, LIMITS, frames_in=0, closing=False) == "handshake not finished within 10s"
    clock.opened = True
    assert clock.overdue(500.0, LIMITS, frames_in=0, closing=False) is None


def test_a_frame_that_keeps_growing_but_never_completes_is_overdue():
    clock = ChannelClock(now=0.0)
    clock.opened = True
    clock.bytes_in = 100
    assert clock.overdue(1.0, LIMITS, frames_in=2, closing=False) is None  # whole frames: the mark moves
    for second in range(2, 32):
        clock.bytes_in += 1  # one byte a second, never a whole frame
        assert clock.overdue(float(second), LIMITS, frames_in=2, closing=False) is None
    clock.bytes_in += 1
    assert clock.overdue(31.5, LIMITS, frames_in=2, closing=False) == "frame not completed within 30s"


def test_whole_frames_and_silence_are_never_frame_overdue():
    clock = ChannelClock(now=0.0)
    clock.opened = True
    for second in range(1, 200):
        clock.bytes_in += 10
        assert clock.overdue(float(second), LIMITS, frames_in=second, closing=False) is None
    assert clock.overdue(1000.0, LIMITS, frames_in=199, closing=False) is None  # idle: the idle time-out's job


@pytest.mark.parametrize(("answered", "expected"), [(True, None), (False, "no close from the peer within 5s of ours")])
def test_close_grace(answered, expected):
    clock = ChannelClock(now=0.0)
    clock.opened = True
    assert clock.overdue(1.0, LIMITS, frames_in=0, closing=True) is None
    assert clock.overdue(6.5, LIMITS, frames_in=0, closing=not answered) == expected


def test_tick_interval_keeps_deadlines_within_a_quarter():
    assert ConnectionLimits().tick_interval() == 2.5
    assert ConnectionLimits(handshake_timeout=1, frame_timeout=1).tick_interval() == 0.25
