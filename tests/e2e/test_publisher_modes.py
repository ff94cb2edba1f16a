"""Publisher modes and live subscribers over real sockets (docs/bookmarks.md), on SQLite and PostgreSQL.

To tell "on receipt" from "after the commit" without timing anything, the tests hold a lock on the journal table
from outside (SQLite: ``BEGIN EXCLUSIVE``; PostgreSQL: ``LOCK TABLE messages``): while it is held nothing can be
committed, so a ``store_confirm_send`` message gets no outcome and a ``store_send_noconfirm`` one is accepted at
once; a ``live`` subscriber receives while an ordinary one does not. ``kill -9`` under load shows that every
message acknowledged in ``store_confirm_send`` survives.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from proton import Delivery, Message
from proton.utils import BlockingConnection

from subgate.cli.management import ManagementClient
from tests.support.amqp import Capabilities, connect, nothing_buffered, receive_bodies, receiver, sender


@contextmanager
def journal_locked(store_url: str) -> Iterator[None]:
    """Nothing can be written to the journal table while this is open."""
    engine = sa.create_engine(store_url)
    conn = engine.raw_connection()
    try:
        cursor = conn.cursor()
        if store_url.startswith("sqlite"):
            conn.isolation_level = None  # type: ignore[attr-defined]  # sqlite3: manual transactions
            cursor.execute("BEGIN EXCLUSIVE")
        else:
            cursor.execute("LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE")
        yield
    finally:
        conn.rollback()
        conn.close()
        engine.dispose()


def send_async(conn: BlockingConnection, snd: Any, bodies: list[str]) -> list[Delivery]:
    return [snd.link.send(Message(body=body, durable=True)) for body in bodies]


def outcomes_within(conn: BlockingConnection, deliveries: list[Delivery], wait: float) -> list[object]:
    try:
        conn.wait(lambda: all(d.remote_state for d in deliveries), timeout=wait)
    except Exception:
        pass
    return [d.remote_state or None for d in deliveries]


def test_confirm_waits_for_the_commit_and_noconfirm_settles_at_once(make_server, store_url):
    server = make_server(store_url, "--publisher-modes", "fast=store_send_noconfirm")
    conn = connect(server.url)
    try:
        fast, slow = sender(conn, "fast", "queue"), sender(conn, "slow", "queue")
        fast.send(Message(body="warm", durable=True))
        slow.send(Message(body="warm", durable=True))
        with journal_locked(store_url):
            quick = send_async(conn, fast, ["f1", "f2", "f3"])
            held = send_async(conn, slow, ["s1", "s2", "s3"])
            assert outcomes_within(conn, quick, 10) == [Delivery.ACCEPTED] * 3
            assert outcomes_within(conn, held, 1.5) == [None] * 3  # not committed: not acknowledged
        assert outcomes_within(conn, held, 30) == [Delivery.ACCEPTED] * 3
        assert receive_bodies(receiver(conn, "fast", "queue"), 4) == ["warm", "f1", "f2", "f3"]
        assert receive_bodies(receiver(conn, "slow", "queue"), 4) == ["warm", "s1", "s2", "s3"]
    finally:
        conn.close()


def test_the_publisher_mode_of_a_branch_changes_through_management(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    try:
        with ManagementClient("127.0.0.1", server.port) as management:
            management.request("UPDATE", "publisher-mode", {"name": "orders", "mode": "store_send_noconfirm"})
            read = management.request("READ", "publisher-mode", {"name": "orders/eu"}).body
            assert (read["mode"], read["branch"]) == ("store_send_noconfirm", "orders")
            listed = management.request("QUERY", "publisher-mode", {}).body
            assert listed == [{"name": "orders", "mode": "store_send_noconfirm"}]
        snd = sender(conn, "orders/eu", "topic")
        snd.send(Message(body="warm", durable=True))
        with journal_locked(store_url):
            assert outcomes_within(conn, send_async(conn, snd, ["x"]), 10) == [Delivery.ACCEPTED]
        with ManagementClient("127.0.0.1", server.port) as management:
            management.request("DELETE", "publisher-mode", {"name": "orders"})
        with journal_locked(store_url):
            pending = send_async(conn, snd, ["y"])
            assert outcomes_within(conn, pending, 1.5) == [None]
        assert outcomes_within(conn, pending, 30) == [Delivery.ACCEPTED]
    finally:
        conn.close()


def test_a_live_subscriber_receives_before_the_commit(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    try:
        live = receiver(conn, "ticks", "topic", "live", credit=10)
        ordinary = receiver(conn, "ticks", "topic", credit=10)
        snd = sender(conn, "ticks", "topic")
        snd.send(Message(body="warm", durable=True))
        assert receive_bodies(live, 1) == ["warm"] and receive_bodies(ordinary, 1) == ["warm"]
        with journal_locked(store_url):
            pending = send_async(conn, snd, ["t1"])
            assert receive_bodies(live, 1) == ["t1"]
            assert nothing_buffered(conn, ordinary, wait=1.0)
            assert not pending[0].remote_state
        assert receive_bodies(ordinary, 1, timeout=30) == ["t1"]
        assert outcomes_within(conn, pending, 30) == [Delivery.ACCEPTED]
        assert nothing_buffered(conn, live)  # once, not again at the commit
    finally:
        conn.close()


def test_every_message_acknowledged_in_store_confirm_send_survives_kill(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    snd = conn.create_sender("confirmed", options=[Capabilities("queue")])
    deliveries: list[Delivery] = []
    killer = threading.Timer(0.6, server.kill)
    killer.start()
    try:
        for _batch in range(100):
            first = len(deliveries)
            deliveries += [snd.link.send(Message(body=i, durable=True)) for i in range(first, first + 300)]
            head = deliveries[first]
            conn.wait(lambda head=head: bool(head.remote_state) or not server.alive(), timeout=10)
            if not server.alive():
                break
    except Exception:
        pass  # the connection dies with the server
    killer.join()
    accepted = {i for i, d in enumerate(deliveries) if d.remote_state == Delivery.ACCEPTED}
    assert accepted, "nothing was acknowledged before the kill: the test proves nothing"
    server.start()
    conn = connect(server.url)
    try:
        rcv = receiver(conn, "confirmed", "queue", credit=1000)
        received: set[int] = set()
        while True:
            try:
                msg = rcv.receive(timeout=3)
            except Exception:
                break
            rcv.accept()
            received.add(msg.body)
        assert accepted <= received
    finally:
        conn.close()
