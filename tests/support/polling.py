"""Bounded polling for tests that wait on another process: one way to wait, always with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition", interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy and return that; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout}s (last: {value!r})")
        time.sleep(interval)


def until(condition: Callable[[], Any], timeout: float = 10.0) -> bool:
    """Whether ``condition()`` became true within ``timeout`` seconds (for asserting that it did *not*)."""
    try:
        eventually(condition, timeout)
    except AssertionError:
        return False
    return True
