"""atheris target: the SASL exchange (``subgate.gateway.sasl.SaslServer``) fed an arbitrary byte stream.

The input is what a client sends, cut into chunks whose sizes come from the input's own bytes (so a recorded
exchange is a useful seed and every cut is tried). Credentials get a verdict at once (accepted when the input's
length is even). Contract checked (the module's docstring): nothing the peer sends raises; ``SaslError`` only
for bytes fed after the hand-off; a protocol violation leaves the state ERROR; before the verdict at most one
frame (``MAX_FRAME_SIZE``) plus one chunk is buffered; events come in an order the state table allows.
"""

from __future__ import annotations

from proton import Data, Described, symbol, ulong

from subgate.gateway.sasl import (
    AMQP_HEADER,
    MAX_FRAME_SIZE,
    SASL_HEADER,
    CredentialsReceived,
    NoSaslHeader,
    ProtocolViolation,
    SaslDone,
    SaslError,
    SaslServer,
    SaslState,
)

INSTRUMENT = ("subgate.gateway.sasl", "subgate.engine.sasl_mechanisms")
MAX_LEN = 2048
DICTIONARY = (
    SASL_HEADER,
    AMQP_HEADER,
    b"AMQP\x02\x01\x00\x00",
    b"\x02\x01\x00\x00",
    b"\x00\x53\x41",
    b"\xa3\x05PLAIN",
    b"\xa3\x09ANONYMOUS",
    b"\xa3\x08EXTERNAL",
    b"\xa3\x18amqp:sasl-init:list",
    b"\x00alice\x00secret",
)
_MECHANISM_SETS = (("PLAIN",), ("ANONYMOUS", "PLAIN"), ("EXTERNAL", "PLAIN", "ANONYMOUS"))
_PRE_VERDICT = (SaslState.AWAIT_HEADER, SaslState.AWAIT_INIT)


def _frame(descriptor: object, fields: list[object]) -> bytes:
    data = Data()
    data.put_object(Described(descriptor, fields))
    body = data.encode()
    return (8 + len(body)).to_bytes(4, "big") + b"\x02\x01\x00\x00" + body


def seeds() -> list[bytes]:
    """Real exchanges: PLAIN, ANONYMOUS and EXTERNAL sasl-inits, a heartbeat, a symbolic descriptor, no SASL."""
    plain = _frame(ulong(0x41), [symbol("PLAIN"), b"\x00alice\x00secret", "localhost"])
    anonymous = _frame(ulong(0x41), [symbol("ANONYMOUS"), b"trace", None])
    external = _frame(ulong(0x41), [symbol("EXTERNAL"), b"", None])
    by_name = _frame(symbol("amqp:sasl-init:list"), [symbol("PLAIN"), b"\x00bob\x00pw"])
    heartbeat = b"\x00\x00\x00\x08\x02\x01\x00\x00"
    return [
        SASL_HEADER + plain + AMQP_HEADER,
        SASL_HEADER + anonymous + AMQP_HEADER + b"\x00\x00\x00\x08\x02\x00\x00\x00",
        SASL_HEADER + external,
        SASL_HEADER + heartbeat + by_name,
        AMQP_HEADER + b"\x00\x00\x00\x08\x02\x00\x00\x00",
        SASL_HEADER + _frame(ulong(0x43), [b"response"]),
    ]


def test_one(data: bytes) -> None:
    server = SaslServer(_MECHANISM_SETS[len(data) % len(_MECHANISM_SETS)])
    verdict = len(data) % 2 == 0
    handed_off = False
    pos = 0
    while pos < len(data):
        size = 1 + data[pos] % 61
        chunk = data[pos : pos + size]
        pos += size
        try:
            server.receive_data(chunk)
        except SaslError:
            assert handed_off, "SaslError before the hand-off"
            return
        if server.state in _PRE_VERDICT:
            assert len(server._buffer) <= MAX_FRAME_SIZE + len(chunk), len(server._buffer)
        handed_off = _drain(server, verdict) or handed_off
        server.data_to_send()


def _drain(server: SaslServer, verdict: bool) -> bool:
    """Take every event; True when the connection was handed off to the AMQP transport."""
    handed_off = False
    while (event := server.next_event()) is not None:
        if isinstance(event, CredentialsReceived):
            assert server.state is SaslState.AWAIT_VERDICT, server.state
            server.complete(verdict)
        elif isinstance(event, ProtocolViolation):
            assert server.state is SaslState.ERROR, server.state
        elif isinstance(event, SaslDone):
            handed_off = event.authenticated
            assert event.authenticated == (server.state is SaslState.AUTHENTICATED), server.state
        else:
            assert isinstance(event, NoSaslHeader), event
            assert server.state is SaslState.NO_SASL, server.state
            handed_off = True
    return handed_off
