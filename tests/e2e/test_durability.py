"""Restart recovery and crash safety, on SQLite and on a real PostgreSQL (the ``store_url`` fixture)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender, settle_last


def test_queue_and_unacknowledged_messages_survive_restart(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    send_all(sender(conn, "durable.q", "queue"), [f"m{i}" for i in range(20)], durable=True)
    rcv = receiver(conn, "durable.q", "queue", credit=10)
    assert receive_bodies(rcv, 5) == [f"m{i}" for i in range(5)]  # acknowledged: gone for good
    rcv.receive(timeout=5)  # m5 delivered but never settled: must come back, marked redelivered
    conn.close()
    assert server.stop() == 0
    server.start()
    conn = connect(server.url)
    rcv = receiver(conn, "durable.q", "queue", credit=50)
    first = rcv.receive(timeout=10)
    rcv.accept()
    assert first.body == "m5"
    assert first.delivery_count == 1
    assert receive_bodies(rcv, 14) == [f"m{i}" for i in range(6, 20)]
    assert nothing_arrives(rcv)
    conn.close()


def test_released_and_failed_counts_survive_restart(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    send_all(sender(conn, "counts", "queue"), ["x"], durable=True)
    rcv = receiver(conn, "counts", "queue", credit=1)
    rcv.receive(timeout=5)
    settle_last(rcv, "modified-failed")  # count 1
    again = rcv.receive(timeout=5)
    assert again.delivery_count == 1
    conn.close()  # unsettled at close: counted as failed again (2)
    server.stop()
    server.start()
    conn = connect(server.url)
    msg = receiver(conn, "counts", "queue").receive(timeout=10)
    assert msg.body == "x"
    assert msg.delivery_count >= 1
    conn.close()


def test_non_persistent_messages_do_not_survive_restart(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    snd = sender(conn, "mixed", "queue")
    send_all(snd, ["persistent"], durable=True)
    send_all(snd, ["transient"], durable=False)
    conn.close()
    server.stop()
    server.start()
    conn = connect(server.url)
    rcv = receiver(conn, "mixed", "queue")
    assert receive_bodies(rcv, 1) == ["persistent"]
    assert nothing_arrives(rcv)
    conn.close()


LOAD_CLIENT = r"""
import sys, time
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

class Load(MessagingHandler):
    # Send as fast as credit allows; print the id of every message the server accepted, as it happens.
    # No reconnect: when the server is killed, the outcomes already received are printed and the process ends.
    def __init__(self, url, total):
        super().__init__()
        self.url, self.total, self.sent = url, total, 0
    def on_start(self, event):
        conn = event.container.connect(self.url, reconnect=False)
        event.container.create_sender(conn, "crash.q")
    def on_sendable(self, event):
        while event.sender.credit and self.sent < self.total:
            event.sender.send(Message(id=self.sent, body="x" * 512, durable=True))
            self.sent += 1
    def on_accepted(self, event):
        print(event.delivery.tag, flush=True)

Container(Load(sys.argv[1], int(sys.argv[2]))).run()
"""


def test_kill_9_mid_load_loses_no_acknowledged_message(make_server, store_url, tmp_path):
    server = make_server(store_url)
    out_path = tmp_path / "accepted.txt"
    with open(out_path, "w") as out:
        load = subprocess.Popen([sys.executable, "-c", LOAD_CLIENT, server.url, "200000"], stdout=out)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and out_path.stat().st_size < 4000:  # some hundreds acknowledged
            time.sleep(0.05)
        server.kill()  # SIGKILL while the load is still running
        try:
            load.wait(15)
        except subprocess.TimeoutExpired:
            load.kill()
            load.wait(5)
    acknowledged = {line.strip() for line in out_path.read_text().splitlines() if line.strip()}
    assert len(acknowledged) > 100, "the load did not get going before the kill"
    server.start()
    conn = connect(server.url)
    rcv = receiver(conn, "crash.q", "queue", credit=1000)
    received: set[str] = set()
    while True:
        try:
            msg = rcv.receive(timeout=3)
        except Exception:
            break
        received.add(str(msg.id))
        rcv.accept()
    conn.close()
    # proton tags are the decimal send counter starting at 1; ids start at 0
    acknowledged_ids = {str(int(tag) - 1) for tag in acknowledged}
    missing = acknowledged_ids - received
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
