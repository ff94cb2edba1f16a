"""Browsing a paging queue over the wire: a QueueBrowser sees every available message once and in order, also
those the queue left in the journal (read a page at a time for the browser), on a queue and on a durable JMS
subscription (browsed by its Artemis name ``<topic>::<ClientID>.<name>``), live and after a restart, on SQLite
and PostgreSQL; browsing changes nothing for the queue's consumers.
"""

from __future__ import annotations

import time

import pytest

from tests.support.jms import DURABLE, TOPIC, JmsWire, LinkRefused

PAGE = "10"
SELECTOR = "keep = TRUE AND n >= 0"


def fill_queue(jms: JmsWire, address: str, count: int) -> None:
    producer = jms.session().producer(address)
    for n in range(count):
        producer.send(f"m{n}", properties={"n": n})


def bodies(received: list) -> list:
    return [r.body for r in received]


def consume(consumer, count: int) -> list:
    """Receive and accept ``count`` messages, topping the credit up to the prefetch as Qpid JMS does."""
    got = []
    for _ in range(count):
        if not consumer.buffer:
            consumer.top_up()
        got.append(consumer.receive().accept().body)
    return got


def assert_clean_log(server) -> None:
    log = server.log()
    assert "Traceback" not in log and "internal error" not in log


def test_a_browser_sees_a_queue_backlog_several_pages_deep_in_order_live_and_after_a_restart(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE)
    everything = [f"m{n}" for n in range(60)]
    with JmsWire.connect(server.address) as jms:
        fill_queue(jms, "paged.b", 60)
        session = jms.session()
        assert bodies(session.browse("paged.b")) == everything  # prefetch 1000: pages read as fast as they come
        assert bodies(session.browse("paged.b", prefetch=7)) == everything  # reads bounded by the credit
        assert bodies(session.browse("paged.b", selector="n >= 25 AND n < 52")) == everything[25:52]
        consumer = session.consumer("paged.b", prefetch=5)
        assert consume(consumer, 15) == everything[:15]  # browsing took nothing away
        consumer.close()
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        assert bodies(session.browse("paged.b", prefetch=3)) == everything[15:]
        consumer = session.consumer("paged.b", prefetch=4)
        assert consume(consumer, 45) == everything[15:]
        consumer.drain()
        assert consumer.take_buffered() == []
    assert_clean_log(server)


def test_a_browser_of_a_durable_subscription_with_a_selector_sees_its_paged_backlog(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE)
    with JmsWire.connect(server.address, client_id="app") as jms:
        session = jms.session()
        session.consumer("paged.bt", DURABLE, name="s", selector=SELECTOR, no_local=True).detach()
        session.producer("paged.bt", TOPIC).send("mine", properties={"n": 1, "keep": True})  # no-local drops it
    with JmsWire.connect(server.address, client_id="pub") as jms:
        publisher = jms.session().producer("paged.bt", TOPIC)
        for n in range(90):
            publisher.send(f"n{n}", properties={"n": n, "keep": n % 3 != 0})
    wanted = [f"n{n}" for n in range(90) if n % 3 != 0]  # 60 messages: six pages of the subscription
    with JmsWire.connect(server.address, client_id="viewer") as jms:
        session = jms.session()
        assert bodies(session.browse("paged.bt::app.s")) == wanted
        assert bodies(session.browse("paged.bt::app.s", prefetch=4, selector="n > 40")) == [
            body for body in wanted if int(body[1:]) > 40
        ]
    with JmsWire.connect(server.address, client_id="app") as jms:
        subscriber = jms.session().consumer("paged.bt", DURABLE, name="s", selector=SELECTOR, no_local=True)
        assert consume(subscriber, 20) == wanted[:20]
        subscriber.detach()
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address, client_id="viewer") as jms:
        assert bodies(jms.session().browse("paged.bt::app.s", prefetch=6)) == wanted[20:]
    with JmsWire.connect(server.address, client_id="app") as jms:
        subscriber = jms.session().consumer("paged.bt", DURABLE, name="s", selector=SELECTOR, no_local=True)
        assert consume(subscriber, 40) == wanted[20:]
        subscriber.drain()
        assert subscriber.take_buffered() == []
    assert_clean_log(server)


def test_subscription_queue_names_follow_artemis_and_only_browsing_is_allowed(server):
    with JmsWire.connect(server.address, client_id="app") as jms:
        session = jms.session()
        session.consumer("names.t", DURABLE, name="s").detach()
        session.producer("names.t", TOPIC).send("one")
        assert bodies(session.browse("names.t::app.s")) == ["one"]
        with pytest.raises(LinkRefused) as refused:
            session.browser("names.t::app.other")
        assert refused.value.condition == "amqp:not-found"
        with pytest.raises(LinkRefused) as refused:
            session.consumer("names.t::app.s")
        assert refused.value.condition == "amqp:not-implemented"
    assert_clean_log(server)


def test_a_browser_detaching_mid_backlog_leaves_nothing_behind(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE)
    everything = [f"m{n}" for n in range(80)]
    with JmsWire.connect(server.address) as jms:
        fill_queue(jms, "paged.bd", 80)
        session = jms.session()
        for prefetch in (1000, 3):
            browser = session.browser("paged.bd", prefetch=prefetch)
            assert consume(browser, 13) == everything[:13]  # into the journal part
            browser.close()  # with credit left: a page read for it may still be on its way
        abandoned = session.browser("paged.bd", prefetch=1000)  # never read from: its pages come back too late
        abandoned.close()
        assert bodies(session.browse("paged.bd", prefetch=9)) == everything
        consumer = session.consumer("paged.bd", prefetch=6)
        assert consume(consumer, 80) == everything
        consumer.drain()
        assert consumer.take_buffered() == []
    assert_clean_log(server)


def test_consumers_and_a_browser_at_the_same_time(make_server, store_url):
    """While two consumers take half of the backlog, a browser walks it: it never shows a message twice or out of
    order, it shows every message nobody took, and the consumers get theirs exactly as without the browser."""
    server = make_server(store_url, "--page-messages", PAGE)
    everything = [f"m{n}" for n in range(100)]
    with JmsWire.connect(server.address) as jms, JmsWire.connect(server.address) as other:
        fill_queue(jms, "paged.bc", 100)
        # Prefetch 1, topped up only to receive: no message waits in a consumer's buffer while the browser walks.
        first = jms.session().consumer("paged.bc", prefetch=1)
        second = other.session().consumer("paged.bc", prefetch=1)
        browser = jms.session().browser("paged.bc", prefetch=0)
        consumed: list[str] = []
        browsed: list[str] = []
        deadline = time.monotonic() + 60
        for _ in range(200):
            assert time.monotonic() < deadline
            if len(consumed) < 50:
                consumed += consume(first, 1) + consume(second, 1)
            browser.flow(2)
            browser.drain()
            arrived = bodies(browser.take_buffered())
            browsed += arrived
            if not arrived and len(consumed) >= 50:
                break
        numbers = [int(body[1:]) for body in browsed]
        assert numbers == sorted(set(numbers))  # in order, never twice
        assert set(everything) - set(consumed) <= set(browsed)  # nothing still available was skipped
        assert consumed == everything[:50]  # round robin, in order, as without the browser
        first.close()
        second.close()
        rest = jms.session().consumer("paged.bc", prefetch=7)
        assert consume(rest, 50) == everything[50:]
    assert_clean_log(server)
