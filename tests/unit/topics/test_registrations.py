"""topics.registrations: remove-with-session conflicts, ref-counting on close, and the reconnection grace."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import PRECONDITION_FAILED
from subgate.topics.errors import RegistrationConflict, TopicPathError
from subgate.topics.registrations import Closure, PendingRemoval, Registration, RemovalRegistry


@pytest.fixture
def registry() -> RemovalRegistry[str]:
    return RemovalRegistry()


@pytest.mark.parametrize(
    ("existing", "new", "conflict"),
    [
        ("foo/bar/fred", "foo/bar", "foo/bar/fred"),  # seed 001's example: above is refused
        ("foo/bar/fred", "foo/bar/fred/qux", "foo/bar/fred"),  # and below
        ("foo/bar/fred", "foo", "foo/bar/fred"),
        ("foo", "foo/bar/fred/qux", "foo"),
        ("foo/bar/fred", "foo/bar/fred", None),  # the same path is allowed
        ("foo/bar/fred", "foo/bar/frederick", None),  # siblings by whole segments
        ("foo/bar/fred", "foo/baz", None),
        ("foo/bar/fred", "other", None),
    ],
)
@pytest.mark.parametrize("same_connection", [False, True])
def test_registration_conflicts(registry, existing, new, conflict, same_connection):
    registry.register(existing, "c1")
    connection = "c1" if same_connection else "c2"
    if conflict is None:
        assert registry.register(new, connection).branch == new
        return
    with pytest.raises(RegistrationConflict) as caught:
        registry.register(new, connection)
    assert caught.value.condition == PRECONDITION_FAILED
    assert (caught.value.branch, caught.value.existing) == (new, conflict)
    assert repr(conflict) in str(caught.value)
    assert registry.branches() == [existing]


def test_conflict_message_says_where(registry):
    registry.register("a/b", "c1")
    with pytest.raises(RegistrationConflict, match="exists below it"):
        registry.register("a", "c2")
    with pytest.raises(RegistrationConflict, match="exists above it"):
        registry.register("a/b/c", "c2")


@pytest.mark.parametrize("branch", ["", "/a", "a/"])
def test_invalid_branch(registry, branch):
    with pytest.raises(TopicPathError):
        registry.register(branch, "c1")


def test_close_removes_unshared_branches(registry):
    registry.register("a", "c1")
    registry.register("b/x", "c1")
    registry.register("c", "c2")
    assert registry.connection_closed("c1", now=0.0) == Closure(remove=("a", "b/x"))
    assert registry.branches() == ["c"]
    assert registry.connection_closed("c1", now=1.0) == Closure()  # nothing left to do


def test_close_is_ref_counted_across_connections(registry):
    for connection in ("c1", "c2", "c3"):
        registry.register("shared", connection)
    assert registry.connection_closed("c1", now=0.0).remove == ()
    assert registry.connection_closed("c3", now=0.0).remove == ()
    assert {r.connection for r in registry.registrations("shared")} == {"c2"}
    assert registry.connection_closed("c2", now=0.0).remove == ("shared",)
    assert registry.registrations("shared") == frozenset()


def test_two_registrations_of_one_connection_on_one_branch(registry):
    first = registry.register("a", "c1", name="link1")
    registry.register("a", "c1", name="link2")
    assert registry.deregister(first)
    assert registry.branches() == ["a"]
    assert registry.connection_closed("c1", now=0.0).remove == ("a",)


def test_registering_twice_is_idempotent(registry):
    first = registry.register("a", "c1", "container", "link")
    again = registry.register("a", "c1", "container", "link")
    assert first == again
    assert len(registry.registrations("a")) == 1
    assert registry.deregister(first)
    assert not registry.deregister(again)


def test_deregister_removes_nothing(registry):
    registration = registry.register("a", "c1")
    registry.register("b", "c1")
    assert registry.deregister(registration)
    assert registry.branches() == ["b"]
    assert registry.connection_closed("c1", now=0.0).remove == ("b",)  # 'a' was deregistered, not removed
    assert not registry.deregister(Registration("zzz", "c9"))
    assert not registry.deregister(Registration("b", "c1", name="other"))


def test_deregister_frees_the_branch_for_other_paths(registry):
    registration = registry.register("a/b", "c1")
    registry.deregister(registration)
    assert registry.register("a", "c2").branch == "a"


def test_lost_connection_waits_for_the_grace(registry):
    registry.register("a", "c1", "app-1", "link")
    registry.register("b", "c1", "app-1", "link2")
    closure = registry.connection_closed("c1", now=100.0, abrupt=True, grace=30.0)
    assert closure == Closure(pending=PendingRemoval("c1", 130.0, ("a", "b")))
    assert registry.pending() == [PendingRemoval("c1", 130.0, ("a", "b"))]
    assert registry.next_deadline() == 130.0
    assert registry.due(129.9) == ()
    assert registry.branches() == ["a", "b"]  # still registered inside the grace
    with pytest.raises(RegistrationConflict):
        registry.register("a/x", "c2")  # and still in the way
    assert registry.due(130.0) == ("a", "b")
    assert registry.pending() == []
    assert registry.next_deadline() is None
    assert registry.branches() == []


def test_reconnection_within_the_grace_takes_over(registry):
    registry.register("a", "c1", "app-1", "link-a")
    registry.register("b", "c1", "app-1", "link-b")
    registry.connection_closed("c1", now=0.0, abrupt=True, grace=10.0)
    taken = registry.register("a", "c2", "app-1", "link-a")
    assert registry.registrations("a") == frozenset({taken})
    assert registry.pending() == [PendingRemoval("c1", 10.0, ("b",))]
    assert registry.due(10.0) == ("b",)  # not re-attached in time
    assert registry.branches() == ["a"]
    assert registry.connection_closed("c2", now=20.0).remove == ("a",)


def test_full_take_over_ends_the_pending_removal(registry):
    registry.register("a", "c1", "app-1", "link")
    registry.connection_closed("c1", now=0.0, abrupt=True, grace=10.0)
    registry.register("a", "c2", "app-1", "link")
    assert registry.pending() == []
    assert registry.due(50.0) == ()
    assert registry.branches() == ["a"]


@pytest.mark.parametrize(
    ("container_id", "name"),
    [
        ("app-2", "link"),  # another client
        ("app-1", "other-link"),  # another link
        (None, "link"),  # a connection without a container-id is never recognised
    ],
)
def test_take_over_needs_the_same_container_and_link(registry, container_id, name):
    registry.register("a", "c1", "app-1", "link")
    registry.connection_closed("c1", now=0.0, abrupt=True, grace=10.0)
    registry.register("a", "c2", container_id, name)
    assert len(registry.registrations("a")) == 2
    assert registry.due(10.0) == ()  # c2 still holds 'a'
    assert registry.connection_closed("c2", now=11.0).remove == ("a",)


def test_lost_connection_counts_as_a_holder(registry):
    registry.register("a", "c1")
    registry.register("a", "c2")
    registry.connection_closed("c1", now=0.0, abrupt=True, grace=5.0)
    assert registry.connection_closed("c2", now=1.0).remove == ()  # c1 is not closed yet (seed 001's note)
    assert registry.due(5.0) == ("a",)


def test_no_grace_means_closed_at_once(registry):
    registry.register("a", "c1", "app-1")
    assert registry.connection_closed("c1", now=0.0, abrupt=True, grace=0.0) == Closure(remove=("a",))
    assert registry.pending() == []


def test_due_handles_several_deadlines(registry):
    registry.register("a", "c1")
    registry.register("b", "c2")
    registry.connection_closed("c1", now=0.0, abrupt=True, grace=5.0)
    registry.connection_closed("c2", now=2.0, abrupt=True, grace=5.0)
    assert registry.next_deadline() == 5.0
    assert registry.due(6.0) == ("a",)
    assert registry.next_deadline() == 7.0
    assert registry.due(100.0) == ("b",)


def test_a_key_lost_again_keeps_the_later_deadline(registry):
    registry.register("a", "c1")
    registry.connection_closed("c1", now=0.0, abrupt=True, grace=5.0)
    registry.register("b", "c1")  # the caller reused the key
    closure = registry.connection_closed("c1", now=3.0, abrupt=True, grace=5.0)
    assert closure.pending == PendingRemoval("c1", 8.0, ("a", "b"))
    assert registry.due(8.0) == ("a", "b")
