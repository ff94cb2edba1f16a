"""gateway.sasl: the SASL exchange against a real proton client transport, plus hand-built frames.

The end-to-end cases pump bytes in memory between a proton client ``Transport`` and ``SaslServer``; once
``SaslDone(authenticated=True)`` (or ``NoSaslHeader``) comes out, the leftover goes to a proton
``Transport(Transport.SERVER)`` with no SASL layer and pumping goes on until each side sees the other's open.
The hand-built cases use a tiny AMQP encoder written here, independent of the module's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from proton import SASL, Collector, Connection, Data, Described, Endpoint, Transport

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

CLIENT_ID = "client-container"
SERVER_ID = "subgate-test"
USERS = {"alice": "wonderland", "jürgen": "pässwörd"}

# -- a tiny AMQP encoder for hand-built frames ---------------------------------------------------------------


def _sized(code8: int, code32: int, payload: bytes, wide: bool) -> bytes:
    if wide:
        return bytes([code32]) + len(payload).to_bytes(4, "big") + payload
    return bytes([code8, len(payload)]) + payload


def sym(text: str, wide: bool = False) -> bytes:
    return _sized(0xA3, 0xB3, text.encode("ascii"), wide)


def string(text: str, wide: bool = False) -> bytes:
    return _sized(0xA1, 0xB1, text.encode("utf-8"), wide)


def vbin(raw: bytes, wide: bool = False) -> bytes:
    return _sized(0xA0, 0xB0, raw, wide)


NULL = b"\x40"
UINT_0 = b"\x43"


def lst(*items: bytes, wide: bool = False) -> bytes:
    if not items and not wide:
        return b"\x45"  # list0
    body = b"".join(items)
    if wide:
        return b"\xd0" + (len(body) + 4).to_bytes(4, "big") + len(items).to_bytes(4, "big") + body
    return bytes([0xC0, len(body) + 1, len(items)]) + body


def smallulong(code: int) -> bytes:
    return bytes([0x53, code])


def ulong(code: int) -> bytes:
    return b"\x80" + code.to_bytes(8, "big")


def described(descriptor: bytes, value: bytes) -> bytes:
    return b"\x00" + descriptor + value


def frame(body: bytes, *, doff: int = 2, frame_type: int = 1, channel: int = 0) -> bytes:
    extended = bytes(doff * 4 - 8) if doff >= 2 else b""
    size = 8 + len(extended) + len(body)
    return size.to_bytes(4, "big") + bytes([doff, frame_type]) + channel.to_bytes(2, "big") + extended + body


def sasl_init(mechanism: str, response: bytes | None = None, hostname: str | None = None) -> bytes:
    fields = [sym(mechanism), NULL if response is None else vbin(response)]
    if hostname is not None:
        fields.append(string(hostname))
    return frame(described(smallulong(0x41), lst(*fields)))


def mechanisms_frame(*names: str) -> bytes:
    array = b"".join(bytes([len(n)]) + n.encode() for n in names)  # array8 of sym8 (constructor 0xa3)
    payload = bytes([len(names), 0xA3]) + array
    return frame(described(smallulong(0x40), lst(bytes([0xE0, len(payload)]) + payload)))


EMPTY_FRAME = frame(b"")
PLAIN_ALICE = b"\x00alice\x00wonderland"


# -- reading what the server sent ----------------------------------------------------------------------------


def performatives(out: bytes) -> list[tuple[int, list[object]]]:
    """Decode the server's output into (descriptor, fields) pairs, skipping a leading SASL header."""
    if out.startswith(SASL_HEADER):
        out = out[len(SASL_HEADER) :]
    found = []
    while out:
        size, doff = int.from_bytes(out[:4], "big"), out[4]
        assert out[5] == 1, "server sent a non-SASL frame"
        data = Data()
        data.decode(out[doff * 4 : size])
        data.rewind()
        data.next()
        value = data.get_object()
        assert isinstance(value, Described)
        found.append((int(value.descriptor), list(value.value)))
        out = out[size:]
    return found


def outcome_code(out: bytes) -> int:
    ((descriptor, fields),) = performatives(out)
    assert descriptor == 0x44
    return int(fields[0])


def drain(server: SaslServer) -> list[object]:
    events = []
    while (event := server.next_event()) is not None:
        events.append(event)
    return events


def after_header(mechanisms: tuple[str, ...] = ("PLAIN", "ANONYMOUS")) -> SaslServer:
    """A server that has had the client's SASL header and sent its mechanisms."""
    server = SaslServer(mechanisms)
    server.receive_data(SASL_HEADER)
    assert server.next_event() is None
    assert server.data_to_send().startswith(SASL_HEADER)
    return server


# -- the in-memory harness -----------------------------------------------------------------------------------


def take(transport: Transport) -> bytes:
    pending = transport.pending()
    if pending <= 0:
        return b""
    data = bytes(transport.peek(pending))
    transport.pop(pending)
    return data


def chunks(data: bytes, size: int | None) -> Iterator[bytes]:
    step = size or max(len(data), 1)
    for start in range(0, len(data), step):
        yield data[start : start + step]


@dataclass
class Peer:
    """A proton connection bound to a transport, with a collector for its events."""

    connection: Connection
    transport: Transport
    collector: Collector
    event_types: list[str] = field(default_factory=list)

    def collect(self) -> None:
        while (event := self.collector.peek()) is not None:
            self.event_types.append(str(event.type))
            self.collector.pop()

    @property
    def remote_open(self) -> bool:
        return bool(self.connection.state & Endpoint.REMOTE_ACTIVE)


def client_end(mechs: str | None, user: str | None = None, password: str | None = None) -> Peer:
    connection = Connection()
    connection.container = CLIENT_ID
    if user is not None:
        connection.user = user
        connection.password = password
    transport = Transport()
    if mechs is not None:
        sasl = transport.sasl()
        sasl.allowed_mechs(mechs)
        sasl.allow_insecure_mechs = True  # PLAIN in the clear; without this proton refuses to pick it
    return _bind(connection, transport)


def amqp_server_end() -> Peer:
    connection = Connection()
    connection.container = SERVER_ID
    return _bind(connection, Transport(Transport.SERVER))  # note: no transport.sasl()


def _bind(connection: Connection, transport: Transport) -> Peer:
    collector = Collector()
    connection.collect(collector)
    transport.bind(connection)
    connection.open()
    return Peer(connection, transport, collector)


def check_password(creds: CredentialsReceived) -> tuple[bool, str | None, int | None]:
    if creds.mechanism == "ANONYMOUS":
        return True, "anonymous", None
    ok = creds.username is not None and USERS.get(creds.username) == creds.password
    return ok, None, None


@dataclass
class Pipe:
    """Moves bytes between a proton client and the SaslServer, then the proton server transport.

    ``chunk`` delivers client bytes in pieces of that size (1 = byte at a time). The filters rewrite bytes in
    flight, to play a client or server that misbehaves.
    """

    client: Peer
    sasl: SaslServer
    verdict: Callable[[CredentialsReceived], tuple[bool, str | None, int | None]] = check_password
    chunk: int | None = None
    accept_no_sasl: bool = True
    to_server: Callable[[bytes], bytes] = lambda data: data
    to_client: Callable[[bytes], bytes] = lambda data: data
    amqp: Peer | None = None
    events: list[object] = field(default_factory=list)
    client_bytes: list[bytes] = field(default_factory=list)
    closed_by_server: bool = False

    def run(self, rounds: int = 200) -> Pipe:
        for _ in range(rounds):
            moved = self._client_to_server() + self._server_to_client()
            self.client.collect()
            if self.amqp is not None:
                self.amqp.collect()
            if not moved:
                return self
        raise AssertionError("pump did not settle")

    def _client_to_server(self) -> int:
        data = take(self.client.transport)
        self.client_bytes.append(data)
        data = self.to_server(data)
        for piece in chunks(data, self.chunk):
            if self.closed_by_server:
                break
            if self.amqp is not None:
                self.amqp.transport.push(piece)
            else:
                self.sasl.receive_data(piece)
                self._handle_events()
        return len(data)

    def _handle_events(self) -> None:
        while (event := self.sasl.next_event()) is not None:
            self.events.append(event)
            if isinstance(event, CredentialsReceived):
                self.sasl.complete(*self.verdict(event))
            elif isinstance(event, SaslDone) and event.authenticated:
                self._hand_off(event.leftover)
            elif isinstance(event, NoSaslHeader) and self.accept_no_sasl:
                self._hand_off(event.leftover)
            else:  # failed outcome, refused NoSaslHeader or ProtocolViolation: flush, then close
                self.closed_by_server = True

    def _hand_off(self, leftover: bytes) -> None:
        self.amqp = amqp_server_end()
        if leftover:
            self.amqp.transport.push(leftover)

    def _server_to_client(self) -> int:
        data = self.sasl.data_to_send()
        if self.amqp is not None:
            data += take(self.amqp.transport)
        data = self.to_client(data)
        if self.client.transport.closed:
            return 0
        for piece in chunks(data, self.chunk):
            self.client.transport.push(piece)
        return len(data)


def assert_opened_both_ways(pipe: Pipe) -> None:
    assert pipe.amqp is not None
    assert pipe.amqp.remote_open and pipe.amqp.connection.remote_container == CLIENT_ID
    assert "PN_CONNECTION_REMOTE_OPEN" in pipe.amqp.event_types
    assert pipe.client.remote_open and pipe.client.connection.remote_container == SERVER_ID
    assert "PN_CONNECTION_REMOTE_OPEN" in pipe.client.event_types


def assert_client_refused(pipe: Pipe, outcome: int) -> None:
    assert pipe.client.transport.closed
    assert pipe.client.transport.sasl().outcome == outcome
    condition = pipe.client.transport.condition
    assert condition is not None and condition.name == "amqp:unauthorized-access"
    assert not pipe.client.remote_open
    assert "PN_TRANSPORT_ERROR" in pipe.client.event_types


# -- end to end with a real proton client --------------------------------------------------------------------

SUCCESS_CASES = [
    # (offered by us, allowed on the client, user, password, expected credentials, expected SaslDone.username)
    pytest.param(
        ("PLAIN", "ANONYMOUS"), "PLAIN", "alice", "wonderland",
        CredentialsReceived("PLAIN", "alice", "wonderland", None), "alice", id="plain",
    ),
    pytest.param(
        ("PLAIN",), "PLAIN", "jürgen", "pässwörd",
        CredentialsReceived("PLAIN", "jürgen", "pässwörd", None), "jürgen", id="plain-utf8",
    ),
    pytest.param(
        ("PLAIN", "ANONYMOUS"), "ANONYMOUS", None, None,
        CredentialsReceived("ANONYMOUS", None, None, None), "anonymous", id="anonymous",
    ),
    pytest.param(
        ("ANONYMOUS", "PLAIN"), "PLAIN ANONYMOUS", "alice", "wonderland",
        CredentialsReceived("PLAIN", "alice", "wonderland", None), "alice", id="user-picks-plain",
    ),
    pytest.param(
        ("PLAIN", "ANONYMOUS"), "PLAIN ANONYMOUS", None, None,
        CredentialsReceived("ANONYMOUS", None, None, None), "anonymous", id="no-user-picks-anonymous",
    ),
]  # fmt: skip


@pytest.mark.parametrize("chunk", [None, 1, 3], ids=["whole", "byte-at-a-time", "3-bytes"])
@pytest.mark.parametrize(("offered", "client_mechs", "user", "password", "creds", "username"), SUCCESS_CASES)
def test_client_authenticates_and_opens(offered, client_mechs, user, password, creds, username, chunk):
    pipe = Pipe(client_end(client_mechs, user, password), SaslServer(offered), chunk=chunk).run()

    assert pipe.events[0] == creds
    done = pipe.events[1]
    assert isinstance(done, SaslDone) and done.authenticated and done.username == username
    # proton's client waits for the outcome before sending its AMQP header, so nothing is pipelined.
    assert done.leftover == b""
    assert len(pipe.events) == 2
    assert pipe.sasl.state is SaslState.AUTHENTICATED
    assert pipe.client.transport.sasl().outcome == SASL.OK
    assert_opened_both_ways(pipe)


@pytest.mark.parametrize("chunk", [None, 1])
@pytest.mark.parametrize(
    ("verdict", "outcome"),
    [
        pytest.param(check_password, SASL.AUTH, id="wrong-password"),
        pytest.param(lambda creds: (False, None, 2), SASL.SYS, id="sys"),
        pytest.param(lambda creds: (False, None, 3), SASL.PERM, id="sys-perm"),
        pytest.param(lambda creds: (False, None, 4), SASL.TEMP, id="sys-temp"),
    ],
)
def test_failed_outcome_closes_client(verdict, outcome, chunk):
    client = client_end("PLAIN", "alice", "not-the-password")
    pipe = Pipe(client, SaslServer(["PLAIN"]), verdict=verdict, chunk=chunk).run()

    assert pipe.events == [
        CredentialsReceived("PLAIN", "alice", "not-the-password", None),
        SaslDone(authenticated=False, username="alice", leftover=b""),
    ]
    assert pipe.sasl.state is SaslState.FAILED
    assert pipe.amqp is None
    # proton's client sends nothing more: it reports the failure and closes its transport.
    assert_client_refused(pipe, outcome)


def test_client_with_no_common_mechanism_closes_without_init():
    pipe = Pipe(client_end("PLAIN", "alice", "wonderland"), SaslServer(["ANONYMOUS"])).run()

    assert pipe.events == []
    assert pipe.sasl.state is SaslState.AWAIT_INIT
    assert b"".join(pipe.client_bytes) == SASL_HEADER
    assert pipe.client.transport.closed
    assert pipe.client.transport.condition.name == "amqp:unauthorized-access"


def test_client_choosing_a_mechanism_not_offered_gets_auth_failure():
    # A lying middleman advertises ANONYMOUS to the client; the server only offers PLAIN.
    server = SaslServer(["PLAIN"])
    server.receive_data(SASL_HEADER)
    offers_plain = server.data_to_send()[len(SASL_HEADER) :]

    def advertise_anonymous(data: bytes) -> bytes:
        return data.replace(offers_plain, mechanisms_frame("ANONYMOUS"))

    pipe = Pipe(client_end("ANONYMOUS"), SaslServer(["PLAIN"]), to_client=advertise_anonymous).run()

    assert pipe.events == [ProtocolViolation("client chose mechanism 'ANONYMOUS', which was not offered (PLAIN)")]
    assert pipe.sasl.state is SaslState.ERROR
    assert_client_refused(pipe, SASL.AUTH)


@pytest.mark.parametrize("chunk", [None, 1])
def test_plain_amqp_header_is_handed_to_the_caller(chunk):
    pipe = Pipe(client_end(None), SaslServer(["PLAIN", "ANONYMOUS"]), chunk=chunk).run()

    (event,) = pipe.events
    assert isinstance(event, NoSaslHeader) and event.leftover.startswith(AMQP_HEADER)
    assert pipe.sasl.state is SaslState.NO_SASL
    assert_opened_both_ways(pipe)  # the caller chose to allow it


def test_plain_amqp_header_refused_by_the_caller_sends_nothing():
    pipe = Pipe(client_end(None), SaslServer(["PLAIN"]), accept_no_sasl=False).run()

    (event,) = pipe.events
    assert isinstance(event, NoSaslHeader)
    assert event.leftover == b"".join(pipe.client_bytes)  # proton pipelines its open after the header
    assert pipe.sasl.data_to_send() == b""
    assert not pipe.client.remote_open


@pytest.mark.parametrize("chunk", [None, 1])
def test_heartbeats_before_init_are_ignored(chunk):
    heartbeats = EMPTY_FRAME + frame(b"", doff=3)  # the second one has an (ignored) extended header

    def add_heartbeats(data: bytes) -> bytes:
        return data.replace(SASL_HEADER, SASL_HEADER + heartbeats, 1)

    client = client_end("PLAIN", "alice", "wonderland")
    pipe = Pipe(client, SaslServer(["PLAIN"]), chunk=chunk, to_server=add_heartbeats).run()

    assert [type(event) for event in pipe.events] == [CredentialsReceived, SaslDone]
    assert_opened_both_ways(pipe)


def test_header_init_and_amqp_header_in_one_chunk():
    # Record what a proton client sends, then replay it as a pipelining client would: all in one read,
    # before the server has answered anything. The verdict is only given after every byte is in.
    recorded = Pipe(client_end("PLAIN", "alice", "wonderland"), SaslServer(["PLAIN"])).run()
    client_stream = b"".join(recorded.client_bytes)
    server = SaslServer(["PLAIN"])

    server.receive_data(client_stream)
    (creds,) = drain(server)
    assert creds == CredentialsReceived("PLAIN", "alice", "wonderland", None)
    server.complete(True)
    (done,) = drain(server)

    assert isinstance(done, SaslDone) and done.authenticated and done.username == "alice"
    assert done.leftover.startswith(AMQP_HEADER)
    assert client_stream.endswith(done.leftover)
    # The leftover is all the AMQP transport needs to see the client's open ...
    amqp = amqp_server_end()
    amqp.transport.push(done.leftover)
    amqp.collect()
    assert amqp.remote_open and amqp.connection.remote_container == CLIENT_ID
    # ... and what we send back (SASL header, mechanisms, outcome, then proton's header and open) opens a
    # fresh client with the same settings.
    fresh = client_end("PLAIN", "alice", "wonderland")
    take(fresh.transport)
    fresh.transport.push(server.data_to_send() + take(amqp.transport))
    fresh.collect()
    assert fresh.remote_open and fresh.connection.remote_container == SERVER_ID


# -- protocol headers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "description"),
    [
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", "not an AMQP protocol header", id="http"),
        pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01", "not an AMQP protocol header", id="raw-tls-hello"),
        pytest.param(b"G", "not an AMQP protocol header", id="first-byte-is-enough"),
        pytest.param(b"AMQX", "not an AMQP protocol header", id="almost"),
        pytest.param(b"AMQP\x02\x01\x00\x00", "TLS is not enabled", id="amqp-tls"),
        pytest.param(b"AMQP\x00\x00\x09\x01", "unsupported protocol header", id="amqp-0-9-1"),
        pytest.param(b"AMQP\x03\x01\x00\x01", "unsupported protocol header", id="sasl-wrong-version"),
        pytest.param(b"AMQP\x01\x01\x00\x00", "unsupported protocol header", id="protocol-id-1"),
    ],
)
def test_bad_protocol_header(sent, description):
    server = SaslServer(["PLAIN"])
    server.receive_data(sent)

    (event,) = drain(server)
    assert isinstance(event, ProtocolViolation) and description in event.description
    assert server.data_to_send() == SASL_HEADER  # so the peer sees what we speak
    assert server.state is SaslState.ERROR
    server.receive_data(SASL_HEADER + sasl_init("PLAIN", PLAIN_ALICE))  # ignored from now on
    assert drain(server) == [] and server.data_to_send() == b""


def test_partial_header_waits():
    server = SaslServer(["PLAIN"])
    server.receive_data(b"AMQP\x03")
    assert server.next_event() is None and server.data_to_send() == b""
    assert server.state is SaslState.AWAIT_HEADER
    server.receive_data(b"\x01\x00\x00")
    assert server.data_to_send().startswith(SASL_HEADER)
    assert server.state is SaslState.AWAIT_INIT


def test_mechanisms_are_offered_in_order():
    server = SaslServer(["ANONYMOUS", "PLAIN"])
    assert server.mechanisms == ("ANONYMOUS", "PLAIN")
    server.receive_data(SASL_HEADER)
    out = server.data_to_send()
    assert out.startswith(SASL_HEADER)
    ((descriptor, (offered,)),) = performatives(out)
    assert descriptor == 0x40 and list(offered) == ["ANONYMOUS", "PLAIN"]
    assert server.data_to_send() == b""  # cleared once taken


# -- sasl-init encodings and content -------------------------------------------------------------------------

WIDE_FIELDS = [sym("PLAIN", wide=True), vbin(PLAIN_ALICE, wide=True), string("example.org", wide=True)]
NARROW_FIELDS = [sym("PLAIN"), vbin(PLAIN_ALICE), string("example.org")]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(described(smallulong(0x41), lst(*NARROW_FIELDS)), id="smallulong-list8-8bit"),
        pytest.param(described(ulong(0x41), lst(*WIDE_FIELDS, wide=True)), id="ulong-list32-32bit"),
        pytest.param(described(sym("amqp:sasl-init:list"), lst(*NARROW_FIELDS)), id="symbol-descriptor"),
        pytest.param(described(sym("amqp:sasl-init:list", wide=True), lst(*WIDE_FIELDS)), id="sym32-descriptor"),
        pytest.param(described(smallulong(0x41), lst(*WIDE_FIELDS)), id="list8-of-32bit-fields"),
        pytest.param(described(smallulong(0x41), lst(*NARROW_FIELDS, NULL, UINT_0)), id="extra-fields-ignored"),
        pytest.param(described(smallulong(0x41), lst(*NARROW_FIELDS)) + b"trailing", id="trailing-bytes"),
    ],
)
def test_sasl_init_encodings(body):
    server = after_header()
    server.receive_data(frame(body) + AMQP_HEADER)

    assert drain(server) == [CredentialsReceived("PLAIN", "alice", "wonderland", "example.org")]
    assert server.state is SaslState.AWAIT_VERDICT


@pytest.mark.parametrize(
    ("response", "username", "password"),
    [
        pytest.param(b"\x00alice\x00wonderland", "alice", "wonderland", id="no-authzid"),
        pytest.param(b"alice\x00alice\x00wonderland", "alice", "wonderland", id="authzid-is-authcid"),
        pytest.param("\x00jürgen\x00pässwörd".encode(), "jürgen", "pässwörd", id="utf8"),
        pytest.param(b"\x00alice\x00pass word", "alice", "pass word", id="space-in-password"),
    ],
)
def test_plain_credentials(response, username, password):
    server = after_header()
    server.receive_data(sasl_init("PLAIN", response, hostname="vhost"))
    assert drain(server) == [CredentialsReceived("PLAIN", username, password, "vhost")]


@pytest.mark.parametrize(
    ("response", "username"),
    [
        pytest.param(b"bob\x00alice\x00wonderland", "alice", id="acting-as-someone-else"),
        pytest.param(None, None, id="no-initial-response"),
        pytest.param(b"alice\x00wonderland", None, id="one-nul"),
        pytest.param(b"\x00alice\x00won\x00derland", None, id="three-nuls"),
        pytest.param(b"\x00\x00wonderland", None, id="empty-authcid"),
        pytest.param(b"\x00alice\x00", "alice", id="empty-password"),
        pytest.param(b"\x00al\xffice\x00wonderland", None, id="bad-utf8"),
    ],
)
def test_plain_credentials_that_cannot_authenticate_fail_at_once(response, username):
    server = after_header()
    server.receive_data(sasl_init("PLAIN", response) + AMQP_HEADER)

    assert drain(server) == [SaslDone(authenticated=False, username=username, leftover=b"")]
    assert outcome_code(server.data_to_send()) == 1
    assert server.state is SaslState.FAILED
    server.receive_data(b"more")  # ignored: the caller closes after flushing
    assert drain(server) == [] and server.data_to_send() == b""


@pytest.mark.parametrize("trace", [None, b"", b"someone@example.org"])
def test_anonymous_trace_is_ignored(trace):
    server = after_header()
    server.receive_data(sasl_init("ANONYMOUS", trace))
    assert drain(server) == [CredentialsReceived("ANONYMOUS", None, None, None)]


@pytest.mark.parametrize(
    ("response", "authzid"), [(None, None), (b"", None), (b"alice", "alice"), ("jürgen".encode(), "jürgen")]
)
def test_external_carries_the_authorization_identity_asked_for(response, authzid):
    server = after_header(("EXTERNAL", "PLAIN"))
    server.receive_data(sasl_init("EXTERNAL", response))
    assert drain(server) == [CredentialsReceived("EXTERNAL", authzid, None, None)]
    server.complete(True, "alice")
    assert drain(server) == [SaslDone(authenticated=True, username="alice", leftover=b"")]


@pytest.mark.parametrize("response", [b"al\xffice", b"al\x00ice"])
def test_external_with_an_identity_that_cannot_be_fails_at_once(response):
    server = after_header(("EXTERNAL",))
    server.receive_data(sasl_init("EXTERNAL", response))
    assert drain(server) == [SaslDone(authenticated=False, username=None, leftover=b"")]


def test_offer_changes_the_mechanisms_until_the_header_is_answered():
    server = SaslServer(["PLAIN", "ANONYMOUS"])
    server.offer(["EXTERNAL", "PLAIN", "ANONYMOUS"])
    assert server.mechanisms == ("EXTERNAL", "PLAIN", "ANONYMOUS")
    server.receive_data(SASL_HEADER)
    assert b"EXTERNAL" in server.data_to_send()
    with pytest.raises(SaslError, match="AWAIT_HEADER"):
        server.offer(["PLAIN"])


# -- bad frames ----------------------------------------------------------------------------------------------

INIT_BODY = described(smallulong(0x41), lst(sym("PLAIN"), vbin(PLAIN_ALICE)))


@pytest.mark.parametrize(
    ("sent", "description"),
    [
        pytest.param((MAX_FRAME_SIZE + 1).to_bytes(4, "big"), "larger than the 65536 byte limit", id="oversize"),
        pytest.param(b"\xff\xff\xff\xff", "larger than", id="huge"),
        pytest.param(b"\x00\x00\x00\x07", "smaller than a frame header", id="undersize"),
        pytest.param(frame(INIT_BODY, frame_type=0), "expected a SASL frame", id="amqp-frame-type"),
        pytest.param(frame(INIT_BODY, doff=1), "bad data offset 1", id="doff-1"),
        pytest.param(b"\x00\x00\x00\x08\x03\x01\x00\x00", "bad data offset 3", id="doff-past-end"),
        pytest.param(frame(b"\xff\xff"), "undecodable", id="garbage-body"),
        pytest.param(frame(INIT_BODY[:-3]), "undecodable", id="truncated-body"),
        pytest.param(frame(lst(sym("PLAIN"))), "not a described list", id="not-described"),
        pytest.param(frame(described(smallulong(0x41), sym("PLAIN"))), "not a described list", id="not-list"),
        pytest.param(frame(described(smallulong(0x43), lst(vbin(b"x")))), "got sasl-response", id="sasl-response"),
        pytest.param(frame(described(smallulong(0x40), lst())), "got sasl-mechanisms", id="sasl-mechanisms"),
        pytest.param(frame(described(smallulong(0x10), lst())), "unknown performative", id="amqp-open"),
        pytest.param(frame(described(sym("amqp:open:list"), lst())), "unknown performative", id="unknown-symbol"),
        pytest.param(frame(described(vbin(b"x"), lst())), "unknown performative", id="binary-descriptor"),
        pytest.param(frame(described(smallulong(0x41), lst())), "no mechanism", id="list0-init"),
        pytest.param(frame(described(smallulong(0x41), lst(UINT_0))), "no mechanism", id="mechanism-not-symbol"),
        pytest.param(
            frame(described(smallulong(0x41), lst(sym("PLAIN"), string("x")))),
            "initial-response is not binary",
            id="response-not-binary",
        ),
        pytest.param(
            frame(described(smallulong(0x41), lst(sym("PLAIN"), NULL, UINT_0))),
            "hostname is not a string",
            id="hostname-not-string",
        ),
        # Issue 11, defect 1: proton decodes a symbol as ASCII and a string as UTF-8 and raised out of the server.
        pytest.param(
            frame(described(smallulong(0x41), lst(b"\xa3\x05PL\x8aIN", vbin(PLAIN_ALICE)))),
            "undecodable",
            id="mechanism-not-ascii",
        ),
        pytest.param(
            frame(described(smallulong(0x41), lst(sym("PLAIN"), vbin(PLAIN_ALICE), b"\xa1\x02\xed\xa0"))),
            "undecodable",
            id="hostname-not-utf8",
        ),
        pytest.param(
            frame(described(b"\xa3\x02\xff\xfe", lst(sym("PLAIN")))), "undecodable", id="descriptor-not-ascii"
        ),
        pytest.param(frame(b"\xc0\x02\x01" * 20000), "undecodable", id="deep-nesting"),
        pytest.param(
            frame(described(smallulong(0x41), lst(b"\x73\xff\xff\xff\xff"))), "undecodable", id="char-out-of-range"
        ),
    ],
)
def test_bad_frames_are_violations(sent, description):
    server = after_header()
    server.receive_data(sent)

    (event,) = drain(server)
    assert isinstance(event, ProtocolViolation) and description in event.description
    assert server.data_to_send() == b""
    assert server.state is SaslState.ERROR
    server.receive_data(sasl_init("PLAIN", PLAIN_ALICE))
    assert drain(server) == []


def test_frame_of_exactly_the_size_limit_is_accepted():
    def init_with_trace(trace: bytes) -> bytes:
        return frame(described(smallulong(0x41), lst(sym("ANONYMOUS"), vbin(trace, wide=True), wide=True)))

    overhead = len(init_with_trace(b""))
    big = init_with_trace(b"t" * (MAX_FRAME_SIZE - overhead))
    assert len(big) == MAX_FRAME_SIZE
    server = after_header()
    server.receive_data(big)
    assert drain(server) == [CredentialsReceived("ANONYMOUS", None, None, None)]


def test_unoffered_mechanism_gets_auth_outcome_then_violation():
    server = after_header(("PLAIN",))
    server.receive_data(sasl_init("SCRAM-SHA-256", b"n,,n=alice,r=abc"))

    (event,) = drain(server)
    assert event == ProtocolViolation("client chose mechanism 'SCRAM-SHA-256', which was not offered (PLAIN)")
    assert outcome_code(server.data_to_send()) == 1


def test_byte_at_a_time_hand_built_stream():
    server = SaslServer(["PLAIN"])
    stream = SASL_HEADER + EMPTY_FRAME + sasl_init("PLAIN", PLAIN_ALICE) + AMQP_HEADER
    events = []
    for byte in stream:
        server.receive_data(bytes([byte]))
        events += drain(server)
    assert events == [CredentialsReceived("PLAIN", "alice", "wonderland", None)]
    server.complete(True)
    assert drain(server) == [SaslDone(authenticated=True, username="alice", leftover=AMQP_HEADER)]


# -- the verdict and the hand-off ----------------------------------------------------------------------------


def awaiting_verdict(mechanism: str = "PLAIN") -> SaslServer:
    server = after_header()
    server.receive_data(sasl_init(mechanism, PLAIN_ALICE))
    assert [type(event) for event in drain(server)] == [CredentialsReceived]
    return server


def test_leftover_holds_bytes_received_until_saslDone_is_taken():
    server = awaiting_verdict()
    server.receive_data(AMQP_HEADER)  # while the password check runs
    server.complete(True)
    assert outcome_code(server.data_to_send()) == 0
    server.receive_data(b"open")  # after complete() but before the event was taken
    assert server.next_event() == SaslDone(authenticated=True, username="alice", leftover=AMQP_HEADER + b"open")
    assert server.next_event() is None
    with pytest.raises(SaslError, match="give these bytes to the AMQP transport"):
        server.receive_data(b"late")


def test_no_sasl_header_leftover_and_hand_off():
    server = SaslServer(["PLAIN"])
    server.receive_data(AMQP_HEADER[:5])
    assert server.next_event() is None
    server.receive_data(AMQP_HEADER[5:] + b"\x00\x00")
    server.receive_data(b"\x00\x10")
    assert server.next_event() == NoSaslHeader(AMQP_HEADER + b"\x00\x00\x00\x10")
    assert server.next_event() is None
    with pytest.raises(SaslError):
        server.receive_data(b"more")


@pytest.mark.parametrize(
    ("args", "done", "code"),
    [
        pytest.param((True,), SaslDone(True, "alice", b""), 0, id="ok"),
        pytest.param((True, "alice@example"), SaslDone(True, "alice@example", b""), 0, id="ok-renamed"),
        pytest.param((True, None, 0), SaslDone(True, "alice", b""), 0, id="ok-explicit-code"),
        pytest.param((False,), SaslDone(False, "alice", b""), 1, id="auth"),
        pytest.param((False, None, 4), SaslDone(False, "alice", b""), 4, id="sys-temp"),
    ],
)
def test_complete(args, done, code):
    server = awaiting_verdict()
    server.complete(*args)
    assert outcome_code(server.data_to_send()) == code
    assert drain(server) == [done]


def test_anonymous_username_defaults_to_none():
    server = awaiting_verdict("ANONYMOUS")
    server.complete(True)
    assert drain(server) == [SaslDone(True, None, b"")]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param((True, None, 1), "code 0", id="ok-with-failure-code"),
        pytest.param((False, None, 0), "code 1-4", id="failure-with-ok-code"),
        pytest.param((False, None, 5), "code 1-4", id="unknown-code"),
    ],
)
def test_complete_rejects_codes_that_do_not_fit(args, match):
    server = awaiting_verdict()
    with pytest.raises(SaslError, match=match):
        server.complete(*args)
    assert server.state is SaslState.AWAIT_VERDICT  # still waiting for a proper verdict


def test_complete_outside_await_verdict():
    server = SaslServer(["PLAIN"])
    with pytest.raises(SaslError, match="AWAIT_HEADER"):
        server.complete(True)
    server = awaiting_verdict()
    server.complete(False)
    with pytest.raises(SaslError, match="FAILED"):
        server.complete(True)


@pytest.mark.parametrize(
    ("mechanisms", "match"),
    [
        pytest.param([], "at least one", id="empty"),
        pytest.param(["PLAIN", "PLAIN"], "duplicate", id="duplicate"),
        pytest.param(["SCRAM-SHA-1"], "unsupported", id="scram-sha-1"),
        pytest.param(["plain"], "unsupported", id="lower-case"),
    ],
)
def test_bad_mechanism_configuration(mechanisms, match):
    with pytest.raises(SaslError, match=match):
        SaslServer(mechanisms)
