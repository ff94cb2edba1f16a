"""Per-producer order of persistent and non-persistent messages (JMS 2.0 §6.2.9.1), also while a queue or a durable
subscription pages: a non-persistent message is then journaled too (a ``messages`` row with durable = false) and
takes its place behind the paged-out persistent ones, while its publisher is still settled at once. After a
restart the non-persistent messages are gone and the persistent ones all there, in order. SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import func, select

from subgate.storage.db import make_engine
from subgate.storage.models import JournalMessage
from tests.e2e.test_paging_browse import consume
from tests.support.jms import DURABLE, TOPIC, JmsWire

PAGE = "10"


def persistent_at(n: int) -> bool:
    return n % 3 != 1  # two persistent, one non-persistent, ...


def send_mixed(producer, count: int, *, prefix: str = "m", sync_every: int = 4, **properties) -> None:
    """``count`` messages, a third of them non-persistent; most persistent ones are sent without waiting for
    their outcome (as with Qpid JMS' async sends), so a non-persistent one often follows a persistent one still
    on its way into the journal. Every outcome must be accepted."""
    pending = []
    for n in range(count):
        sync = n % sync_every == 0
        pending.append(
            producer.send(f"{prefix}{n}", persistent=persistent_at(n), sync=sync, properties={"n": n, **properties})
        )
    assert all(p.wait().accepted for p in pending)


def journal_rows(store_url: str, durable: bool) -> int:
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            return conn.scalar(select(func.count()).where(JournalMessage.durable.is_(durable))) or 0
    finally:
        engine.dispose()


def test_mixed_sends_to_a_paging_queue_arrive_in_send_order_and_a_restart_keeps_the_persistent_ones(
    make_server, store_url
):
    server = make_server(store_url, "--page-messages", PAGE)
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        send_mixed(session.producer("paged.mix"), 60)
        consumer = session.consumer("paged.mix", prefetch=7)
        assert consume(consumer, 60) == [f"m{n}" for n in range(60)]
        consumer.close()
        assert journal_rows(store_url, durable=False) > 0  # the non-persistent ones paged out with the rest
        send_mixed(session.producer("paged.mix"), 60, prefix="r")
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address) as jms:
        consumer = jms.session().consumer("paged.mix", prefetch=5)
        assert consume(consumer, 40) == [f"r{n}" for n in range(60) if persistent_at(n)]
        consumer.drain()
        assert consumer.take_buffered() == []
        browser = jms.session().browse("paged.mix")
        assert browser == []


def test_synchronous_persistent_sends_and_non_persistent_ones_to_a_paging_queue(make_server, store_url):
    """Each persistent send waits for its outcome, so nothing is on its way when a non-persistent one follows:
    only the paging rule keeps it behind the persistent ones the queue left in the journal."""
    server = make_server(store_url, "--page-messages", PAGE)
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        send_mixed(session.producer("paged.sync"), 45, sync_every=1)
        consumer = session.consumer("paged.sync", prefetch=4)
        assert consume(consumer, 45) == [f"m{n}" for n in range(45)]


def test_mixed_sends_to_a_paging_durable_subscription_arrive_in_send_order(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE)
    selector = "keep = TRUE"
    with JmsWire.connect(server.address, client_id="app") as jms:
        jms.session().consumer("paged.mixt", DURABLE, name="s", selector=selector).detach()
    with JmsWire.connect(server.address, client_id="pub") as jms:
        producer = jms.session().producer("paged.mixt", TOPIC)
        send_mixed(producer, 45, keep=True)
        producer.send("skipped", properties={"keep": False})
        send_mixed(producer, 30, prefix="t", keep=True)
    wanted = [f"m{n}" for n in range(45)] + [f"t{n}" for n in range(30)]
    with JmsWire.connect(server.address, client_id="viewer") as jms:
        assert [r.body for r in jms.session().browse("paged.mixt::app.s", prefetch=9)] == wanted
    with JmsWire.connect(server.address, client_id="app") as jms:
        subscriber = jms.session().consumer("paged.mixt", DURABLE, name="s", selector=selector, prefetch=6)
        assert consume(subscriber, 30) == wanted[:30]
        subscriber.detach()
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address, client_id="app") as jms:
        subscriber = jms.session().consumer("paged.mixt", DURABLE, name="s", selector=selector, prefetch=6)
        rest = [body for body in wanted[30:] if persistent_at(int(body[1:]))]
        assert consume(subscriber, len(rest)) == rest
        subscriber.drain()
        assert subscriber.take_buffered() == []


def test_mixed_sends_keep_their_order_on_a_queue_that_does_not_page(make_server, store_url):
    """A non-persistent message sent while a persistent one of the same producer is still on its way into the
    journal waits behind it (journaled too); one sent when nothing is on its way stays out of the journal."""
    server = make_server(store_url)
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumer = session.consumer("mix.q", prefetch=100)
        producer = session.producer("mix.q")
        send_mixed(producer, 90, sync_every=1000)
        assert consume(consumer, 90) == [f"m{n}" for n in range(90)]
        rows = journal_rows(store_url, durable=False)
        for n in range(20):
            producer.send(f"np{n}", persistent=False)
        assert consume(consumer, 20) == [f"np{n}" for n in range(20)]
        assert journal_rows(store_url, durable=False) == rows  # nothing on its way: memory only, as before


def test_mixed_sends_in_transactions_keep_their_order_while_the_queue_starts_paging(make_server, store_url):
    """The first commit fills the queue and starts its paging while it routes: the non-persistent sends after
    the first persistent one are journaled with it. The second commit finds the queue paging."""
    server = make_server(store_url, "--page-messages", PAGE)
    with JmsWire.connect(server.address) as jms:
        tx = jms.session(transacted=True)
        producer = tx.producer("paged.tx")
        for n in range(30):
            producer.send(f"a{n}", persistent=persistent_at(n), properties={"n": n})
        assert tx.commit().accepted
        for n in range(30):
            producer.send(f"b{n}", persistent=persistent_at(n), properties={"n": n})
        assert tx.commit().accepted
        consumer = jms.session().consumer("paged.tx", prefetch=8)
        assert consume(consumer, 60) == [f"a{n}" for n in range(30)] + [f"b{n}" for n in range(30)]


def test_with_journal_non_persistent_every_message_survives_a_restart(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE, "--journal-non-persistent")
    with JmsWire.connect(server.address) as jms:
        send_mixed(jms.session().producer("kept.mix"), 30)
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address) as jms:
        consumer = jms.session().consumer("kept.mix", prefetch=4)
        assert consume(consumer, 30) == [f"m{n}" for n in range(30)]
