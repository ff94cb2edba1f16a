"""A load for the backup tests, run as its own process: ``python -m tests.support.backup_load URL USER PASSWORD``.

One connection (SASL PLAIN) with three publishers of persistent messages, as fast as credit allows: the queue
``bk.q`` (nobody consumes it), the topic ``bk/t`` (a durable subscription collects it) and the queue ``bk.c``,
which a consumer on the same connection takes and accepts. Every message's ``id`` is its key
(``q-17``, ``t-3``, ``c-40``: the stream and its number, in send order) and its body is ``body_for(key)``.
Prints ``P key`` when the server confirmed a publish (``accepted``) and ``A key`` when the consumer accepted a
delivery, one line each, flushed at once: the test reads the file while the load runs. Ends on SIGTERM, or when
every stream sent ``MAX_PER_STREAM``.
"""

from __future__ import annotations

import sys
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from tests.support.amqp import Capabilities

STREAMS = {"q": ("bk.q", "queue"), "t": ("bk/t", "topic"), "c": ("bk.c", "queue")}
MAX_PER_STREAM = 50_000


def body_for(key: str) -> bytes:
    """A body of 200 to 3 000 bytes that only ``key`` gives (so a row can be checked whole)."""
    number = int(key.split("-")[1])
    size = 200 + (number * 977) % 2800
    seed = (key + "|").encode()
    return (seed * (size // len(seed) + 1))[:size]


class Load(MessagingHandler):  # type: ignore[misc]
    def __init__(self, url: str, user: str, password: str) -> None:
        super().__init__(auto_accept=False)
        self.url, self.user, self.password = url, user, password
        self.sent = dict.fromkeys(STREAMS, 0)
        self.keys: dict[tuple[str, str], str] = {}
        self.stream_of: dict[str, str] = {}

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(
            self.url,
            user=self.user,
            password=self.password,
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
            reconnect=False,
        )
        for stream, (address, kind) in STREAMS.items():
            sender = event.container.create_sender(conn, address, name=f"load-{stream}", options=[Capabilities(kind)])
            self.stream_of[sender.name] = stream
        event.container.create_receiver(conn, "bk.c", name="load-consumer", options=[Capabilities("queue")])

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        stream = self.stream_of[sender.name]
        while sender.credit and self.sent[stream] < MAX_PER_STREAM:
            key = f"{stream}-{self.sent[stream]}"
            delivery = sender.send(Message(id=key, body=body_for(key), durable=True))
            self.keys[(sender.name, str(delivery.tag))] = key
            self.sent[stream] += 1

    def on_accepted(self, event: Any) -> None:
        key = self.keys.pop((event.link.name, str(event.delivery.tag)), None)
        if key is not None:
            print("P", key, flush=True)

    def on_message(self, event: Any) -> None:
        self.accept(event.delivery)
        print("A", event.message.id, flush=True)


if __name__ == "__main__":
    Container(Load(sys.argv[1], sys.argv[2], sys.argv[3])).run()
