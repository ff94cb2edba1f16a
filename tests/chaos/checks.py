"""The promises the crash harness checks, as pure functions of plain data (no I/O, no clocks).

Each returns a list of violations (strings); an empty list means the promise held. The window: an accept or a
failed delivery settled by a consumer reaches the store in the journal writer's next group commit, documented as
"within one second" (docs/bookmarks.md, "Positions"), so one settled less than ``window`` seconds before a kill
may be forgotten by the crash. Everything settled earlier must be remembered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Delivery:
    """One message a consumer got after a restart: its key (the body) and its delivery-count."""

    key: str
    count: int


@dataclass
class Settled:
    """What one consumer endpoint did to one key: when it accepted it, when it failed it (modified-failed),
    and the delivery-count the server is known to have persisted (``floor``)."""

    accepted_at: float | None = None
    failed_at: list[float] = field(default_factory=list)
    floor: int = 0

    @property
    def accepted(self) -> bool:
        return self.accepted_at is not None


def check_drain(
    expected: Iterable[str],
    settled: Mapping[str, Settled],
    forbidden: Iterable[str],
    deliveries: Sequence[Delivery],
    kill_time: float,
    window: float,
) -> list[str]:
    """One consumer's first pass after a restart against what the ledger says.

    ``expected``: keys confirmed to the publishers for this endpoint (and committed transactions' keys);
    ``forbidden``: keys that must never arrive (rolled-back or never-committed transactions)."""
    safe_before = kill_time - window
    received = Counter(d.key for d in deliveries)
    problems = [f"{key} delivered {n} times in one pass" for key, n in sorted(received.items()) if n > 1]
    for key in sorted(set(expected) - set(received)):
        state = settled.get(key)
        if state is None or state.accepted_at is None:
            problems.append(f"{key} lost: confirmed to its publisher, never accepted, not redelivered")
    forbidden_keys = set(forbidden)
    for delivery in deliveries:
        state = settled.get(delivery.key, Settled())
        if delivery.key in forbidden_keys:
            problems.append(f"{delivery.key} delivered but its transaction was not committed")
        if state.accepted_at is not None and state.accepted_at < safe_before:
            problems.append(f"{delivery.key} redelivered {kill_time - state.accepted_at:.2f}s after its accept")
        problems.extend(_count_problems(delivery, state, safe_before))
    return problems


def _count_problems(delivery: Delivery, state: Settled, safe_before: float) -> list[str]:
    lowest = state.floor + sum(1 for t in state.failed_at if t < safe_before)
    highest = state.floor + len(state.failed_at)
    if delivery.count < lowest:
        return [f"{delivery.key} delivery-count {delivery.count}, below the {lowest} failures settled before"]
    if delivery.count > highest:
        return [f"{delivery.key} delivery-count {delivery.count}, above the {highest} failures ever settled"]
    return []


def in_window_redeliveries(settled: Mapping[str, Settled], deliveries: Sequence[Delivery]) -> list[str]:
    """Keys redelivered although accepted (inside the window, else ``check_drain`` reported them)."""
    return [d.key for d in deliveries if settled.get(d.key, Settled()).accepted_at is not None]


def resolve_in_doubt(keys: Sequence[str], ever_received: Iterable[str]) -> tuple[bool, list[str]]:
    """A transaction whose commit got no answer before the kill: all of its messages or none.

    Returns (committed, violations): committed when any of its keys has been received."""
    seen = set(ever_received) & set(keys)
    if seen and len(seen) != len(set(keys)):
        missing = sorted(set(keys) - seen)
        return True, [f"transaction half there: {sorted(seen)} arrived, {missing} did not"]
    return bool(seen), []


def compare_snapshot(name: str, before: Iterable[tuple[object, ...]], after: Iterable[tuple[object, ...]]) -> list[str]:
    """Rows (users, grants, subscriptions, registrations) that must come through a crash unchanged."""
    gone, new = set(before) - set(after), set(after) - set(before)
    problems = [f"{name}: row lost {row}" for row in sorted(gone, key=repr)]
    return problems + [f"{name}: row appeared {row}" for row in sorted(new, key=repr)]
