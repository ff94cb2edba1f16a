"""Raw-socket AMQP clients for the bad-input tests: exact bytes on the wire, nothing hidden by a client library.

``RawClient`` owns one loopback socket to a server. It writes arbitrary bytes, does the SASL exchange by hand,
and can drive a proton client ``Transport`` (no SASL layer, so it starts with the plain AMQP header) whose output
a test sends whole, cut short or followed by bytes of its own. ``performative``, ``frame`` and ``parse_frames``
build and read AMQP frames with ``proton.Data``. Every read is bounded by a deadline.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import Array, Connection, Data, Described, Transport, symbol, ulong

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
AMQP_FRAME = 0x00
SASL_FRAME = 0x01
FRAME_HEADER = struct.Struct(">IBBH")  # size, data offset (in 4-byte words), type, channel

SASL_MECHANISMS = 0x40
SASL_INIT = 0x41
SASL_CHALLENGE = 0x42
SASL_RESPONSE = 0x43
SASL_OUTCOME = 0x44
SASL_OK = 0
SASL_AUTH = 1
OPEN = 0x10
CLOSE = 0x18


def performative(code: int, fields: list[Any]) -> bytes:
    """The encoded body of a performative: ``described(ulong(code), list(fields))``."""
    data = Data()
    data.put_object(Described(ulong(code), fields))
    return bytes(data.encode())


def frame(body: bytes, *, frame_type: int = AMQP_FRAME, channel: int = 0) -> bytes:
    return FRAME_HEADER.pack(FRAME_HEADER.size + len(body), 2, frame_type, channel) + body


@dataclass(frozen=True)
class Frame:
    """One decoded frame; ``descriptor`` is None for an empty (heartbeat) frame."""

    frame_type: int
    channel: int
    descriptor: int | None
    fields: list[Any]

    def error(self) -> tuple[str, str] | None:
        """(condition, description) of a close/end/detach error field, when there is one."""
        for field in self.fields:
            if isinstance(field, Described) and int(field.descriptor) == 0x1D:
                condition, description = (list(field.value) + [None, None])[:2]
                return str(condition), description
        return None


def parse_frames(data: bytes) -> tuple[list[Frame], bytes]:
    """Split ``data`` (with no protocol header) into whole frames; returns them and the unparsed rest."""
    frames = []
    while len(data) >= FRAME_HEADER.size:
        size, doff, frame_type, channel = FRAME_HEADER.unpack_from(data)
        if len(data) < size:
            break
        body, data = data[doff * 4 : size], data[size:]
        if not body:
            frames.append(Frame(frame_type, channel, None, []))
            continue
        decoded = Data()
        decoded.decode(body)
        decoded.rewind()
        decoded.next()
        value = decoded.get_object()
        # Binary values come back as memoryviews into ``decoded``: copy them before it goes away.
        fields = [bytes(field) if isinstance(field, memoryview) else field for field in value.value]
        frames.append(Frame(frame_type, channel, int(value.descriptor), fields))
    return frames, data


class RawClient:
    """One socket to ``127.0.0.1:port`` (see the module docstring)."""

    def __init__(
        self,
        port: int,
        *,
        timeout: float = 10.0,
        host: str = "127.0.0.1",
        source: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``source``: the local address to connect from (127.0.0.2 is another loopback client); ``tls``: wrap
        the socket in TLS first (the handshake is done here, blocking)."""
        self.timeout = timeout
        sock = socket.create_connection((host, port), timeout=timeout, source_address=(source, 0) if source else None)
        self.sock = tls.wrap_socket(sock, server_hostname="localhost") if tls is not None else sock
        self.offered: list[str] = []  # the mechanisms of the last sasl-mechanisms frame read
        self.received = b""  # bytes read but not yet consumed by a reader below
        self.connection: Connection | None = None
        self.transport: Transport | None = None

    # -- raw bytes -----------------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_some(self, deadline: float) -> bool:
        """Read once; False at EOF (or a reset). Raises TimeoutError past ``deadline``."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no answer within {self.timeout}s; got {self.received!r}")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            raise TimeoutError(f"no answer within {self.timeout}s; got {self.received!r}") from None
        except ConnectionResetError:
            return False
        self.received += chunk
        return bool(chunk)

    def read_exactly(self, count: int) -> bytes:
        deadline = time.monotonic() + self.timeout
        while len(self.received) < count:
            if not self._read_some(deadline):
                raise EOFError(f"closed after {self.received!r}, expected {count} bytes")
        data, self.received = self.received[:count], self.received[count:]
        return data

    def read_to_eof(self) -> bytes:
        """Everything the server writes until it closes the socket (TimeoutError if it never does)."""
        deadline = time.monotonic() + self.timeout
        while self._read_some(deadline):
            pass
        data, self.received = self.received, b""
        return data

    def read_frame(self) -> Frame:
        header = self.read_exactly(FRAME_HEADER.size)
        self.received = header + self.received
        frames, rest = parse_frames(self.read_exactly(FRAME_HEADER.unpack(header)[0]))
        assert len(frames) == 1 and not rest, (frames, rest)
        return frames[0]

    # -- SASL by hand --------------------------------------------------------------------------------------
    def sasl(self, mechanism: str, response: bytes) -> int:
        """SASL header and sasl-init in one write; checks the header and mechanisms, returns the outcome code."""
        init = performative(SASL_INIT, [symbol(mechanism), response, None])
        self.send(SASL_HEADER + frame(init, frame_type=SASL_FRAME))
        assert self.read_exactly(len(SASL_HEADER)) == SASL_HEADER
        mechanisms = self.read_frame()
        assert mechanisms.descriptor == SASL_MECHANISMS, mechanisms
        offered = mechanisms.fields[0] if mechanisms.fields else []
        names = offered.elements if isinstance(offered, Array) else [offered]  # one symbol may come bare
        self.offered = [str(name) for name in names]
        outcome = self.read_frame()
        assert outcome.descriptor == SASL_OUTCOME, outcome
        return int(outcome.fields[0])

    def sasl_anonymous(self) -> None:
        assert self.sasl("ANONYMOUS", b"") == SASL_OK

    # -- a proton client transport over this socket ----------------------------------------------------------
    def start_amqp(self, container_id: str = "raw-client") -> Connection:
        """Bind a proton client transport (no SASL layer) and open its connection; nothing is sent yet."""
        connection = Connection()
        connection.container = container_id
        transport = Transport(Transport.CLIENT)
        transport.bind(connection)
        connection.open()
        self.connection, self.transport = connection, transport
        return connection

    def output(self) -> bytes:
        """Take every byte the client transport has to send, without sending it."""
        transport = self.transport
        assert transport is not None
        out = b""
        for _ in range(100_000):
            pending = transport.pending()
            if pending <= 0:
                break
            chunk = bytes(transport.peek(pending))
            transport.pop(len(chunk))
            out += chunk
        return out

    def pump(self, until: Callable[[], bool], what: str) -> None:
        """Move bytes between the socket and the client transport until ``until()`` holds."""
        deadline = time.monotonic() + self.timeout
        while True:
            self.send(self.output())
            if until():
                return
            if not self.received and not self._read_some(deadline):
                raise EOFError(f"the server closed the socket while waiting for {what}")
            self._feed_transport()

    def _feed_transport(self) -> None:
        transport = self.transport
        assert transport is not None
        data, self.received = self.received, b""
        while data:
            capacity = transport.capacity()
            assert capacity > 0, "the client transport stopped reading"
            transport.push(data[:capacity])
            data = data[capacity:]

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
