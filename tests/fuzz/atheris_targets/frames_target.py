"""atheris target: ``subgate.engine.frame_scan.FrameScan`` fed an arbitrary AMQP byte stream (issue 33).

The input is what a client sends after its AMQP header, fed once whole and once cut into chunks whose sizes come
from the input's own bytes. Contract checked (the module's docstring): nothing the peer sends raises; where the
reads end changes nothing (the same bytes forwarded, the same verdicts); bytes are only forwarded, held or
dropped, never made up (what is forwarded is the input with frames taken out or moved later); what is held back
before a frame is whole is at most one frame (``max-frame-size``) and one chunk; after ``CloseConnection`` nothing
more comes out.
"""

from __future__ import annotations

from subgate.engine.frame_scan import MAX_HELD_FRAMES, Action, CloseConnection, Forward, FrameScan

INSTRUMENT = ("subgate.engine.frame_scan", "subgate.engine.codec")
MAX_LEN = 4096
MAX_FRAME = 2048
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
DICTIONARY = (
    b"\x02\x00\x00\x00",
    b"\x02\x00\x00\x01",
    b"\x00\x53\x10",
    b"\x00\x53\x11",
    b"\x00\x53\x12",
    b"\x00\x53\x13",
    b"\x00\x53\x14",
    b"\x00\x53\x16",
    b"\x00\x53\x17",
    b"\x00\x53\x28",
    b"\x00\x53\x29",
    b"\xa3\x10amqp:begin:list",
    b"\xa1\x01\x00",
    b"\x70\x00\x00\x00\x00",
    b"\x41",
    b"\x42",
    b"\x40",
)


def _frame(body: bytes, channel: int = 0) -> bytes:
    return (8 + len(body)).to_bytes(4, "big") + b"\x02\x00" + channel.to_bytes(2, "big") + body


def _list(code: int, fields: bytes, count: int) -> bytes:
    return b"\x00\x53" + bytes([code]) + b"\xc0" + bytes([len(fields) + 1, count]) + fields


def seeds() -> list[bytes]:
    """An open, a begin, two attaches of one name (a steal), flows, a transfer, detaches, an end, a heartbeat."""
    open_ = _frame(_list(0x10, b"\xa1\x01c", 1))
    begin = _frame(_list(0x11, b"\x40\x43\x70\x00\x00\x00\x0a\x70\x00\x00\x00\x0a", 4))
    target = _list(0x29, b"\xa1\x01q", 1)
    attach0 = _frame(_list(0x12, b"\xa1\x01n\x43\x42\x40\x40\x40" + target, 7))
    attach1 = _frame(_list(0x12, b"\xa1\x01n\x52\x01\x42\x40\x40\x40" + target, 7))
    nul = _frame(_list(0x12, b"\xa1\x01m\x52\x02\x42\x40\x40\x40" + _list(0x29, b"\xa1\x03a\x00b", 1), 7))
    flow = _frame(_list(0x13, b"\x43\x70\x00\x00\x00\x0a\x43\x70\x00\x00\x00\x0a\x52\x01\x43\x52\x05", 7))
    transfer = _frame(_list(0x14, b"\x43\x43\xa0\x01t", 3) + b"\x00\x53\x75\xa0\x03abc")
    detach0 = _frame(_list(0x16, b"\x43\x41", 2))
    end = _frame(_list(0x17, b"", 0))
    heartbeat = b"\x00\x00\x00\x08\x02\x00\x00\x00"
    unknown = _frame(b"\x00\x53\x30\x45")
    return [
        open_ + begin + attach0 + flow + transfer + heartbeat + detach0 + end,
        open_ + begin + attach0 + attach1 + flow + detach0 + end,
        open_ + begin + attach0 + attach0 + transfer + end,
        open_ + begin + nul + unknown,
    ]


def _run(scanner: FrameScan, chunks: list[bytes]) -> tuple[bytes, list[Action]]:
    forwarded, verdicts, closed = b"", [], False
    for chunk in chunks:
        actions = scanner.feed(chunk)
        assert not (closed and actions), "output after CloseConnection"
        for action in actions:
            if isinstance(action, Forward):
                forwarded += action.data
            else:
                verdicts.append(action)
                closed = closed or isinstance(action, CloseConnection)
        assert len(scanner._carry) <= MAX_FRAME + len(chunk), len(scanner._carry)
    for held in scanner._held.values():
        assert len(held.frames) <= MAX_HELD_FRAMES + 1
    return forwarded, verdicts


def test_one(data: bytes) -> None:
    stream = AMQP_HEADER + data
    whole = _run(FrameScan(MAX_FRAME), [stream])
    chunks, pos = [], 0
    while pos < len(stream):
        size = 1 + stream[pos] % 37
        chunks.append(stream[pos : pos + size])
        pos += size
    assert _run(FrameScan(MAX_FRAME), chunks) == whole
    forwarded = whole[0]
    assert len(forwarded) <= len(stream)
    assert forwarded[: len(AMQP_HEADER)] == AMQP_HEADER[: len(forwarded)]
    assert _only_from(forwarded, stream)


def _only_from(forwarded: bytes, stream: bytes) -> bool:
    """Every byte value forwarded occurs in the input at least as often (a cheap check that nothing is made up)."""
    counts = [0] * 256
    for byte in stream:
        counts[byte] += 1
    for byte in forwarded:
        counts[byte] -= 1
        if counts[byte] < 0:
            return False
    return True
