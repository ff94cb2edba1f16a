"""The failed-login rule of engine.login_throttle: free failures, doubling delays, the ceiling, the window, and
counting per address and per user name."""

from __future__ import annotations

import pytest

from subgate.engine.login_throttle import FailureCounts, LoginThrottle, ThrottleRule

RULE = ThrottleRule(free=3, base=0.5, ceiling=4.0, window=60.0)


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(0, 0.0), (1, 0.0), (3, 0.0), (4, 0.5), (5, 1.0), (6, 2.0), (7, 4.0), (8, 4.0), (10**6, 4.0)],
)
def test_delay_doubles_after_the_free_failures_up_to_the_ceiling(failures, delay):
    assert RULE.delay(failures) == delay


def test_no_delay_when_the_base_is_zero():
    assert ThrottleRule(free=0, base=0.0).delay(100) == 0.0


def test_failures_count_per_address_and_per_user_name():
    throttle = LoginThrottle(RULE)
    delays = [throttle.failed("10.0.0.1", "bob", now=float(i)).delay for i in range(6)]
    assert delays == [0.0, 0.0, 0.0, 0.5, 1.0, 2.0]
    # another address, another user: its own counts
    assert throttle.failed("10.0.0.2", "carol", now=6.0) == FailureCounts(1, 1, 0.0)
    # bob from another address: the user name's count applies
    assert throttle.failed("10.0.0.3", "bob", now=7.0) == FailureCounts(1, 7, 4.0)
    # anything from the first address, whatever the user: the address's count applies
    assert throttle.failed("10.0.0.1", "dave", now=8.0) == FailureCounts(7, 1, 4.0)
    assert throttle.failed("10.0.0.1", None, now=9.0) == FailureCounts(8, 0, 4.0)


def test_a_success_clears_the_user_name_but_not_the_address():
    throttle = LoginThrottle(RULE)
    for i in range(5):
        throttle.failed("10.0.0.1", "bob", now=float(i))
    throttle.succeeded("bob")
    assert throttle.failures("10.0.0.9", "bob", now=6.0) == 0
    assert throttle.failures("10.0.0.1", None, now=6.0) == 5


def test_failures_are_forgotten_after_the_window():
    throttle = LoginThrottle(RULE)
    for i in range(5):
        throttle.failed("10.0.0.1", "bob", now=float(i))
    assert throttle.failures("10.0.0.1", "bob", now=4.0 + 60.0) == 5
    assert throttle.failures("10.0.0.1", "bob", now=4.0 + 60.1) == 0
    assert throttle.failed("10.0.0.1", "bob", now=100.0) == FailureCounts(1, 1, 0.0)


def test_memory_is_bounded_and_the_least_recently_failed_go_first():
    throttle = LoginThrottle(RULE, max_keys=10)
    for i in range(100):
        throttle.failed(f"10.0.{i}.1", None, now=float(i))
    assert len(throttle) == 10
    assert throttle.failures("10.0.99.1", None, now=100.0) == 1
    assert throttle.failures("10.0.0.1", None, now=100.0) == 0


def test_long_user_names_share_one_key():
    throttle = LoginThrottle(RULE)
    throttle.failed("a", "x" * 300, now=0.0)
    assert throttle.failures("b", "x" * 256 + "y" * 10, now=1.0) == 1
