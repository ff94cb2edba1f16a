"""Client values the store cannot hold are refused at the edge, and none of them holds the journal (issue 33,
defect 2; docs/security.md, "Values that reach the store").

Before: attaching with the bookmark ``p|9223372036854775808|`` was answered ``amqp:internal-error`` after the
journal writer had retried the whole batch five times with back-off ("Python int too large to convert to SQLite
INTEGER"), holding every publisher's commits meanwhile. Now each such value is refused with
``amqp:invalid-field`` naming the field and its range before any read is asked of the journal; an inline
publisher on another connection has every message confirmed, and the writer never logs a failed commit.

The audit: every other client value that becomes a query parameter (a message's publisher id and seq, a durable
subscription's name, a selector that is stored with its subscription, ``$management`` arguments: the bookmark
READ's name and client-id, a created topic's name) gets the same rules. Real server process, real sockets, on
SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Delivery, Message, symbol, ulong
from proton.utils import BlockingConnection

from subgate.cli.management import ManagementClient, ManagementError
from tests.e2e.conftest import STORES
from tests.e2e.test_replay import EPOCH, bodies, drain, publish, refusal, subscribe
from tests.support.amqp import Capabilities, connect, sender
from tests.support.server import SubgateProcess, module_server

MAX_SEQ = "9223372036854775807"
POISON_BOOKMARKS = {
    "seq-2^63": ("p|9223372036854775808|", MAX_SEQ),
    "seq-5000-digits": ("p|" + "9" * 5000 + "|", MAX_SEQ),
    "seq-in-a-list": ("a|1|,p|18446744073709551615|", MAX_SEQ),
    "id-with-nul": ("p\x00q|1|", "U+0000"),
    "id-600-chars": ("x" * 600 + "|1|", "1 to 512 characters"),
}
ATTACHES = 16  # as the probe


@pytest.fixture(scope="module", params=STORES)
def shared_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "store-values", request.param) as server:
        yield server


@pytest.fixture
def log_mark(broker: SubgateProcess) -> int:
    """Where the server's log stood when the test began (the module shares one server)."""
    return len(broker.log())


def _journal_untroubled(broker: SubgateProcess, since: int) -> None:
    """The writer never saw a value it could not bind (in this test's part of the log): no failed commit, no read
    failed by itself, no traceback."""
    log = broker.log()[since:]
    assert "journal commit failed" not in log
    assert "failed by itself" not in log
    assert "too large to convert" not in log
    assert "Traceback" not in log


@pytest.mark.parametrize("case", list(POISON_BOOKMARKS))
def test_a_bookmark_the_store_cannot_look_up_is_refused_at_once_and_holds_no_publisher(broker, log_mark, uid, case):
    value, named = POISON_BOOKMARKS[case]
    topic, queue = f"poison/{uid}", f"inline-{uid}"
    subscriber = connect(broker.url)
    publisher = connect(broker.url)
    try:
        publish(subscriber, topic, ["x"])
        snd = sender(publisher, queue, "queue")
        outcomes = []
        for n in range(ATTACHES):  # each poison attach, with an inline publisher's message right behind it
            condition, description, null_source = refusal(lambda: subscribe(subscriber, topic, value))
            assert condition == "amqp:invalid-field", description
            assert "subgate-bookmark" in description and named in description
            assert null_source
            outcomes.append(snd.send(Message(body=f"m{n}", durable=True), timeout=30).remote_state)
        assert outcomes == [Delivery.ACCEPTED] * ATTACHES  # every message confirmed (journaled)
        ok = subscribe(subscriber, topic, EPOCH)  # the connection carries on, and replay still works
        assert bodies(drain(ok, 1)) == ["x"]
    finally:
        subscriber.close()
        publisher.close()
    _journal_untroubled(broker, log_mark)


def test_the_largest_sequence_number_is_taken_and_looked_up(broker, log_mark, uid):
    """2^63 - 1 is in range: a publisher may use it, and a bookmark naming it replays from there."""
    topic = f"poison/max/{uid}"
    conn = connect(broker.url)
    try:
        snd = sender(conn, topic, "topic")
        annotations = {symbol("x-opt-publisher-id"): f"pub-{uid}", symbol("x-opt-publisher-seq"): ulong(2**63 - 1)}
        assert snd.send(Message(body="last", durable=True, annotations=annotations)).remote_state == Delivery.ACCEPTED
        snd.send(Message(body="after", durable=True))
        rcv = subscribe(conn, topic, f"pub-{uid}|{MAX_SEQ}|")
        assert bodies(drain(rcv, 1)) == ["after"]
    finally:
        conn.close()
    _journal_untroubled(broker, log_mark)


# -- the audit: every other client value that becomes a query parameter ----------------------------------------------
@pytest.mark.parametrize(
    "annotations, named",
    [
        ({"x-opt-publisher-id": "p", "x-opt-publisher-seq": ulong(2**63)}, MAX_SEQ),
        ({"x-opt-publisher-id": "p\x00q", "x-opt-publisher-seq": ulong(1)}, "x-opt-publisher-id must be a string"),
    ],
    ids=["seq-2^63", "id-with-nul"],
)
def test_a_publisher_identity_out_of_range_is_rejected(broker, log_mark, uid, annotations, named):
    conn = connect(broker.url)
    try:
        snd = sender(conn, f"audit-{uid}", "queue")
        message = Message(body="x", durable=True, annotations={symbol(k): v for k, v in annotations.items()})
        delivery = snd.link.send(message)
        conn.wait(lambda: bool(delivery.remote_state), timeout=10, msg="no outcome")
        assert delivery.remote_state == Delivery.REJECTED
        condition = delivery.remote.condition
        assert condition is not None and condition.name == "amqp:invalid-field" and named in condition.description
        assert snd.send(Message(body="fine", durable=True)).remote_state == Delivery.ACCEPTED
    finally:
        conn.close()
    _journal_untroubled(broker, log_mark)


def _durable(conn: BlockingConnection, topic: str, name: str, selector: str | None = None) -> object:
    from proton.reactor import Copy, DurableSubscription, Selector

    options = [Capabilities("topic"), DurableSubscription(), Copy()]
    if selector is not None:
        options.append(Selector(selector))
    return conn.create_receiver(topic, name=name, options=options)


@pytest.mark.parametrize(
    "name, selector, named",
    [
        ("n" * 600, None, "subscription name must be 1 to 512 characters"),
        ("sel", "colour = 'red\x00'", "selector must not contain U+0000"),
    ],
    ids=["name-600-chars", "selector-with-nul"],
)
def test_a_durable_subscription_the_store_cannot_keep_is_refused(broker, log_mark, uid, name, selector, named):
    conn = connect(broker.url, container_id=f"audit-{uid}")
    try:
        condition, description, _ = refusal(lambda: _durable(conn, f"audit/{uid}", f"{name}-{uid}", selector))
        assert condition == "amqp:invalid-field" and named in description
        ok = _durable(conn, f"audit/{uid}", f"fine-{uid}")  # the connection carries on
        ok.close()
    finally:
        conn.close()
    _journal_untroubled(broker, log_mark)


@pytest.mark.parametrize(
    "operation, type_, arguments, named",
    [
        ("READ", "bookmark", {"name": "a\x00b", "client-id": "c"}, "U+0000"),
        ("READ", "bookmark", {"name": "n" * 600, "global": True}, "1 to 512 characters"),
        ("READ", "bookmark", {"name": "n", "client-id": "c" * 600}, "1 to 512 characters"),
        ("CREATE", "topic", {"name": "audit/a\x00b"}, "U+0000"),
        ("CREATE", "topic", {"name": "audit/" + "t" * 2000}, "1 to 1024 characters"),
    ],
    ids=["bookmark-name-nul", "bookmark-name-600", "bookmark-client-600", "topic-nul", "topic-2000"],
)
def test_management_arguments_the_store_cannot_hold_are_a_400(broker, log_mark, operation, type_, arguments, named):
    with ManagementClient("127.0.0.1", broker.port) as management:
        with pytest.raises(ManagementError) as caught:
            management.request(operation, type_, arguments)
        assert caught.value.status == 400 and named in str(caught.value), caught.value
        assert isinstance(management.read_journal(), dict)  # the same connection carries on
    _journal_untroubled(broker, log_mark)
