"""The fuzz cases: byte streams a client could send, made deterministically from a seed (no I/O here).

Families (``FAMILIES``), each a function ``(rng, captures) -> bytes``:

- ``random``: random bytes with no protocol header, or after a valid SASL or AMQP header;
- ``sasl-frames``: the SASL header and random or mutated SASL frames;
- ``mutated``: a captured real client session (``captures``: the client-to-server frames of python-qpid-proton
  sessions, SASL ANONYMOUS or PLAIN, recorded by ``tests.fuzz.capture``) with frames mutated: bit flips,
  interesting bytes, truncation, a lying size field, frames dropped, duplicated, reordered or spliced from
  another session;
- ``bad-text``: a well-formed session whose one text field holds invalid UTF-8 or a non-ASCII symbol: every text
  field of sasl-init, open, begin-less attach (name, addresses, filter key and selector, capabilities), and of a
  transferred message (to, reply-to, subject, application property keys and values).

``make_case(seed, index, captures)`` is pure: the same seed and index give the same bytes, so a failure is
reproduced from the two numbers the runner prints.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence

from tests.support.wirebytes import binary, boolean, described_list, map32, null, string, sym, uint

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
INVALID_TEXT = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"caf\xc3", b"\x80abc", b"\xf8\x88\x80\x80\x80", b"PL\x8aIN"]
INTERESTING = [0x00, 0xFF, 0x7F, 0x80, 0xC0, 0xED, 0x40, 0xA1, 0xB1, 0xD0, 0xE0, 0x53]
INTERESTING_SIZES = [0, 7, 8, 255, 256, 65535, 65536, 2**31 - 1, 2**32 - 1]

Capture = Sequence[bytes]  # a session: protocol header(s) and frames, in the order the client sent them


def frame(body: bytes, frame_type: int = 0, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, channel) + body


def _random_bytes(rng: random.Random, captures: Sequence[Capture]) -> bytes:
    data = rng.randbytes(rng.randrange(1, 200))
    return rng.choice([b"", SASL_HEADER, AMQP_HEADER]) + data


def _sasl_frames(rng: random.Random, captures: Sequence[Capture]) -> bytes:
    body = b"\x00\x53" + bytes([rng.choice([0x40, 0x41, 0x42, 0x43, 0x44, rng.randrange(256)])])
    body += rng.randbytes(rng.randrange(0, 60))
    return SASL_HEADER + frame(body, frame_type=1)


def _mutate_frame(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    buf = bytearray(data)
    choice = rng.randrange(6)
    if choice == 0:  # bit flips
        for _ in range(rng.randrange(1, 4)):
            position = rng.randrange(len(buf))
            buf[position] ^= 1 << rng.randrange(8)
    elif choice == 1:  # interesting bytes
        buf[rng.randrange(len(buf))] = rng.choice(INTERESTING)
    elif choice == 2:  # truncation
        del buf[rng.randrange(len(buf)) :]
    elif choice == 3 and len(buf) >= 8:  # a size field that lies
        buf[0:4] = struct.pack(">I", rng.choice(INTERESTING_SIZES))
    elif choice == 4 and len(buf) > 12:  # a length inside the body that lies
        position = rng.randrange(8, len(buf))
        buf[position] = rng.choice([0x00, 0xFF, 0x7F, 0x80])
    else:  # random bytes inserted
        position = rng.randrange(len(buf))
        buf[position:position] = rng.randbytes(rng.randrange(1, 16))
    return bytes(buf)


def _mutated(rng: random.Random, captures: Sequence[Capture]) -> bytes:
    parts = list(rng.choice(captures))
    for _ in range(rng.randrange(1, 3)):
        operation = rng.randrange(5)
        index = rng.randrange(len(parts))
        if operation <= 1:
            parts[index] = _mutate_frame(rng, parts[index])
        elif operation == 2 and len(parts) > 1:
            del parts[index]
        elif operation == 3:
            parts.insert(index, parts[rng.randrange(len(parts))])
        else:  # splice a frame of another session
            other = rng.choice(captures)
            parts.insert(index, other[rng.randrange(len(other))])
    return b"".join(parts)


# -- bad text in every text field ----------------------------------------------------------------------------------
def _sasl_init(mechanism: bytes, response: bytes, hostname: bytes | None) -> bytes:
    fields = [sym(mechanism), binary(response), null() if hostname is None else string(hostname)]
    return SASL_HEADER + frame(described_list(0x41, fields), frame_type=1)


def _open(container: bytes, hostname: bytes = b"h", capability: bytes = b"ANONYMOUS-RELAY", key: bytes = b"k") -> bytes:
    fields = [string(container), string(hostname), null(), null(), null(), null(), null()]
    fields += [sym(capability), sym(capability), map32([(sym(key), string(b"v"))])]
    return frame(described_list(0x10, fields))


BEGIN = frame(described_list(0x11, [null(), uint(0), uint(100), uint(100)]))


def _attach(
    name: bytes, source: bytes, target: bytes, selector: bytes, key: bytes, capability: bytes, role: bool
) -> bytes:
    selector_filter = b"\x00" + sym(b"apache.org:selector-filter:string") + string(selector)
    source_fields = [
        string(source),
        null(),
        null(),
        null(),
        null(),
        null(),
        null(),
        map32([(sym(key), selector_filter)]),
    ]
    source_fields += [null(), null(), sym(capability)]
    target_fields = [string(target), null(), null(), null(), null(), null(), sym(capability)]
    fields = [string(name), uint(0), boolean(role), null(), null(), described_list(0x28, source_fields)]
    fields += [described_list(0x29, target_fields)]
    return frame(described_list(0x12, fields))


def _transfer(to: bytes, reply_to: bytes, subject: bytes, key: bytes, value: bytes) -> bytes:
    header = described_list(0x70, [boolean(True)])
    properties = described_list(0x73, [null(), null(), string(to), string(subject), string(reply_to)])
    application = b"\x00\x53\x74" + map32([(string(key), string(value))])
    body = b"\x00\x53\x77" + string(b"payload")
    transfer = described_list(0x14, [uint(0), uint(0), binary(b"\x00")])
    return frame(transfer + header + properties + application + body)


def _flow() -> bytes:
    return frame(described_list(0x13, [uint(0), uint(100), uint(0), uint(100), uint(0), uint(0), uint(100)]))


def _bad_text(rng: random.Random, captures: Sequence[Capture]) -> bytes:
    bad = rng.choice(INVALID_TEXT)
    field = rng.randrange(17)
    anonymous = _sasl_init(b"ANONYMOUS", b"", None) + AMQP_HEADER
    if field < 3:  # sasl-init: mechanism, hostname, PLAIN response
        if field == 0:
            return _sasl_init(bad, b"\x00a\x00b", None)
        if field == 1:
            return _sasl_init(b"PLAIN", b"\x00a\x00b", bad)
        return _sasl_init(b"PLAIN", b"\x00" + bad + b"\x00pw", None)
    if field < 7:  # open: container-id, hostname, capabilities, property keys
        args = [b"c", b"h", b"ANONYMOUS-RELAY", b"k"]
        args[field - 3] = bad
        return anonymous + _open(*args)
    prefix = anonymous + _open(b"fuzz") + BEGIN
    if field < 13:  # attach: name, source, target, selector, filter key, capability
        args: list[bytes | bool] = [b"l", b"q", b"q", b"a = 1", b"jms-selector", b"queue", rng.random() < 0.5]
        args[field - 7] = bad
        return prefix + _attach(*args)  # type: ignore[arg-type]
    message = [b"q", b"r", b"s", b"k", b"v"]  # to, reply-to, subject, property key, property value
    message[field - 13] = bad
    sending = _attach(b"l", b"", b"", b"a = 1", b"jms-selector", b"queue", False) + _flow()
    return prefix + sending + _transfer(*message)


FAMILIES: dict[str, Callable[[random.Random, Sequence[Capture]], bytes]] = {
    "random": _random_bytes,
    "sasl-frames": _sasl_frames,
    "mutated": _mutated,
    "bad-text": _bad_text,
}
WEIGHTS = {"random": 2, "sasl-frames": 2, "mutated": 4, "bad-text": 2}
_ORDER = [name for name, weight in WEIGHTS.items() for _ in range(weight)]


def make_case(seed: int, index: int, captures: Sequence[Capture]) -> tuple[str, bytes]:
    """(family, bytes) of case ``index`` of the run with ``seed``."""
    rng = random.Random(seed * 1_000_003 + index)
    family = _ORDER[index % len(_ORDER)]
    return family, FAMILIES[family](rng, captures)


def split_session(stream: bytes) -> list[bytes]:
    """A recorded client-to-server stream cut into protocol headers and whole frames (the mutation units)."""
    parts: list[bytes] = []
    rest = stream
    while rest:
        if rest.startswith(b"AMQP"):
            parts.append(rest[:8])
            rest = rest[8:]
            continue
        if len(rest) < 8:
            parts.append(rest)
            break
        size = struct.unpack(">I", rest[:4])[0]
        if size < 8:
            parts.append(rest)
            break
        parts.append(rest[:size])
        rest = rest[size:]
    return parts
