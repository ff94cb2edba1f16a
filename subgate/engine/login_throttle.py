"""Slowing down password guessing: failed logins counted per remote address and per user name, and the rule for
how long the answer to a failure is held back. Rules and counters only (no I/O, no timers: ``gateway.sasl_phase``
holds the answer with the reactor's timers and asks this module how long).

The rule (``ThrottleRule``; docs/security.md, "Failed logins"):

- A *key* is an address or a user name. Its failures count until ``window`` seconds pass without a new one; a
  successful login clears its user name's count (not its address's).
- The answer to a failed login whose address or user name has ``n`` failures, this one included (the larger of
  the two counts), is held back ``delay(n)`` seconds: nothing for the first ``free`` failures, then ``base``
  seconds, doubling with each further failure, at most ``ceiling``. A successful login is never held back, so a
  client with the right password is not slowed by somebody else's failures, even from the same address.
- At most ``max_keys`` keys are remembered; past that the least recently failed are forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

_USER_CUT = 256  # characters of a user name kept as its key


@dataclass(frozen=True)
class ThrottleRule:
    free: int = 3
    base: float = 1.0
    ceiling: float = 4.0
    window: float = 900.0

    def delay(self, failures: int) -> float:
        """Seconds the answer to a failure is held back when its address or user name has ``failures`` failures
        (this one included)."""
        if failures <= self.free or self.base <= 0:
            return 0.0
        return min(self.ceiling, self.base * 2.0 ** min(failures - self.free - 1, 64))


@dataclass(frozen=True)
class FailureCounts:
    """After a failure: the counts of its address and user name (0: none given), and how long its answer waits."""

    address: int
    user: int
    delay: float


class _Key:
    __slots__ = ("failures", "last")

    def __init__(self) -> None:
        self.failures = 0
        self.last = 0.0


class LoginThrottle:
    """The counters of every address and user name that failed lately (see the module docstring)."""

    def __init__(self, rule: ThrottleRule | None = None, max_keys: int = 100_000) -> None:
        self.rule = rule or ThrottleRule()
        self._max_keys = max_keys
        self._keys: OrderedDict[tuple[str, str], _Key] = OrderedDict()

    def failed(self, address: str, user: str | None, now: float) -> FailureCounts:
        """Count a failed login of ``address`` (and of ``user`` when it gave one)."""
        counts = []
        for key in self._keys_of(address, user):
            failures = self._failures(key, now) + 1
            record = self._keys.pop(key, None) or _Key()
            record.failures, record.last = failures, now
            self._keys[key] = record  # the most recently failed last
            counts.append(failures)
        while len(self._keys) > self._max_keys:
            self._keys.popitem(last=False)
        user_count = counts[1] if len(counts) > 1 else 0
        return FailureCounts(counts[0], user_count, self.rule.delay(max(counts)))

    def succeeded(self, user: str | None) -> None:
        """A login as ``user`` succeeded: its user name's failures are forgotten."""
        if user:
            self._keys.pop(("user", user[:_USER_CUT]), None)

    def failures(self, address: str, user: str | None, now: float) -> int:
        """The larger count of ``address`` and ``user`` now, before any further failure."""
        return max(self._failures(key, now) for key in self._keys_of(address, user))

    def __len__(self) -> int:
        return len(self._keys)

    def _keys_of(self, address: str, user: str | None) -> list[tuple[str, str]]:
        keys = [("address", address)]
        if user:
            keys.append(("user", user[:_USER_CUT]))
        return keys

    def _failures(self, key: tuple[str, str], now: float) -> int:
        record = self._keys.get(key)
        if record is None or now - record.last > self.rule.window:
            return 0
        return record.failures
