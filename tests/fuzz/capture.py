"""Recording what real clients send: a loopback proxy between a python-qpid-proton client and a server.

``record_sessions(port, user, password)`` runs a few ordinary client sessions (SASL ANONYMOUS and PLAIN; a
sender with application properties, a receiver with a JMS selector, settlements, detach, close) through a
proxy and returns each session's client-to-server bytes cut into headers and frames (``cases.split_session``):
the material the ``mutated`` family works on.
"""

from __future__ import annotations

import socket
import threading
import uuid

from proton import Message
from proton.reactor import Selector

from tests.fuzz.cases import Capture, split_session
from tests.support.amqp import connect


class RecordingProxy:
    """Accepts one connection at a time on a free port and relays it to the server, keeping the client's bytes."""

    def __init__(self, server_port: int) -> None:
        self._server_port = server_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(10)
        self.port = self._listener.getsockname()[1]
        self.sessions: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stop = False
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._server_port), timeout=10)
            recorded = bytearray()
            back = threading.Thread(target=_pump, args=(upstream, client, None), daemon=True)
            back.start()
            _pump(client, upstream, recorded)
            back.join(10)
            self.sessions.append(bytes(recorded))

    def close(self) -> None:
        self._stop = True
        self._listener.close()
        self._thread.join(10)


def _pump(source: socket.socket, sink: socket.socket, recorded: bytearray | None) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            if recorded is not None:
                recorded += data
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (sink, source):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _session(url: str, **credentials: str) -> None:
    queue = f"fuzz-{uuid.uuid4().hex[:8]}"
    conn = connect(url, **credentials)
    try:
        snd = conn.create_sender(queue, name=f"snd-{queue}")
        for color in ("red", "blue"):
            snd.send(Message(body=f"{color} body", subject="s", reply_to="r", properties={"color": color}))
        rcv = conn.create_receiver(queue, name=f"rcv-{queue}", options=[Selector("color = 'red'")], credit=5)
        rcv.receive(timeout=10)
        rcv.accept()
        rcv.close()
        snd.close()
    finally:
        conn.close()


def record_sessions(server_port: int, user: str | None = None, password: str | None = None) -> list[Capture]:
    proxy = RecordingProxy(server_port)
    url = f"amqp://127.0.0.1:{proxy.port}"
    try:
        _session(url)
        if user is not None and password is not None:
            _session(url, user=user, password=password)
    finally:
        proxy.close()
    return [split_session(stream) for stream in proxy.sessions if stream]
