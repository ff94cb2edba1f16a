"""gateway.topic_control with stand-in links, a fake clock and a fake timer list: the grace and handler-timeout
logic without sockets (the socket-level behaviour is tests/e2e/test_remove_with_session.py and
test_missing_topics.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from proton import Delivery, Link, Message

from subgate.gateway.topic_control import HANDLER_PREFIX, REMOVAL_PREFIX, TopicControl, handler_path, removal_branch
from subgate.mapping.errors import Refused
from subgate.topics import parse_selector


class FakeLink:
    def __init__(self, name: str = "l", credit: int = 10, settled: bool = False) -> None:
        self.name = name
        self.credit = credit
        self.remote_snd_settle_mode = Link.SND_SETTLED if settled else Link.SND_UNSETTLED
        self.sent: list[tuple[str, bytes]] = []
        self._tag = ""

    def delivery(self, tag: str) -> None:
        self._tag = tag

    def send(self, body: bytes) -> None:
        self.sent.append((self._tag, body))
        self.credit -= 1

    def advance(self) -> None:
        pass


class FakeDelivery:
    def __init__(self, tag: str, state: int) -> None:
        self.tag = tag
        self.remote_state = state
        self.settled = True
        self.locally_settled = False

    def settle(self) -> None:
        self.locally_settled = True


class Harness:
    def __init__(self, reconnect: float = 5.0, handler_timeout: float = 3.0) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.removed: list[str] = []
        self.control = TopicControl(
            "srv", reconnect, handler_timeout, self.schedule, self.removed.append, clock=lambda: self.now
        )
        self.outcomes: list[str] = []

    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((self.now + delay, callback))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, callback in due:
            callback()

    def hold(self, expression: str, conn: object = None):
        conn = conn or Conn("user")
        return self.control.hold(
            FakeLink("sub"),
            conn,
            parse_selector(expression),
            "subscribe",
            resume=lambda: self.outcomes.append("proceed"),
            cancel=lambda path: self.outcomes.append(f"cancel:{path}"),
        )


class Conn:
    """Stands in for gateway.links.ConnectionState: hashable by identity, with a container-id."""

    def __init__(self, container_id: str) -> None:
        self.container_id = container_id


def conn(container_id: str = "c") -> Conn:
    return Conn(container_id)


def notification(link: FakeLink, index: int = -1) -> dict[str, object]:
    message = Message()
    message.decode(link.sent[index][1])
    return dict(message.properties)


def test_addresses():
    assert removal_branch(REMOVAL_PREFIX + "a/b") == "a/b"
    assert handler_path(HANDLER_PREFIX + "a") == "a"
    assert handler_path(HANDLER_PREFIX) == "" and handler_path(HANDLER_PREFIX.rstrip("/")) == ""
    with pytest.raises(Refused) as bad:
        removal_branch(REMOVAL_PREFIX + "a//b")
    assert bad.value.condition == "amqp:invalid-field"
    for wrong_direction in (lambda: removal_branch(HANDLER_PREFIX + "a"), lambda: handler_path(REMOVAL_PREFIX + "a")):
        with pytest.raises(Refused) as missing:
            wrong_direction()
        assert missing.value.condition == "amqp:not-found"


def test_clean_close_removes_at_once_and_a_lost_connection_after_the_grace():
    h = Harness()
    clean, lost = conn("clean"), conn("lost")
    h.control.register_removal(FakeLink(), clean, "a")
    h.control.register_removal(FakeLink(), lost, "b")
    h.control.connection_ended(clean, abrupt=False)
    assert h.removed == ["a"]
    h.control.connection_ended(lost, abrupt=True)
    h.advance(4.9)
    assert h.removed == ["a"]
    h.advance(0.2)
    assert h.removed == ["a", "b"]


def test_a_conflict_is_refused_with_precondition_failed_and_a_detach_removes_nothing():
    h = Harness()
    holder = h.control.register_removal(FakeLink(), conn(), "a/b")
    with pytest.raises(Refused) as refused:
        h.control.register_removal(FakeLink(), conn("other"), "a")
    assert refused.value.condition == "amqp:precondition-failed"
    h.control.removal_ended(holder)
    h.control.connection_ended(holder.conn, abrupt=False)
    assert h.removed == []


def test_take_over_within_the_grace():
    h = Harness()
    first = conn("app")
    h.control.register_removal(FakeLink("reg"), first, "a")
    h.control.connection_ended(first, abrupt=True)
    second = conn("app")
    h.control.register_removal(FakeLink("reg"), second, "a")
    h.advance(10)
    assert h.removed == []
    h.control.connection_ended(second, abrupt=False)
    assert h.removed == ["a"]


def test_a_hold_without_handlers_goes_ahead():
    h = Harness()
    assert h.hold(">x/y") is None


def test_accept_proceeds_reject_cancels_and_every_handler_is_waited_for():
    h = Harness()
    top, below = FakeLink("top"), FakeLink("below")
    top_handler = h.control.register_handler(top, conn("ctl"), "A")
    below_handler = h.control.register_handler(below, conn("ctl"), "A/B")
    assert h.hold("?A/B.*") is not None
    assert notification(top) == {
        "selector": "?A/B.*",
        "session": "user",
        "request": "subscribe",
        "server": "srv",
        "path": "A",
    }
    h.control.handler_settled(top_handler, FakeDelivery(top.sent[0][0], Delivery.ACCEPTED))
    assert h.outcomes == []  # the handler on A/B has not answered
    h.control.handler_settled(below_handler, FakeDelivery(below.sent[0][0], Delivery.REJECTED))
    assert h.outcomes == ["cancel:A/B"]
    h.advance(10)  # the timeout after the answers changes nothing
    assert h.outcomes == ["cancel:A/B"]


@pytest.mark.parametrize("state", [Delivery.ACCEPTED, Delivery.RELEASED, Delivery.MODIFIED])
def test_anything_but_rejected_proceeds(state):
    h = Harness()
    link = FakeLink()
    handler = h.control.register_handler(link, conn(), "A")
    h.hold(">A/x")
    h.control.handler_settled(handler, FakeDelivery(link.sent[0][0], state))
    assert h.outcomes == ["proceed"]


def test_silence_proceeds_after_the_timeout_and_a_late_answer_is_ignored():
    h = Harness()
    link = FakeLink()
    handler = h.control.register_handler(link, conn(), "A")
    h.hold(">A/x")
    h.advance(2.9)
    assert h.outcomes == []
    h.advance(0.2)
    assert h.outcomes == ["proceed"]
    h.control.handler_settled(handler, FakeDelivery(link.sent[0][0], Delivery.REJECTED))
    assert h.outcomes == ["proceed"]


def test_a_handler_gone_proceeds_and_one_without_credit_is_sent_to_later():
    h = Harness()
    starved = FakeLink(credit=0)
    handler = h.control.register_handler(starved, conn(), "A")
    h.hold(">A/x")
    assert starved.sent == []
    starved.credit = 1
    h.control.handler_flow(handler)
    assert len(starved.sent) == 1
    h.control.handler_ended(handler)
    assert h.outcomes == ["proceed"]
    assert h.hold(">A/y") is None  # deregistered


def test_a_subscriber_that_gives_up_is_not_resumed():
    h = Harness()
    link = FakeLink()
    handler = h.control.register_handler(link, conn(), "A")
    held = h.hold(">A/x")
    h.control.held_ended(held)
    h.control.handler_settled(handler, FakeDelivery(link.sent[0][0], Delivery.ACCEPTED))
    h.advance(10)
    assert h.outcomes == []


def test_a_presettled_handler_link_is_refused():
    h = Harness()
    with pytest.raises(Refused) as refused:
        h.control.register_handler(FakeLink(settled=True), conn(), "A")
    assert refused.value.condition == "amqp:invalid-field"


def test_an_unsettled_disposition_without_state_is_not_an_answer():
    h = Harness()
    link = FakeLink()
    handler = h.control.register_handler(link, conn(), "A")
    h.hold(">A/x")
    pending = FakeDelivery(link.sent[0][0], 0)
    pending.settled = False
    h.control.handler_settled(handler, pending)
    assert h.outcomes == [] and not pending.locally_settled


class FakeJournal:
    def __init__(self) -> None:
        self.rows: dict[int, tuple[str, str | None, str]] = {}

    def submit_removal_registration(self, row_id: int, branch: str, container_id: str | None, link: str) -> None:
        assert row_id not in self.rows
        self.rows[row_id] = (branch, container_id, link)

    def submit_drop_removal_registration(self, row_id: int) -> None:
        del self.rows[row_id]


def journaled(reconnect: float = 5.0) -> tuple[Harness, FakeJournal]:
    h = Harness(reconnect)
    h.control.journal = journal = FakeJournal()
    return h, journal


def test_a_row_per_open_registration_gone_when_it_ends():
    h, journal = journaled()
    first, second, lost = conn("a"), conn("b"), conn("c")
    kept = h.control.register_removal(FakeLink("r1"), first, "x")
    h.control.register_removal(FakeLink("r1"), first, "x")  # the same registration again: still one row
    dropped = h.control.register_removal(FakeLink("r2"), second, "x")
    h.control.register_removal(FakeLink("r3"), lost, "y")
    assert sorted(journal.rows.values()) == [("x", "a", "r1"), ("x", "b", "r2"), ("y", "c", "r3")]
    h.control.removal_ended(dropped)
    h.control.connection_ended(kept.conn, abrupt=False)
    h.control.connection_ended(lost, abrupt=True)
    assert list(journal.rows.values()) == [("y", "c", "r3")]  # kept through the grace
    h.advance(10)
    assert journal.rows == {} and h.removed == ["x", "y"]


def test_a_take_over_keeps_the_row():
    h, journal = journaled()
    first = conn("app")
    h.control.register_removal(FakeLink("reg"), first, "a")
    h.control.connection_ended(first, abrupt=True)
    again = conn("app")
    h.control.register_removal(FakeLink("reg"), again, "a")
    assert list(journal.rows.values()) == [("a", "app", "reg")]
    h.advance(10)
    assert len(journal.rows) == 1 and h.removed == []
    h.control.connection_ended(again, abrupt=False)
    assert journal.rows == {} and h.removed == ["a"]


def test_stored_registrations_wait_the_timeout_after_a_restart_unless_taken_over():
    from subgate.storage.removals import RemovalRecord

    h, journal = journaled()
    journal.rows = {4: ("gone", "crashed", "r"), 7: ("kept", "back", "r"), 9: ("gone", None, "x")}
    records = [RemovalRecord(i, *row) for i, row in journal.rows.items()] + [RemovalRecord(10, "gone/below", "z", "q")]
    journal.rows[10] = ("gone/below", "z", "q")
    h.control.restore(records, 10)
    assert 10 not in journal.rows  # conflicting with 'gone' (a row that cannot have been valid): dropped
    back = conn("back")
    h.control.register_removal(FakeLink("r"), back, "kept")  # re-attached in time
    h.advance(4.9)
    assert h.removed == []
    h.advance(0.2)
    assert h.removed == ["gone"] and list(journal.rows.values()) == [("kept", "back", "r")]
    h.control.register_removal(FakeLink("n"), conn("new"), "other")
    assert max(journal.rows) == 11  # row ids continue after the stored ones


def test_a_timer_that_fires_early_is_set_again():
    h = Harness(reconnect=5.0)
    lost = conn("early")
    h.control.register_removal(FakeLink(), lost, "a")
    h.control.connection_ended(lost, abrupt=True)
    ((deadline, callback),) = h.timers
    h.timers.clear()
    h.now += 2.0
    callback()  # the reactor's timer went off before our clock reached the deadline
    assert h.removed == [] and len(h.timers) == 1
    h.advance(3.1)
    assert h.removed == ["a"]
