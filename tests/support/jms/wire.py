"""The socket and the frames on it: ``Wire`` owns one loopback socket and a proton client ``Transport`` +
``Connection`` + ``Collector``, and nothing else: no thread, no reactor. Every wait goes through
``Wire.pump(until, timeout)``, which moves bytes both ways, hands the collector's events to ``_dispatch`` (the JMS
connection, ``JmsWire``, says what they mean) and raises ``TimeoutError`` (or ``ConnectionLost``) when ``until()``
does not hold in time.

Here too: SASL by hand (before the transport exists), the log of every frame in both directions
(``Wire.frames``), and the rewriter (``_shape``) that every frame proton writes passes through before it reaches
the socket, so that it looks like Qpid JMS's (see the package docstring).
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import Collector, Connection, Described, Event, Transport, symbol, uint

from tests.support.jms.errors import ConnectionLost, JmsError, RemoteError, SaslFailed
from tests.support.jms.frames import (
    _FRAME,
    _NAMES,
    _TERMINUS_DEFAULTS,
    ATTACH,
    BEGIN,
    FLOW,
    HEADER_SIZE,
    MODIFIED,
    SASL_FRAME,
    SASL_HEADER,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    WireFrame,
    _decode_frame,
    _encode,
    _frame_bytes,
    _set,
    _Splitter,
    _trim,
    described_list,
    symbol_names,
    symbols,
)

TIMEOUT = 10.0
MAX_FRAME_SIZE = 1024 * 1024
HANDLE_MAX = 65535


def _shape_terminus(value: Any, default_outcome: Any = None) -> Any:
    if not isinstance(value, Described):
        return value
    code = int(value.descriptor)
    fields = list(value.value)
    if default_outcome is not None:
        fields = _set(fields, 8, default_outcome)
    return Described(value.descriptor, _trim(fields, _TERMINUS_DEFAULTS.get(code, ())))


@dataclass
class _AttachShape:
    """What the rewriter changes on one outgoing attach, beyond the defaults every attach gets."""

    default_outcome: bool = False
    desired_capabilities: tuple[str, ...] = ()


class Wire:
    """The bytes and frames of one connection; ``JmsWire`` (in ``connection``) builds the JMS client on it."""

    def __init__(self, host: str, port: int, *, timeout: float = TIMEOUT) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.frames: list[WireFrame] = []
        self.connection = Connection()
        self.collector = Collector()
        self.transport: Transport | None = None
        self.remote_error: RemoteError | None = None
        self.sasl_mechanism: str | None = None
        self.socket_closed = False
        self._inbuf = b""
        self._incoming = _Splitter(header=True)
        self._outgoing = _Splitter(header=True)
        self._attach_shapes: dict[str, deque[_AttachShape]] = {}
        self._fresh_sessions: set[int] = set()
        self.sock = socket.create_connection((host, port), timeout=timeout)

    # -- SASL (by hand, before the transport exists) ---------------------------------------------------------------
    def sasl(self, user: str | None, password: str | None) -> None:
        """§1.1: one mechanism, PLAIN when credentials are given and offered, else ANONYMOUS."""
        self.sock.sendall(SASL_HEADER)
        self._log(True, SASL_HEADER)
        if self._read_exact(HEADER_SIZE) != SASL_HEADER:
            raise JmsError("the broker did not answer with a SASL header")
        offered = symbol_names(self._read_sasl_frame(SASL_MECHANISMS)["sasl-server-mechanisms"])
        if user and password and "PLAIN" in offered:
            mechanism, response = "PLAIN", f"\x00{user}\x00{password}".encode()
        elif "ANONYMOUS" in offered:
            mechanism, response = "ANONYMOUS", b""
        else:
            raise JmsError(f"No supported mechanism among {sorted(offered)}")
        self.sasl_mechanism = mechanism
        init = _frame_bytes(SASL_FRAME, 0, _encode(described_list(SASL_INIT, [symbol(mechanism), response, self.host])))
        self.sock.sendall(init)
        self._log(True, init)
        code = int(self._read_sasl_frame(SASL_OUTCOME)["code"])
        if code != 0:
            raise SaslFailed(code)

    # -- pumping ---------------------------------------------------------------------------------------------------
    def pump(self, until: Callable[[], Any], timeout: float | None = None, what: str = "the broker") -> None:
        """Move bytes and handle events until ``until()`` is true.

        Raises:
            TimeoutError after ``timeout`` (default: the connection's), ConnectionLost if the socket closes first.
        """
        limit = self.timeout if timeout is None else timeout
        if not self._pump(until, limit):
            if self.socket_closed:
                raise ConnectionLost(f"connection closed while waiting for {what}", self.remote_error)
            raise TimeoutError(f"timed out after {limit}s waiting for {what}")

    def wait(self, seconds: float) -> None:
        """Keep the connection serviced for ``seconds`` (e.g. to show that nothing arrives)."""
        self._pump(lambda: False, seconds)

    def flush(self) -> None:
        """Handle pending events and write what proton has to send, without reading."""
        self._service()

    def _pump(self, until: Callable[[], Any], timeout: float | None) -> bool:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        for _ in range(10_000_000):
            self._service()
            if until():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.socket_closed:
                return False
            self._read(min(remaining, 1.0))
        return False

    def _read(self, wait: float) -> None:
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._received(chunk)
            return
        self.socket_closed = True
        if self.transport is not None:
            self.transport.close_tail()

    def _received(self, data: bytes) -> None:
        if not data:
            return
        for chunk in self._incoming.feed(data):
            self._log(False, chunk)
        transport = self.transport
        assert transport is not None
        while data:
            capacity = transport.capacity()
            if capacity <= 0:
                return
            transport.push(data[:capacity])
            data = data[capacity:]

    def _service(self) -> None:
        if self.transport is None:
            return
        for _ in range(100_000):
            handled = 0
            event = self.collector.peek()
            while event is not None and handled < 10_000:
                self._dispatch(event)
                self.collector.pop()
                handled += 1
                event = self.collector.peek()
            self.transport.tick(time.monotonic())
            if not self._write() and not handled:
                return

    def _write(self) -> bool:
        transport = self.transport
        assert transport is not None
        pending = transport.pending()
        if pending <= 0:
            return False
        data = bytes(transport.peek(pending))
        transport.pop(len(data))
        out = b"".join(self._shape_chunk(chunk) for chunk in self._outgoing.feed(data))
        if out and not self.socket_closed:
            self.sock.settimeout(self.timeout)
            try:
                self.sock.sendall(out)
            except OSError:
                self.socket_closed = True
        return True

    # -- the frame rewriter and log --------------------------------------------------------------------------------
    def _shape_chunk(self, chunk: bytes) -> bytes:
        if len(chunk) == HEADER_SIZE and chunk.startswith(b"AMQP"):
            return chunk
        frame = _decode_frame(True, chunk)
        if frame.code == BEGIN:
            self._fresh_sessions.add(frame.channel)
        elif frame.channel in self._fresh_sessions:
            self._fresh_sessions.discard(frame.channel)
            if frame.code == FLOW and frame["handle"] is None:
                return b""  # proton-c follows each begin with a session flow; proton-j does not
        fields = self._shape(frame)
        if fields is not None:
            body = _encode(described_list(frame.code or 0, fields)) + frame.payload
            chunk = _frame_bytes(frame.frame_type, frame.channel, body)
            frame = WireFrame(True, frame.frame_type, frame.channel, frame.code, fields, frame.payload)
        self.frames.append(frame)
        return chunk

    def _shape(self, frame: WireFrame) -> list[Any] | None:
        """The fields to write instead of proton-c's, or None to keep the frame."""
        if frame.code == BEGIN:
            return _set(frame.fields, 4, uint(HANDLE_MAX))
        if frame.code != ATTACH:
            return None
        fields = _set(frame.fields, 10, None)  # max-message-size (index 10): not set by Qpid JMS
        queue = self._attach_shapes.get(str(fields[0]))
        shape = queue.popleft() if queue else _AttachShape()
        receiver = bool(fields[2])
        outcome = described_list(MODIFIED, [True]) if shape.default_outcome else None
        fields[5] = _shape_terminus(fields[5], outcome)
        fields[6] = _shape_terminus(fields[6])
        if receiver:
            fields[9] = None  # initial-delivery-count: senders only
        if shape.desired_capabilities:
            fields = _set(fields, 12, symbols(*shape.desired_capabilities))
        return _trim(fields)

    def _expect_attach(self, name: str, shape: _AttachShape) -> None:
        self._attach_shapes.setdefault(name, deque()).append(shape)

    def _log(self, sent: bool, chunk: bytes) -> None:
        if len(chunk) == HEADER_SIZE and chunk.startswith(b"AMQP"):
            return
        self.frames.append(_decode_frame(sent, chunk))

    def sent(self, name: str | None = None) -> list[WireFrame]:
        """Frames this client wrote, optionally only one performative (``"attach"``, ``"flow"`` ...)."""
        return [f for f in self.frames if f.sent and (name is None or f.name == name)]

    def received(self, name: str | None = None) -> list[WireFrame]:
        return [f for f in self.frames if not f.sent and (name is None or f.name == name)]

    def last_attach_from_broker(self, link_name: str) -> WireFrame | None:
        return next((f for f in reversed(self.received("attach")) if f["name"] == link_name), None)

    # -- SASL reads (before the transport exists) ------------------------------------------------------------------
    def _read_exact(self, count: int) -> bytes:
        deadline = time.monotonic() + self.timeout
        while len(self._inbuf) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"SASL: no answer within {self.timeout}s")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionLost("the broker closed the socket during SASL")
            self._inbuf += chunk
        data, self._inbuf = self._inbuf[:count], self._inbuf[count:]
        return data

    def _read_sasl_frame(self, expected: int) -> WireFrame:
        header = self._read_exact(_FRAME.size)
        raw = header + self._read_exact(_FRAME.unpack(header)[0] - _FRAME.size)
        frame = _decode_frame(False, raw)
        self.frames.append(frame)
        if frame.code != expected:
            raise JmsError(f"expected {_NAMES[expected]}, got {frame!r}")
        return frame

    # -- events ----------------------------------------------------------------------------------------------------
    def _dispatch(self, event: Event) -> None:
        """Handle one collector event (``JmsWire`` does)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Drop the socket without a frame (a crash or a TCP loss, §2.6)."""
        self.socket_closed = True
        self.sock.close()
