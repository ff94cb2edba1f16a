"""A client that vanishes in the middle of a multi-frame transfer (run as a child process, then SIGKILLed).

``python -m tests.support.vanishing_sender PORT ADDRESS SIZE`` attaches a sender to ADDRESS, builds one durable
message with a SIZE-byte body (split into transfer frames by the server's max-frame-size), writes only the first
half of those bytes, prints ``partway <sent> <total>`` and waits (at most a minute) for the test to kill it.
"""

from __future__ import annotations

import sys
import time

from proton import Message

from tests.support.rawamqp import RawClient


def main(port: int, address: str, size: int) -> None:
    client = RawClient(port)
    client.sasl_anonymous()
    connection = client.start_amqp("vanishing-sender")
    session = connection.session()
    session.open()
    link = session.sender("vanishing")
    link.target.address = address
    link.open()
    client.pump(lambda: link.credit > 0, "credit")
    link.delivery("v1")
    link.send(Message(body=b"V" * size, durable=True).encode())
    link.advance()
    transfer = client.output()
    sent = len(transfer) // 2
    client.send(transfer[:sent])
    print(f"partway {sent} {len(transfer)}", flush=True)
    time.sleep(60)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
