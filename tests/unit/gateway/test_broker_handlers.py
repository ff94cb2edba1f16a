"""The broker's handlers over two in-memory proton Transports (``pair.Pair``): attach, publish, the journal
commit, credit and detach, end to end inside one process and without sockets."""

from __future__ import annotations

from proton import Delivery, Terminus

from subgate.engine.nodes import Queue
from subgate.gateway.consumers import BrowserConsumer, QueueConsumer, SubscriptionConsumer
from subgate.gateway.links import CoordinatorLink, Inbound
from subgate.gateway.settings import Settings
from tests.unit.gateway.pair import Pair, received


# -- attach ----------------------------------------------------------------------------------------------------
def test_a_publisher_attach_opens_an_inbound_link_with_its_window_under_the_memory_mark_and_creates_the_queue():
    pair = Pair()
    sender = pair.sender("orders")
    assert isinstance(pair.server_link("snd"), Inbound)
    settings = pair.settings  # each credit reserves the largest message on the mark (engine.memory_mark)
    credits = settings.memory_high_water // settings.max_message_size
    assert sender.credit == min(settings.credit_window, credits // 4)  # a link's share: a quarter at most
    big_mark = Pair(Settings(name="unit", memory_high_water=1 << 40))
    assert big_mark.sender("orders").credit == settings.credit_window  # room for the whole window
    assert isinstance(pair.router.node("orders"), Queue)


def test_each_consumer_attach_makes_its_own_link_kind():
    pair = Pair(Settings(name="unit", default_node_type="topic"))
    pair.router.create("q", "queue", durable=False)
    pair.receiver("q", name="plain")
    pair.receiver("news", name="sub")
    browser = pair.session.receiver("browse")
    browser.source.address = "q"
    browser.source.distribution_mode = Terminus.DIST_MODE_COPY
    browser.open()
    pair.pump()
    assert type(pair.server_link("plain")) is QueueConsumer
    assert type(pair.server_link("sub")) is SubscriptionConsumer
    assert type(pair.server_link("browse")) is BrowserConsumer


def test_a_coordinator_attach_gets_credit_for_controls():
    pair = Pair()
    link = pair.session.sender("txn")
    link.target.type = Terminus.COORDINATOR
    link.open()
    pair.pump()
    assert isinstance(pair.server_link("txn"), CoordinatorLink)
    assert link.credit > 0


def test_a_refused_attach_is_closed_with_its_condition():
    pair = Pair()
    receiver = pair.receiver("")  # a consumer needs a source address
    assert receiver.state & receiver.REMOTE_CLOSED
    assert receiver.remote_condition is not None
    assert receiver.remote_condition.name == "amqp:invalid-field"


def test_an_invalid_topic_selector_is_refused_as_invalid_field_at_the_attach():
    pair = Pair(Settings(name="unit", default_node_type="topic"))
    receiver = pair.receiver("?a/(")
    assert receiver.remote_condition is not None
    assert receiver.remote_condition.name == "amqp:invalid-field"


# -- publish and commit ----------------------------------------------------------------------------------------
def test_a_persistent_message_is_accepted_and_routed_only_after_its_journal_commit():
    pair = Pair()
    sender = pair.sender("q")
    receiver = pair.receiver("q", credit=10)
    delivery = pair.send(sender, "one", durable=True)
    assert delivery.remote_state == 0
    assert received(receiver) == []
    assert [record.address for record in pair.journal.records] == ["q"]
    pair.commit()
    assert delivery.remote_state == Delivery.ACCEPTED
    assert [body for _, body in received(receiver)] == ["one"]


def test_a_failed_journal_write_rejects_the_transfer_and_routes_nothing():
    pair = Pair()
    sender = pair.sender("q")
    receiver = pair.receiver("q", credit=10)
    delivery = pair.send(sender, "lost", durable=True)
    pair.commit(RuntimeError("disk full"))
    assert delivery.remote_state == Delivery.REJECTED
    assert delivery.remote.condition is not None
    assert delivery.remote.condition.name == "amqp:internal-error"
    assert received(receiver) == []


def test_a_message_with_no_journal_row_is_accepted_and_routed_at_once():
    pair = Pair()
    pair.router.create("t", "queue", durable=False)
    sender = pair.sender("t")
    receiver = pair.receiver("t", credit=10)
    delivery = pair.send(sender, "fast")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert pair.journal.pending == []
    assert [body for _, body in received(receiver)] == ["fast"]


def test_an_anonymous_relay_routes_by_the_to_address():
    from proton import Message

    pair = Pair()
    sender = pair.sender(None)
    receiver = pair.receiver("dest", credit=10)
    delivery = sender.delivery("r1")
    sender.send(Message(address="dest", body="relayed").encode())
    sender.advance()
    pair.pump()
    pair.commit()
    assert delivery.remote_state == Delivery.ACCEPTED
    assert [body for _, body in received(receiver)] == ["relayed"]


# -- credit ----------------------------------------------------------------------------------------------------
def test_publisher_credit_comes_back_at_the_commit_in_half_window_steps():
    pair = Pair(Settings(name="unit", credit_window=4))
    sender = pair.sender("q")
    for i in range(3):
        pair.send(sender, f"m{i}", durable=True, tag=f"t{i}")
    assert sender.credit == 1  # three waiting for their commit hold their credit
    pair.commit()
    assert sender.credit == 4


def test_a_consumer_gets_as_many_messages_as_its_credit_and_the_rest_when_it_grants_more():
    pair = Pair()
    pair.router.create("q", "queue", durable=False)
    sender = pair.sender("q")
    for i in range(5):
        pair.send(sender, f"m{i}", tag=f"t{i}")
    receiver = pair.receiver("q", credit=2)
    assert [body for _, body in received(receiver)] == ["m0", "m1"]
    receiver.flow(10)
    pair.pump()
    assert [body for _, body in received(receiver)] == ["m2", "m3", "m4"]


def test_a_consumers_accept_removes_the_message_from_its_queue():
    pair = Pair()
    queue = pair.router.create("q", "queue", durable=False)
    sender = pair.sender("q")
    pair.send(sender, "m")
    receiver = pair.receiver("q", credit=1)
    [(delivery, _)] = received(receiver)
    delivery.update(Delivery.ACCEPTED)
    delivery.settle()
    pair.pump()
    assert isinstance(queue, Queue)
    assert queue.depth == 0


# -- detach ----------------------------------------------------------------------------------------------------
def test_a_detached_consumers_unsettled_message_goes_to_the_next_consumer():
    pair = Pair()
    pair.router.create("q", "queue", durable=False)
    sender = pair.sender("q")
    pair.send(sender, "m")
    first = pair.receiver("q", name="first", credit=1)
    assert [body for _, body in received(first)] == ["m"]
    second = pair.receiver("q", name="second", credit=1)
    assert received(second) == []
    first.close()
    pair.pump()
    assert [body for _, body in received(second)] == ["m"]


def test_closing_the_link_that_made_a_temporary_queue_deletes_it():
    pair = Pair()
    link = pair.session.receiver("tmp")
    link.source.dynamic = True
    link.open()
    pair.pump()
    address = link.remote_source.address
    assert address is not None and pair.router.node(address) is not None
    link.close()
    pair.pump()
    assert pair.router.node(address) is None


def test_the_connection_closing_ends_every_link_and_frees_its_container_id():
    pair = Pair()
    pair.sender("q")
    pair.receiver("q", credit=1)
    state = pair.server_link("snd").conn
    pair.client.close()
    pair.pump()
    assert state.closed
    assert state.links == set()
