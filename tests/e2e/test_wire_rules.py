"""Fields proton would rewrite, and protocol rules proton lets pass, refused as the spec says (issue 33, defects 4
and 5, and link names), over real sockets against a real server process.

Each bad frame is written byte by byte (``tests.support.wirebytes``): no client library sends a NUL byte in an
address, a 1 MB symbol address, a binary container-id, two attaches on one handle or an unknown performative.
Afterwards the server still serves an already-open connection and a new one (``tests.support.survival``). The
facts about proton-c were checked against python-qpid-proton 0.40.0 on the base commit: the NUL address attached
to ``topic://a``, the 1 MB symbol read as the anonymous relay, the binary container-id opened as ``''``, the second
attach on handle 0 was answered as a new link, the unknown performative was ignored, and a second attach of a
link name still attached closed the connection with ``amqp:invalid-field`` "link name already attached".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Message
from proton.utils import BlockingConnection, LinkDetached

from tests.support.amqp import connect, receive_bodies, sender
from tests.support.rawamqp import AMQP_HEADER, Frame, RawClient, frame, parse_frames
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import Bystander, assert_still_serving
from tests.support.wirebytes import binary, boolean, described_list, null, string, sym, uint

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SOURCE, TARGET = 0x28, 0x29


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "wire-rules") as server:
        yield server


def open_frame(container_id: bytes) -> bytes:
    return frame(described_list(OPEN, [container_id]))


def begin_frame(channel: int = 0) -> bytes:
    return frame(described_list(BEGIN, [null(), uint(0), uint(5000), uint(5000)]), channel=channel)


def end_frame(channel: int = 0) -> bytes:
    return frame(described_list(END, []), channel=channel)


def attach_frame(name: bytes, handle: int, *, receive: bool, address: bytes, channel: int = 0) -> bytes:
    """An attach of a consumer (``receive``: the client receives from ``address``) or a publisher."""
    terminus = described_list(SOURCE if receive else TARGET, [address])
    source, target = (terminus, null()) if receive else (null(), terminus)
    fields = [string(name), uint(handle), boolean(receive), null(), null(), source, target, null(), null()]
    fields.append(null() if receive else uint(0))  # initial-delivery-count: the sender's
    return frame(described_list(ATTACH, fields), channel=channel)


def detach_frame(handle: int, channel: int = 0) -> bytes:
    return frame(described_list(DETACH, [uint(handle), boolean(True)]), channel=channel)


class Session:
    """A raw connection after anonymous SASL, its open and one begin on channel 0 answered."""

    def __init__(self, raw: RawClient, container_id: bytes = string(b"wire-rules")) -> None:
        self.raw = raw
        raw.sasl_anonymous()
        raw.send(AMQP_HEADER + open_frame(container_id) + begin_frame())
        assert raw.read_exactly(len(AMQP_HEADER)) == AMQP_HEADER

    def until(self, descriptor: int, *, limit: int = 20) -> list[Frame]:
        """Frames read up to and including the first with ``descriptor`` (bounded in count and by the client's
        read deadline)."""
        frames = []
        for _ in range(limit):
            read = self.raw.read_frame()
            frames.append(read)
            if read.descriptor == descriptor:
                return frames
        raise AssertionError(f"no frame 0x{descriptor:x} in {frames}")


def refused_attach(server: SubgateProcess, attach: bytes) -> tuple[Frame, tuple[str, str]]:
    """The attach is answered (with a null terminus on our side) and detached with an error; the connection
    itself stays open: a valid publisher attached after it on the same session is accepted."""
    with RawClient(server.port) as raw:
        session = Session(raw)
        session.until(BEGIN)
        raw.send(attach)
        frames = session.until(DETACH)
        answer = next(f for f in frames if f.descriptor == ATTACH)
        error = frames[-1].error()
        assert error is not None, frames
        raw.send(detach_frame(0) + attach_frame(b"fine", 1, receive=False, address=string(b"wire-fine")))
        after = session.until(ATTACH)
        assert not any(f.descriptor == CLOSE for f in after), after
        assert after[-1].fields[0] == "fine"
    return answer, error


# -- defect 4: fields proton would rewrite -----------------------------------------------------------------------
@pytest.mark.parametrize("receive", [False, True], ids=["target", "source"])
def test_an_address_with_a_nul_byte_is_refused_naming_the_field(broker, receive):
    with Bystander(broker) as bystander:
        attach = attach_frame(b"nul", 0, receive=receive, address=string(b"topic://a\x00hidden"))
        answer, (condition, description) = refused_attach(broker, attach)
        field = "source" if receive else "target"
        assert condition == "amqp:invalid-field"
        assert description == f"{field} address: contains a NUL byte"
        refused_terminus = answer.fields[5 if receive else 6]
        assert refused_terminus is None, answer  # never attached to 'topic://a'
        assert_still_serving(broker, bystander)
    assert "topic://a'" not in broker.log()


def test_a_one_megabyte_symbol_address_is_refused_not_read_as_the_anonymous_relay(broker):
    with Bystander(broker) as bystander:
        attach = attach_frame(b"huge", 0, receive=False, address=sym(b"q" * 1_000_000))
        _, (condition, description) = refused_attach(broker, attach)
        assert condition == "amqp:invalid-field"
        assert description == "target address: 1000000 characters (at most 1024)"
        assert_still_serving(broker, bystander)


def test_an_address_that_is_not_text_is_refused_naming_the_field(broker):
    attach = attach_frame(b"bin", 0, receive=False, address=binary(b"queue-name"))
    _, (condition, description) = refused_attach(broker, attach)
    assert (condition, description) == ("amqp:invalid-field", "target address: must be a string or symbol, got binary")


def test_a_link_name_with_a_nul_byte_is_refused_naming_the_field(broker):
    attach = attach_frame(b"na\x00me", 0, receive=False, address=string(b"wire-nul-name"))
    _, (condition, description) = refused_attach(broker, attach)
    assert (condition, description) == ("amqp:invalid-field", "attach name: contains a NUL byte")


def test_an_address_at_the_limit_is_accepted(broker):
    with RawClient(broker.port) as raw:
        session = Session(raw)
        session.until(BEGIN)
        raw.send(attach_frame(b"long", 0, receive=False, address=string(b"q" * 1024)))
        frames = session.until(ATTACH)
        assert frames[-1].fields[6].value[0] == "q" * 1024


@pytest.mark.parametrize(
    ("container_id", "description"),
    [
        (binary(b"abc"), "open container-id: must be a string, got binary"),
        (sym(b"abc"), "open container-id: must be a string, got symbol"),
        (string(b"a\x00b"), "open container-id: contains a NUL byte"),
    ],
    ids=["binary", "symbol", "nul"],
)
def test_an_open_whose_container_id_is_not_a_plain_string_is_closed_naming_the_field(broker, container_id, description):
    with Bystander(broker) as bystander:
        with RawClient(broker.port) as raw:
            raw.sasl_anonymous()
            raw.send(AMQP_HEADER + open_frame(container_id))
            assert raw.read_exactly(len(AMQP_HEADER)) == AMQP_HEADER
            frames, _ = parse_frames(raw.read_to_eof())
        assert [f.descriptor for f in frames] == [OPEN, CLOSE], frames
        assert frames[-1].error() == ("amqp:invalid-field", description)
        assert_still_serving(broker, bystander)
    assert "container-id ''" not in broker.log()


# -- defect 5: protocol violations -------------------------------------------------------------------------------
def test_a_second_attach_on_a_handle_in_use_ends_the_session_with_handle_in_use(broker, uid):
    with Bystander(broker) as bystander:
        with RawClient(broker.port) as raw:
            session = Session(raw)
            session.until(BEGIN)
            raw.send(attach_frame(b"first", 0, receive=False, address=string(f"q1-{uid}".encode())))
            session.until(ATTACH)
            raw.send(attach_frame(b"second", 0, receive=False, address=string(f"q2-{uid}".encode())))
            frames = session.until(END)
            assert not any(f.descriptor == ATTACH for f in frames), frames  # the second link is never answered
            condition, description = frames[-1].error() or ("", "")
            assert condition == "amqp:session:handle-in-use"
            assert "handle 0" in description and "'first'" in description
            # Only the session ended: after our end, a new session on the same connection works.
            raw.send(end_frame() + begin_frame(1))
            session.until(BEGIN)
            raw.send(attach_frame(b"third", 0, receive=False, address=string(f"q3-{uid}".encode()), channel=1))
            after = session.until(ATTACH)
            assert after[-1].fields[0] == "third"
        assert_still_serving(broker, bystander)


@pytest.mark.parametrize(
    "body",
    [described_list(0x30, [null()]), b"\x00\xa3\x0famqp:bogus:list" + b"\x45"],
    ids=["numeric", "symbolic"],
)
def test_an_unknown_performative_closes_the_connection_with_decode_error(broker, body):
    with Bystander(broker) as bystander:
        with RawClient(broker.port) as raw:
            session = Session(raw)
            session.until(BEGIN)
            raw.send(frame(body))
            frames, _ = parse_frames(raw.read_to_eof())
        assert frames and frames[-1].descriptor == CLOSE, frames
        condition, description = frames[-1].error() or ("", "")
        assert condition == "amqp:decode-error"
        assert description.startswith("unknown performative")
        assert_still_serving(broker, bystander)


# -- link names: a second attach of a name still attached steals it ----------------------------------------------
def test_a_link_name_attached_again_steals_the_link_and_the_connection_lives(broker, uid):
    queue = f"stolen-{uid}".encode()
    with RawClient(broker.port) as raw:
        session = Session(raw)
        session.until(BEGIN)
        raw.send(attach_frame(b"twice", 0, receive=True, address=string(queue)))
        first = session.until(ATTACH)[-1]
        raw.send(attach_frame(b"twice", 1, receive=True, address=string(queue)))
        frames = session.until(DETACH)
        assert not any(f.descriptor in (ATTACH, CLOSE) for f in frames), frames  # held until we answer
        detach = frames[-1]
        assert detach.fields[0] == first.fields[1]  # the older attachment's handle (ours)
        condition, description = detach.error() or ("", "")
        assert condition == "amqp:link:stolen"
        assert "'twice'" in description
        raw.send(detach_frame(0))
        answer = session.until(ATTACH)[-1]
        assert answer.fields[0] == "twice" and answer.fields[5].value[0] == queue.decode()
        # The new attachment is a working consumer: grant credit, publish, and the message arrives on handle 1.
        flow = [uint(0), uint(5000), uint(0), uint(5000), uint(1), uint(0), uint(10)]
        raw.send(frame(described_list(FLOW, flow)))
        conn = connect(broker.url)
        sender(conn, queue.decode(), "queue").send(Message(body="after the steal"))
        conn.close()
        transfer = session.until(TRANSFER)[-1]
        assert transfer.fields[0] == answer.fields[1]


def test_two_blocking_receivers_on_one_address_keep_the_connection(broker, uid):
    """proton's BlockingConnection names links ``<container>-<address>``: the second receiver steals the first
    one's name. The first gets ``amqp:link:stolen``; the connection, and what it does next, goes on."""
    address = f"twice-{uid}"
    conn = BlockingConnection(broker.url, timeout=15)
    try:
        first = conn.create_receiver(address)
        with pytest.raises(LinkDetached) as stolen:
            conn.create_receiver(address)
        assert stolen.value.link == first.link
        assert first.link.remote_condition.name == "amqp:link:stolen"
        other = f"other-{uid}"  # the stealing receiver holds credit on ``address``: exchange elsewhere
        snd = conn.create_sender(other, name=f"snd-{uid}")
        snd.send(Message(body="still connected"))
        rcv = conn.create_receiver(other, name=f"rcv-{uid}", credit=10)
        assert receive_bodies(rcv, 1) == ["still connected"]
    finally:
        conn.close()
