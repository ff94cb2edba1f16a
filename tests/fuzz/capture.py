"""Recording real client sessions on loopback, for the fuzz cases to mutate.

``RecordingProxy`` listens on 127.0.0.1 (port 0) and relays each accepted connection to the server, byte for
byte, with one thread per direction; it keeps what the client wrote, chunk by chunk, with the number of server
units (protocol headers and frames) relayed before each chunk. ``record_sessions`` runs the real clients through
it: python-qpid-proton (``tests.support.amqp``) and the Qpid-JMS-shaped ``JmsWire`` (``tests.support.jms``), each
anonymous and with SASL PLAIN, each going through open, begin, a sender and a receiver with a JMS selector,
transfer, disposition, flow, detach, end and close. Every socket has a timeout and every join a bound.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from proton import Message
from proton.reactor import Selector

from tests.fuzz.cases import Capture, Step
from tests.fuzz.wire import split_units
from tests.support.amqp import connect, receiver, sender
from tests.support.jms import QUEUE, JmsWire

TIMEOUT = 10.0


@dataclass
class _Recording:
    chunks: list[tuple[int, bytes]] = field(default_factory=list)  # (server units seen, client bytes)
    server_bytes: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def server_units(self) -> int:
        return len(split_units(self.server_bytes))


class RecordingProxy:
    """See the module docstring. Use as a context manager; ``take()`` returns the last connection's recording."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.recordings: list[_Recording] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.server_port), timeout=TIMEOUT)
            client.settimeout(TIMEOUT)
            recording = _Recording()
            self.recordings.append(recording)
            for args in ((client, upstream, recording, True), (upstream, client, recording, False)):
                thread = threading.Thread(target=self._relay, args=args, daemon=True)
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _relay(src: socket.socket, dst: socket.socket, recording: _Recording, from_client: bool) -> None:
        try:
            while chunk := src.recv(65536):
                with recording.lock:
                    if from_client:
                        recording.chunks.append((recording.server_units(), chunk))
                    else:
                        recording.server_bytes += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
                try:
                    sock.shutdown(how)
                except OSError:
                    pass

    def take(self, name: str, server: str, container_id: str) -> Capture:
        """Wait (bounded) for the relays to finish and cut the last recording into units."""
        for thread in self._threads:
            thread.join(TIMEOUT)
        recording = self.recordings[-1]
        units: list[Step] = []
        for after, chunk in recording.chunks:
            units.extend(Step(after, unit) for unit in split_units(chunk))
        return Capture(name, server, tuple(units), container_id.encode())

    def close(self) -> None:
        self._stop.set()
        self._acceptor.join(TIMEOUT)
        self.listener.close()

    def __enter__(self) -> RecordingProxy:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _proton_session(port: int, credentials: dict[str, str]) -> str:
    """A proton client: sender and selector receiver on one queue, a message each way, then close."""
    queue = f"fuzz.capture.{uuid.uuid4().hex[:6]}"
    conn = connect(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT, **credentials)
    container_id = conn.container.container_id
    rcv = receiver(conn, queue, "queue", credit=10, options=[Selector("color = 'red' AND n > 1")])
    snd = sender(conn, queue, "queue")
    snd.send(Message(body="hello", subject="s", properties={"color": "red", "n": 2}, reply_to="replies"))
    rcv.receive(timeout=TIMEOUT)
    rcv.accept()
    rcv.close()
    snd.close()
    conn.close()
    return str(container_id)


def _jms_session(port: int, credentials: dict[str, str]) -> str:
    """The Qpid-JMS-shaped client: producer, selector consumer, a message, ack, detach, close."""
    queue = f"fuzz.capture.{uuid.uuid4().hex[:6]}"
    with JmsWire.connect(f"127.0.0.1:{port}", timeout=TIMEOUT, **credentials) as jms:  # closes on exit
        session = jms.session()
        consumer = session.consumer(queue, QUEUE, selector="color = 'red' AND n > 1")
        session.producer(queue, QUEUE).send("hello", properties={"color": "red", "n": 2})
        consumer.receive().accept()
        consumer.close()
        return jms.container_id


CLIENTS: dict[str, Callable[[int, dict[str, str]], str]] = {"proton": _proton_session, "jms": _jms_session}


def record_sessions(ports: dict[str, int], credentials: dict[str, str]) -> list[Capture]:
    """One capture per client and server: ``ports`` maps "anonymous" and "plain" to a server's port."""
    captures = []
    for server, port in ports.items():
        for name, client in CLIENTS.items():
            with RecordingProxy(port) as proxy:
                container_id = client(proxy.port, credentials if server == "plain" else {})
                captures.append(proxy.take(f"{name}-{server}", server, container_id))
    return captures
