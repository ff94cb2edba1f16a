"""A tiny in-memory AMQP 1.0 broker on python-qpid-proton, used only to validate the rhea
interop client (tests/interop/rhea_client.js) before the real subgate server exists.

Run: ``python -m tests.infra.mini_broker [--port N]``; it prints ``{"port": N}`` once listening.

Behaviour:
* one FIFO queue per address; messages are accepted, queued and delivered to receivers with credit;
* anonymous relay: a null target routes each message by its ``to`` field;
* messages to addresses starting with ``reject`` are rejected (``amqp:not-allowed``);
* attaches to addresses starting with ``forbidden`` are refused (``amqp:unauthorized-access``);
* released / modified / unsettled-at-detach messages are requeued at the head; ``modified`` with
  ``delivery-failed`` and unsettled-at-detach increment the header delivery-count;
* a drain request is answered with ``sender.drained()`` once nothing is left to send;
* SASL: ANONYMOUS only (the bundled proton has no server-side PLAIN).
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import sys

from proton import Condition, Delivery, Message, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container

REFUSED_PREFIX = "forbidden"
REJECT_PREFIX = "reject"


class MiniBroker(MessagingHandler):
    def __init__(self, host: str, port: int) -> None:
        super().__init__(prefetch=100, auto_accept=False, auto_settle=True)
        self.host = host
        self.port = port
        self.queues: dict[str, collections.deque[Message]] = collections.defaultdict(collections.deque)
        self.consumers: dict[str, list] = collections.defaultdict(list)

    # ----------------------------------------------------------- connections
    def on_connection_bound(self, event) -> None:  # noqa: ANN001
        event.transport.sasl().allowed_mechs("ANONYMOUS")

    def on_connection_opening(self, event) -> None:  # noqa: ANN001
        event.connection.offered_capabilities = "ANONYMOUS-RELAY"

    # ----------------------------------------------------------------- links
    def on_link_opening(self, event) -> None:  # noqa: ANN001
        link = event.link
        address = link.remote_source.address if link.is_sender else link.remote_target.address
        if address is not None and address.startswith(REFUSED_PREFIX):
            # Answer the attach with a null terminus, then detach with an error (in on_link_opened).
            link.refuse = Condition("amqp:unauthorized-access", f"access to {address} is forbidden")
        elif link.is_sender and address is None:
            link.refuse = Condition("amqp:not-found", "a source address is required")
        if getattr(link, "refuse", None) is not None:
            terminus = link.source if link.is_sender else link.target
            terminus.type = Terminus.UNSPECIFIED  # encoded as a null source/target
            return
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)

    def on_link_opened(self, event) -> None:  # noqa: ANN001
        link = event.link
        refuse = getattr(link, "refuse", None)
        if refuse is not None:
            link.condition = refuse
            link.close()
            return
        if link.is_sender:
            link.address = link.remote_source.address
            link.outstanding = []
            self.consumers[link.address].append(link)
            self.pump(link.address)

    def on_link_closing(self, event) -> None:  # noqa: ANN001
        self.drop_link(event.link)

    def on_connection_closing(self, event) -> None:  # noqa: ANN001
        self.drop_connection(event.connection)

    def on_transport_closed(self, event) -> None:  # noqa: ANN001
        self.drop_connection(event.connection)

    def drop_connection(self, connection) -> None:  # noqa: ANN001
        if connection is None:
            return
        for links in list(self.consumers.values()):
            for link in list(links):
                if link.connection == connection:
                    self.drop_link(link)

    def drop_link(self, link) -> None:  # noqa: ANN001
        address = getattr(link, "address", None)
        if address is None or link not in self.consumers[address]:
            return
        self.consumers[address].remove(link)
        for dlv in reversed(link.outstanding):
            if not dlv.settled:
                msg = dlv.msg
                msg.delivery_count = (msg.delivery_count or 0) + 1
                self.queues[address].appendleft(msg)
        link.outstanding = []
        self.pump(address)

    # ------------------------------------------------------------- producing
    def on_message(self, event) -> None:  # noqa: ANN001
        dlv = event.delivery
        address = event.link.remote_target.address or event.message.address
        if address is None:
            dlv.local.condition = Condition("amqp:not-found", "no target address and no 'to'")
            dlv.update(Delivery.REJECTED)
            dlv.settle()
            return
        if address.startswith(REJECT_PREFIX):
            dlv.local.condition = Condition("amqp:not-allowed", f"{address} rejects every message")
            dlv.update(Delivery.REJECTED)
            dlv.settle()
            return
        self.queues[address].append(event.message)
        if not dlv.settled:
            dlv.update(Delivery.ACCEPTED)
            dlv.settle()
        else:
            dlv.settle()
        self.pump(address)

    # ------------------------------------------------------------- consuming
    def on_link_flow(self, event) -> None:  # noqa: ANN001
        link = event.link
        if link.is_sender and getattr(link, "address", None) is not None:
            self.pump(link.address)

    def pump(self, address: str) -> None:
        queue = self.queues[address]
        for link in self.consumers[address]:
            while queue and link.credit > 0:
                msg = queue.popleft()
                dlv = link.send(msg)
                dlv.msg = msg
                link.outstanding.append(dlv)
            if link.drain_mode and link.credit > 0 and not queue:
                link.drained()

    def on_accepted(self, event) -> None:  # noqa: ANN001
        self.forget(event.delivery)

    def on_rejected(self, event) -> None:  # noqa: ANN001
        self.forget(event.delivery)

    def on_released(self, event) -> None:  # noqa: ANN001
        dlv = event.delivery
        self.forget(dlv)
        msg = dlv.msg
        if dlv.remote_state == Delivery.MODIFIED and dlv.remote.failed:
            msg.delivery_count = (msg.delivery_count or 0) + 1
        address = dlv.link.address
        self.queues[address].appendleft(msg)
        self.pump(address)

    def forget(self, dlv) -> None:  # noqa: ANN001
        outstanding = getattr(dlv.link, "outstanding", [])
        if dlv in outstanding:
            outstanding.remove(dlv)


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    last_error: Exception | None = None
    for _attempt in range(5):
        port = args.port or free_port(args.host)
        container = Container(MiniBroker(args.host, port))
        try:
            container.listen(f"{args.host}:{port}")
        except OSError as err:
            last_error = err
            if args.port:
                break
            continue
        print(json.dumps({"port": port}), flush=True)
        container.run()
        return 0
    print(json.dumps({"error": str(last_error)}), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
