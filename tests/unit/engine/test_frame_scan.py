"""engine.frame_scan: the verdicts on a peer's frames, whatever the pieces the bytes arrive in.

The end-to-end cases (a real server, a real socket) are in tests/e2e/test_wire_rules.py; here the rules are
checked on their own, and every stream is also fed in every split (one byte at a time, and cut at each offset)
to show that where a read ends changes nothing.
"""

from __future__ import annotations

import pytest

from subgate.engine.frame_scan import (
    MAX_HELD_FRAMES,
    Action,
    CloseConnection,
    EndSession,
    Forward,
    FrameScan,
    RefuseAttach,
    SessionBegun,
    Steal,
)
from tests.support.rawamqp import AMQP_HEADER, frame
from tests.support.wirebytes import binary, boolean, described_list, null, string, sym, uint

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)


def open_f(container_id: bytes = string(b"c")) -> bytes:
    return frame(described_list(OPEN, [container_id]))


def begin_f(channel: int = 0) -> bytes:
    return frame(described_list(BEGIN, [null(), uint(0), uint(10), uint(10)]), channel=channel)


def attach_f(name: bytes, handle: int, address: bytes = string(b"q"), *, receive: bool = False, channel: int = 0):
    terminus = described_list(0x28 if receive else 0x29, [address])
    source, target = (terminus, null()) if receive else (null(), terminus)
    fields = [string(name), uint(handle), boolean(receive), null(), null(), source, target]
    return frame(described_list(ATTACH, fields), channel=channel)


def detach_f(handle: int, channel: int = 0) -> bytes:
    return frame(described_list(DETACH, [uint(handle), boolean(True)]), channel=channel)


def flow_f(handle: int, channel: int = 0) -> bytes:
    fields = [uint(0), uint(10), uint(0), uint(10), uint(handle), uint(0), uint(5)]
    return frame(described_list(FLOW, fields), channel=channel)


def transfer_f(handle: int, payload: bytes = b"x" * 300) -> bytes:
    return frame(described_list(TRANSFER, [uint(handle), uint(0), binary(b"t")]) + b"\x00\x53\x75" + binary(payload))


def end_f(channel: int = 0) -> bytes:
    return frame(described_list(END, []), channel=channel)


HEARTBEAT = frame(b"")


def scan(stream: bytes, split: int | None = None) -> tuple[bytes, list[Action]]:
    """(the bytes forwarded, the other verdicts in order) for ``stream`` fed whole, or cut every ``split`` bytes."""
    scanner = FrameScan(1 << 20)
    step = split or len(stream)
    forwarded, verdicts = b"", []
    for at in range(0, len(stream), step):
        for action in scanner.feed(stream[at : at + step]):
            if isinstance(action, Forward):
                forwarded += action.data
            else:
                verdicts.append(action)
    return forwarded, verdicts


def same_in_every_split(stream: bytes) -> tuple[bytes, list[Action]]:
    whole = scan(stream)
    for split in (1, 2, 3, 7, 64, 257):
        assert scan(stream, split) == whole, split
    for cut in range(1, len(stream), max(1, len(stream) // 200)):
        scanner = FrameScan(1 << 20)
        actions = scanner.feed(stream[:cut]) + scanner.feed(stream[cut:])
        forwarded = b"".join(a.data for a in actions if isinstance(a, Forward))
        assert (forwarded, [a for a in actions if not isinstance(a, Forward)]) == whole, cut
    return whole


def test_ordinary_traffic_is_forwarded_unchanged_with_only_the_session_noted():
    stream = AMQP_HEADER + open_f() + begin_f() + attach_f(b"p", 0) + flow_f(0) + HEARTBEAT
    stream += b"".join(transfer_f(0) for _ in range(5)) + detach_f(0) + end_f() + frame(described_list(CLOSE, []))
    forwarded, verdicts = same_in_every_split(stream)
    assert forwarded == stream
    assert verdicts == [SessionBegun(0)]


@pytest.mark.parametrize(
    ("address", "receive", "description"),
    [
        (string(b"topic://a\x00hidden"), False, "target address: contains a NUL byte"),
        (string(b"a\x00"), True, "source address: contains a NUL byte"),
        (sym(b"q" * 1025), False, "target address: 1025 characters (at most 1024)"),
        (binary(b"q"), True, "source address: must be a string or symbol, got binary"),
        (uint(7), False, "target address: must be a string or symbol, got uint"),
    ],
)
def test_an_attach_with_a_bad_address_is_forwarded_and_refused(address, receive, description):
    attach = attach_f(b"l", 3, address, receive=receive)
    forwarded, verdicts = same_in_every_split(AMQP_HEADER + open_f() + begin_f() + attach)
    assert forwarded.endswith(attach)
    assert verdicts == [SessionBegun(0), RefuseAttach(0, "l", receive, "amqp:invalid-field", description)]


def test_an_address_at_the_limit_and_a_symbol_address_pass():
    stream = AMQP_HEADER + open_f() + begin_f() + attach_f(b"a", 0, string(b"q" * 1024)) + attach_f(b"b", 1, sym(b"s"))
    assert same_in_every_split(stream) == (stream, [SessionBegun(0)])


@pytest.mark.parametrize(
    ("container_id", "description"),
    [
        (binary(b"x"), "open container-id: must be a string, got binary"),
        (string(b"x\x00y"), "open container-id: contains a NUL byte"),
    ],
)
def test_an_open_with_a_bad_container_id_closes_and_forwards_nothing_more(container_id, description):
    forwarded, verdicts = same_in_every_split(AMQP_HEADER + open_f(container_id) + begin_f())
    assert forwarded == AMQP_HEADER + open_f(container_id)  # proton writes a close only after it read an open
    assert verdicts == [CloseConnection("amqp:invalid-field", description)]


def test_a_second_attach_on_a_handle_in_use_ends_the_session_and_drops_its_frames_until_the_end():
    before = AMQP_HEADER + open_f() + begin_f() + begin_f(1) + attach_f(b"one", 0)
    dropped = attach_f(b"two", 0) + flow_f(0) + transfer_f(0)
    after = attach_f(b"other", 0, channel=1) + end_f() + begin_f() + attach_f(b"again", 0)
    forwarded, verdicts = same_in_every_split(before + dropped + after)
    assert forwarded == before + after
    assert verdicts == [
        SessionBegun(0),
        SessionBegun(1),
        EndSession(0, "amqp:session:handle-in-use", "attach of link 'two' on handle 0, which link 'one' still uses"),
        SessionBegun(0),
    ]


@pytest.mark.parametrize("body", [described_list(0x30, []), b"\x00\xa3\x0bamqp:x:list\x45", b"\x00\x53\x05\x45"])
def test_an_unknown_performative_closes_the_connection(body):
    before = AMQP_HEADER + open_f() + begin_f()
    forwarded, verdicts = same_in_every_split(before + frame(body) + attach_f(b"late", 0))
    assert forwarded == before
    assert len(verdicts) == 2 and isinstance(verdicts[1], CloseConnection)
    assert verdicts[1].condition == "amqp:decode-error"
    assert verdicts[1].description.startswith("unknown performative")


def test_a_symbolic_descriptor_of_a_known_performative_is_read_like_the_numeric_one():
    symbolic = b"\x00\xa3\x10amqp:begin:list" + b"\x45"
    forwarded, verdicts = same_in_every_split(AMQP_HEADER + open_f() + frame(symbolic))
    assert verdicts == []  # a begin without a remote-channel field is not read as a new session: list0
    assert forwarded.endswith(frame(symbolic))


def test_a_name_attached_again_steals_and_holds_the_new_attach_until_the_old_one_is_detached():
    before = AMQP_HEADER + open_f() + begin_f() + attach_f(b"n", 0, receive=True) + flow_f(0)
    held = attach_f(b"n", 1, receive=True) + flow_f(1)
    meanwhile = transfer_f(7) + flow_f(0) + HEARTBEAT
    stream = before + held[: len(attach_f(b"n", 1, receive=True))] + meanwhile + flow_f(1) + detach_f(0)
    stream += detach_f(1)
    forwarded, verdicts = same_in_every_split(stream)
    assert forwarded == before + meanwhile + detach_f(0) + held + detach_f(1)
    assert verdicts == [
        SessionBegun(0),
        Steal(0, "n", True, "link 'n' was attached again (handle 1); the older attachment is closed"),
    ]


def test_a_held_attach_with_a_bad_address_is_refused_once_released():
    attach = attach_f(b"n", 1, string(b"a\x00b"))
    stream = AMQP_HEADER + open_f() + begin_f() + attach_f(b"n", 0) + attach + detach_f(0)
    _, verdicts = same_in_every_split(stream)
    assert [type(v) for v in verdicts] == [SessionBegun, Steal, RefuseAttach]


def test_the_same_name_in_the_other_direction_is_another_link():
    stream = AMQP_HEADER + open_f() + begin_f() + attach_f(b"n", 0) + attach_f(b"n", 1, receive=True)
    assert same_in_every_split(stream) == (stream, [SessionBegun(0)])


def test_a_name_whose_old_attachment_is_never_detached_closes_the_connection_past_the_bound():
    stream = AMQP_HEADER + open_f() + begin_f() + attach_f(b"n", 0) + attach_f(b"n", 1)
    stream += flow_f(1) * MAX_HELD_FRAMES
    _, verdicts = scan(stream)
    assert isinstance(verdicts[-1], CloseConnection) and verdicts[-1].condition == "amqp:resource-limit-exceeded"


def test_a_non_string_link_name_closes_the_connection():
    bad = frame(described_list(ATTACH, [binary(b"n"), uint(0), boolean(False), null(), null(), null(), null()]))
    _, verdicts = same_in_every_split(AMQP_HEADER + open_f() + begin_f() + bad)
    assert verdicts[-1] == CloseConnection("amqp:invalid-field", "attach name: must be a string, got binary")


def test_frames_proton_refuses_are_forwarded_as_they_are():
    bad_header = b"\x00\x00\x00\x04\x02\x00\x00\x00"  # size below a frame header
    stream = AMQP_HEADER + open_f() + bad_header + attach_f(b"x", 0, string(b"a\x00"))
    assert same_in_every_split(stream) == (stream, [])
    too_big = AMQP_HEADER + open_f() + b"\x7f\xff\xff\xff\x02\x00\x00\x00\x00\x53\x12"
    assert scan(too_big, 5) == (too_big, [])


def test_an_attach_held_on_another_session_goes_on_when_the_older_ones_session_ends():
    before = AMQP_HEADER + open_f() + begin_f() + begin_f(1) + attach_f(b"n", 0, receive=True)
    held = attach_f(b"n", 0, receive=True, channel=1)
    forwarded, verdicts = same_in_every_split(before + held + end_f() + detach_f(0, channel=1))
    assert forwarded == before + end_f() + held + detach_f(0, channel=1)
    assert [type(v) for v in verdicts] == [SessionBegun, SessionBegun, Steal]


def test_a_held_attach_is_dropped_with_its_own_session():
    before = AMQP_HEADER + open_f() + begin_f() + attach_f(b"n", 0)
    forwarded, _ = same_in_every_split(before + attach_f(b"n", 1) + flow_f(1) + end_f() + begin_f() + attach_f(b"n", 0))
    assert forwarded == before + end_f() + begin_f() + attach_f(b"n", 0)
