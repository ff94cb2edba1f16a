"""Remove-with-session: which branches to remove when the connections that asked for it go away (seed 001).

Owns the registrations and the rules; knows nothing of links or timers. ``K`` is whatever identifies a
connection to the caller. Time is a number the caller passes in (seconds on any monotonic clock).

Rules (seed 001, design §3 "Remove-with-session"; a Diffusion session is an AMQP connection here):
1. A registration names a branch (a topic path) and covers it and every topic below it.
2. A registration strictly above or below any existing registration, from any connection including the same
   one, is refused: ``RegistrationConflict`` (``amqp:precondition-failed``). Registrations on the same path,
   from one connection or several, are allowed and counted.
3. ``deregister`` (detach with closed=true) drops one registration and removes nothing.
4. When a connection closes, each of its registrations is dropped; a branch left with no registration is
   returned for removal. A branch still held by another connection (open, or lost and inside its grace) stays.
5. A connection lost without a close frame keeps its registrations for ``grace`` seconds: they still count for
   rules 2 and 4. A new connection with the same container-id that registers the same branch under the same
   link name within the grace takes the registration over. ``due(now)`` ends the grace of every lost connection
   whose deadline has passed and applies rule 4 to what is left. A grace of zero or less closes at once.

Decisions: registering an identical registration twice is idempotent (one registration); a take-over needs a
container-id (a connection without one cannot be recognised); removals are returned sorted, each branch once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from subgate.topics.errors import RegistrationConflict
from subgate.topics.paths import parent, split_path
from subgate.topics.tree import TopicTree

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Registration(Generic[K]):
    """One remove-with-session request: a branch, the connection holding it and how to recognise it again."""

    branch: str
    connection: K
    container_id: str | None = None
    name: str | None = None  # the link name; with the container-id it identifies a take-over


@dataclass(frozen=True)
class PendingRemoval(Generic[K]):
    """A lost connection's registrations, kept until ``deadline`` unless taken over before then."""

    connection: K
    deadline: float
    branches: tuple[str, ...]


@dataclass(frozen=True)
class Closure(Generic[K]):
    """What a connection's end means: branches to remove now, or a pending removal to check at its deadline."""

    remove: tuple[str, ...] = ()
    pending: PendingRemoval[K] | None = None


@dataclass
class _Lost(Generic[K]):
    deadline: float
    registrations: set[Registration[K]] = field(default_factory=set)


class RemovalRegistry(Generic[K]):
    """Remove-with-session registrations by branch and by connection."""

    def __init__(self) -> None:
        self._branches: TopicTree[set[Registration[K]]] = TopicTree()
        self._live: dict[K, set[Registration[K]]] = {}
        self._lost: dict[K, _Lost[K]] = {}

    def register(
        self, branch: str, connection: K, container_id: str | None = None, name: str | None = None
    ) -> Registration[K]:
        """Register removal of ``branch`` when ``connection`` ends.

        Raises:
            TopicPathError: the branch is not a valid topic path.
            RegistrationConflict: a registration exists strictly above or below ``branch``.
        """
        split_path(branch)
        self._check_conflict(branch)
        registration = Registration(branch, connection, container_id, name)
        self._take_over(registration)
        self._branches.add(branch, set())
        holders = self._branches.get(branch)
        assert holders is not None
        holders.add(registration)
        self._live.setdefault(connection, set()).add(registration)
        return registration

    def deregister(self, registration: Registration[K]) -> bool:
        """Drop one registration without removing anything. Returns False if it was not registered."""
        held = self._live.get(registration.connection)
        if held is None or registration not in held:
            return False
        held.discard(registration)
        if not held:
            del self._live[registration.connection]
        self._release([registration])
        return True

    def connection_closed(self, connection: K, now: float, abrupt: bool = False, grace: float = 0.0) -> Closure[K]:
        """A connection ended: with a close frame (``abrupt=False``) or lost (``abrupt=True``).

        Returns:
            ``Closure.remove``: branches nobody holds any more, to remove now; or, for a lost connection with a
            positive grace, ``Closure.pending`` with the deadline at which to call ``due``.
        """
        held = self._live.pop(connection, set())
        if not held:
            return Closure()
        if abrupt and grace > 0:
            lost = self._lost.setdefault(connection, _Lost(now + grace))
            lost.deadline = max(lost.deadline, now + grace)
            lost.registrations |= held
            branches = tuple(sorted({registration.branch for registration in lost.registrations}))
            return Closure(pending=PendingRemoval(connection, lost.deadline, branches))
        return Closure(remove=self._release(held))

    def due(self, now: float) -> tuple[str, ...]:
        """End every grace whose deadline is at or before ``now``. Returns the branches to remove now."""
        expired = [connection for connection, lost in self._lost.items() if lost.deadline <= now]
        released: list[Registration[K]] = []
        for connection in expired:
            released.extend(self._lost.pop(connection).registrations)
        return self._release(released)

    def next_deadline(self) -> float | None:
        """The earliest grace deadline still running, for the caller's timer; None when no connection is lost."""
        return min((lost.deadline for lost in self._lost.values()), default=None)

    def registrations(self, branch: str) -> frozenset[Registration[K]]:
        """Every registration on exactly ``branch``, live or within a grace."""
        if branch not in self._branches:
            return frozenset()
        holders = self._branches.get(branch)
        assert holders is not None
        return frozenset(holders)

    def branches(self) -> list[str]:
        """Every branch with at least one registration."""
        return list(self._branches.paths())

    def pending(self) -> list[PendingRemoval[K]]:
        """The lost connections still inside their grace."""
        return [
            PendingRemoval(connection, lost.deadline, tuple(sorted({r.branch for r in lost.registrations})))
            for connection, lost in self._lost.items()
        ]

    def _check_conflict(self, branch: str) -> None:
        above = self._branches.closest(parent(branch))
        if above is not None:
            raise RegistrationConflict(branch, above)
        below = next((path for path in self._branches.paths(branch) if path != branch), None)
        if below is not None:
            raise RegistrationConflict(branch, below)

    def _take_over(self, registration: Registration[K]) -> None:
        """A reconnecting client re-registering within the grace replaces its lost registration."""
        if registration.container_id is None:
            return
        for connection, lost in self._lost.items():
            for old in lost.registrations:
                if (old.branch, old.container_id, old.name) == (
                    registration.branch,
                    registration.container_id,
                    registration.name,
                ):
                    lost.registrations.discard(old)
                    if not lost.registrations:
                        del self._lost[connection]
                    self._release([old])
                    return

    def _release(self, registrations: Iterable[Registration[K]]) -> tuple[str, ...]:
        """Drop registrations; return, sorted, the branches this left without any."""
        emptied: set[str] = set()
        for registration in registrations:
            holders = self._branches.get(registration.branch)
            assert holders is not None
            holders.discard(registration)
            if not holders:
                self._branches.remove(registration.branch)
                emptied.add(registration.branch)
        return tuple(sorted(emptied))
