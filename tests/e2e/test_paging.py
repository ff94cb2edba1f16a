"""Paging over the wire: a durable queue or subscription holding more than ``--page-messages`` keeps only a page in
memory and reads the rest from the journal as its consumer gets there, live and after a restart (SQLite and
PostgreSQL). Order, selectors, no-local and acknowledgements must be exactly as without paging.
"""

from __future__ import annotations

from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender
from tests.support.jms import DURABLE, TOPIC, JmsWire

PAGE = "10"
SELECTOR = "keep = TRUE AND n >= 0"


def test_a_queue_backlog_pages_live_and_after_a_restart(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE)
    conn = connect(server.url)
    send_all(sender(conn, "paged.q", "queue"), [f"m{i}" for i in range(60)], durable=True)
    rcv = receiver(conn, "paged.q", "queue", credit=7)
    assert receive_bodies(rcv, 25) == [f"m{i}" for i in range(25)]  # through the first pages, live
    conn.close()
    assert server.stop() == 0
    server.start()
    assert "recovered 35 unacknowledged messages" in server.log()
    conn = connect(server.url)
    snd = sender(conn, "paged.q", "queue")
    rcv = receiver(conn, "paged.q", "queue", credit=3)
    assert receive_bodies(rcv, 5) == [f"m{i}" for i in range(25, 30)]
    send_all(snd, ["late0", "late1"], durable=True)  # published while the queue is paging
    assert receive_bodies(rcv, 32) == [f"m{i}" for i in range(30, 60)] + ["late0", "late1"]
    assert nothing_arrives(rcv)
    conn.close()


def test_a_durable_subscription_pages_with_its_selector_and_no_local(make_server, store_url):
    server = make_server(store_url, "--page-messages", PAGE)
    with JmsWire.connect(server.address, client_id="app") as jms:
        session = jms.session()
        sub = session.consumer("paged.t", DURABLE, name="s", selector=SELECTOR, no_local=True)
        sub.detach()
        own = session.producer("paged.t", TOPIC)
        own.send("mine", properties={"n": 1, "keep": True})  # no-local: never for this subscription
    with JmsWire.connect(server.address, client_id="pub") as jms:
        pub = jms.session().producer("paged.t", TOPIC)
        for n in range(90):
            pub.send(f"n{n}", properties={"n": n, "keep": n % 3 != 0})
    wanted = [f"n{n}" for n in range(90) if n % 3 != 0]  # 60 messages, six pages
    with JmsWire.connect(server.address, client_id="app") as jms:
        sub = jms.session().consumer("paged.t", DURABLE, name="s", selector=SELECTOR, no_local=True)
        assert [sub.receive().accept().body for _ in range(20)] == wanted[:20]
        sub.detach()
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address, client_id="app") as jms:
        sub = jms.session().consumer("paged.t", DURABLE, name="s", selector=SELECTOR, no_local=True)
        assert [sub.receive().accept().body for _ in range(40)] == wanted[20:]
        sub.drain()
        assert sub.take_buffered() == []
        sub.detach()
