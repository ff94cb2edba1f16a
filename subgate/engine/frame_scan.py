"""What a peer's AMQP frames say before proton reads them: the fields proton would rewrite, and the protocol rules
proton lets pass (docs/security.md, "Frames checked before proton reads them").

Owns ``FrameScan``: one per connection, fed the bytes of its AMQP phase (protocol header first) and answering
with what to do: ``Forward`` the bytes to proton, or one of the verdicts below. Pure rules, no I/O and no proton:
``gateway.frame_gate`` carries the verdicts out on the proton objects.

Why here and not from proton's getters: proton-c hands the Python wrappers C strings and typed fields, so
``Terminus.address`` stops at a NUL byte (``topic://a\\x00hidden`` reads as ``topic://a``), a 1 MB symbol address
reads as no address at all (the anonymous relay), a binary container-id reads as none, and two attaches on one
handle, an unknown performative, or a second attach of a link name still attached never reach a handler the way
the spec wants them answered. Only the frame bytes tell.

Rules (AMQP 1.0 part 2):

- ``open``: container-id and hostname must be strings without a NUL byte, else ``CloseConnection``
  (``amqp:invalid-field`` naming the field). A null container-id stays accepted, as before.
- ``attach``: the name must be a string (else ``CloseConnection``: a link that cannot be named cannot be refused);
  a name with a NUL byte, and a source or target address that is not a string or symbol, holds a NUL byte or is
  longer than ``MAX_ADDRESS_LENGTH`` characters, gets ``RefuseAttach`` (attach answered with a null terminus and
  detached with ``amqp:invalid-field`` naming the field).
- ``attach`` on a handle already in use in its session (§2.7.3): ``EndSession`` with
  ``amqp:session:handle-in-use``; the frame is dropped, and so is everything else the peer sends on that channel
  until its ``end``.
- ``attach`` of a name and role already attached on this connection (§2.6.1, "link stealing"): ``Steal`` (the
  older attachment is detached with ``amqp:link:stolen``). The new attach, and the frames on its handle, are
  held back until the peer's ``detach`` of the older attachment arrives: proton-c refuses a second attach of a
  name still attached by closing the whole connection, on the server and on a proton client alike. More than
  ``MAX_HELD_FRAMES`` frames held back for one link closes the connection (``amqp:resource-limit-exceeded``).
- A frame body whose performative is none of the nine of §2.7 (§2.3.2: it "MUST be one of those defined in
  section 2.7"): ``CloseConnection`` with ``amqp:decode-error``.

Only ``open``, ``begin``, ``attach``, ``detach`` and ``end`` frames are decoded (with ``engine.codec``); a
``transfer``, ``flow`` or ``disposition`` costs a header read, unless its channel has held or dropped frames. A
frame header proton would refuse (bad size or offset), a frame larger than the connection's max-frame-size, or a
performative the codec cannot decode is forwarded untouched, from there on: proton refuses it as before.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from subgate.engine.codec import CodecError, Described, Symbol, decode_value
from subgate.mapping.errors import DECODE_ERROR, HANDLE_IN_USE, INVALID_FIELD, RESOURCE_LIMIT
from subgate.mapping.names import MAX_NAME_LENGTH

MAX_ADDRESS_LENGTH = MAX_NAME_LENGTH  # characters of a source or target address (docs/protocol.md, "Limits")
MAX_HELD_FRAMES = 256  # frames held back for one stolen link name before the connection is closed

_HEADER = struct.Struct(">IBBH")  # size, data offset (4-byte words), frame type, channel
_PROTOCOL_HEADER = 8
_AMQP_FRAME = 0

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
_PERFORMATIVES = {
    "amqp:open:list": OPEN,
    "amqp:begin:list": BEGIN,
    "amqp:attach:list": ATTACH,
    "amqp:flow:list": FLOW,
    "amqp:transfer:list": TRANSFER,
    "amqp:disposition:list": DISPOSITION,
    "amqp:detach:list": DETACH,
    "amqp:end:list": END,
    "amqp:close:list": CLOSE,
}
_DECODED = frozenset({OPEN, BEGIN, ATTACH, DETACH, END})
_SOURCE, _TARGET = 0x28, 0x29
_HANDLE_FIELD = {FLOW: 4, TRANSFER: 0, DETACH: 0}  # where a frame names its link's handle


@dataclass(frozen=True, slots=True)
class Forward:
    """Hand these bytes to proton."""

    data: bytes


@dataclass(frozen=True, slots=True)
class SessionBegun:
    """The bytes forwarded just before this held the peer's ``begin`` of a new session on ``channel``."""

    channel: int


@dataclass(frozen=True, slots=True)
class RefuseAttach:
    """The attach forwarded just before this (link ``name``, our side a sender when ``sender``) is refused."""

    channel: int
    name: str
    sender: bool
    condition: str
    description: str


@dataclass(frozen=True, slots=True)
class Steal:
    """Detach our older attachment of link ``name`` (our side a sender when ``sender``) on ``channel`` with
    ``amqp:link:stolen``: the peer attached the name again."""

    channel: int
    name: str
    sender: bool
    description: str


@dataclass(frozen=True, slots=True)
class EndSession:
    """End the session on ``channel`` with the error (the frame that broke the rule was not forwarded)."""

    channel: int
    condition: str
    description: str


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """Close the connection with the error; nothing more is forwarded."""

    condition: str
    description: str


Action = Forward | SessionBegun | RefuseAttach | Steal | EndSession | CloseConnection


@dataclass(slots=True)
class _Held:
    """A second attach of a link name, waiting for the peer's detach of the first (``old``)."""

    old: tuple[int, int]  # (channel, handle) of the older attachment
    key: tuple[str, bool]  # the link's name (as proton holds it) and whether the peer receives
    frames: list[bytes]  # the attach first
    refusal: RefuseAttach | None  # what the attach gets once it reaches proton


class FrameScan:
    """One connection's frames as the peer sends them (see the module docstring)."""

    __slots__ = ("_max_frame", "_header_left", "_carry", "_skip", "_through", "_closed", "_handles", "_names",
                 "_dropping", "_held", "_waiting", "_watched")  # fmt: skip

    def __init__(self, max_frame_size: int, *, protocol_header: bool = True) -> None:
        self._max_frame = max_frame_size
        self._header_left = _PROTOCOL_HEADER if protocol_header else 0
        self._carry = b""  # the start of a frame not all here yet
        self._skip = 0  # bytes of the current frame to forward unread
        self._through = False  # framing proton will refuse: forward everything as it comes
        self._closed = False
        self._handles: dict[int, dict[int, tuple[str, bool]]] = {}  # channel -> handle -> (name, peer receives)
        self._names: dict[tuple[str, bool], tuple[int, int]] = {}  # (name, peer receives) -> (channel, handle)
        self._dropping: set[int] = set()  # channels whose session we ended: dropped until the peer's end
        self._held: dict[tuple[int, int], _Held] = {}  # (channel, handle) of a held attach -> its frames
        self._waiting: dict[tuple[int, int], tuple[int, int]] = {}  # older attachment -> the held one
        self._watched: set[int] = set()  # channels with held or dropped frames: every frame there is read

    def feed(self, data: bytes) -> list[Action]:
        """The verdicts on ``data`` (the next bytes from the peer), in order."""
        if self._closed:
            return []
        if self._through:
            return [Forward(data)]
        if self._carry:
            data = self._carry + data
            self._carry = b""
        n = len(data)
        pos = 0
        if self._header_left:
            pos = min(self._header_left, n)
            self._header_left -= pos
        if self._skip:
            take = min(self._skip, n - pos)
            pos += take
            self._skip -= take
        out: list[Action] = []
        pos, start = self._frames(data, pos, out)
        if self._closed:
            return _merged(out)
        if self._through:
            out.append(Forward(data[start:]))
            return _merged(out)
        if pos > n:  # the last frame goes on in the next bytes
            self._skip = pos - n
            pos = n
        if pos > start:
            out.append(Forward(data[start:pos]))
        self._carry = data[pos:]
        return _merged(out)

    def _rewatch(self) -> None:
        """Recompute the watched channels in place: ``_frames`` holds the set across the frames of one feed, so a
        new set would leave it reading a stale one (a channel dropped later in the same feed went unread)."""
        watched = {c for c, _ in self._held} | self._dropping
        self._watched.intersection_update(watched)
        self._watched.update(watched)

    def take_partial(self) -> bytes:
        """The start of a frame held back because it is not all here (the peer's input ended: proton gets it, and
        says what it says of a frame cut short)."""
        partial, self._carry = self._carry, b""
        return partial

    def _frames(self, data: bytes, pos: int, out: list[Action]) -> tuple[int, int]:
        """Read the frames of ``data`` from ``pos``, adding verdicts to ``out``; returns where reading stopped (past
        the end when the last frame goes on) and where the bytes not yet in ``out`` start."""
        n = len(data)
        start = 0
        unpack = _HEADER.unpack_from
        watched = self._watched
        hot = _HOT
        while n - pos >= 8:
            # The hot path, one frame a turn: a transfer, flow, disposition or close (or a heartbeat) on a channel
            # with nothing held or dropped is forwarded unread past its first three body bytes.
            size, doff, frame_type, channel = unpack(data, pos)
            body = doff * 4
            if size < 8 or doff < 2 or body > size:
                self._through = True  # proton refuses the header
                return n, start
            if frame_type != _AMQP_FRAME or size == body:  # not ours to read, or a heartbeat
                pos += size
                continue
            at = pos + body
            if n - at < 3:
                break
            if data[at] == 0 and data[at + 1] == 0x53:
                code: int | None = data[at + 2]
                if code in hot and channel not in watched:
                    pos += size
                    continue
            else:
                code = None
            if size > self._max_frame:
                self._through = True  # proton refuses it
                return n, start
            if n - pos < size:
                break
            verdicts, forward = self._inspect(data[pos : pos + size], body, channel, code)
            cut = pos + size if forward else pos
            if cut > start:
                out.append(Forward(data[start:cut]))
            out.extend(verdicts)
            pos += size
            start = pos
            if self._closed:
                break
        return pos, start

    # -- one frame ---------------------------------------------------------------------------------------------
    def _inspect(self, frame: bytes, body: int, channel: int, code: int | None) -> tuple[list[Action], bool]:
        """The verdicts on one whole frame, and whether it goes to proton now (False: dropped or held)."""
        try:
            value, _end = decode_value(frame, body)
        except CodecError:
            value = None
        if code is None:
            if not isinstance(value, Described):
                return [], True  # proton says what is wrong with it
            descriptor = value.descriptor
            code = _PERFORMATIVES.get(descriptor) if isinstance(descriptor, str) else _small(descriptor)
            if code is None:
                self._closed = True
                return [CloseConnection(DECODE_ERROR, f"unknown performative {_shown(descriptor)}")], False
        elif not OPEN <= code <= CLOSE:
            self._closed = True
            return [CloseConnection(DECODE_ERROR, f"unknown performative 0x{code:02x}")], False
        fields = value.value if isinstance(value, Described) and isinstance(value.value, list) else None
        if channel in self._dropping:
            if code == END:
                self._dropping.discard(channel)
                return self._forget_channel(channel), True
            return [], False
        if fields is None:
            return [], True  # undecodable: proton refuses it as before
        if code == OPEN:  # forwarded even when refused: proton-c writes no close before it has read an open
            return self._open(fields), True
        if code == BEGIN:
            return ([SessionBegun(channel)] if _field(fields, 0) is None else []), True
        if code == ATTACH:
            return self._attach(frame, channel, fields)
        if code == END:
            return self._forget_channel(channel), True
        handle = _field(fields, _HANDLE_FIELD.get(code, -1))
        if isinstance(handle, int) and (channel, handle) in self._held:
            return self._hold(channel, handle, frame)
        if code == DETACH and isinstance(handle, int):
            return self._detach(channel, handle)
        return [], True

    def _open(self, fields: list[object]) -> list[Action]:
        for index, name in ((0, "open container-id"), (1, "open hostname")):
            value = _field(fields, index)
            if value is None:
                continue
            problem = _text_problem(value, symbol_allowed=False)
            if problem is not None:
                self._closed = True
                return [CloseConnection(INVALID_FIELD, f"{name}: {problem}")]
        return []

    def _attach(self, frame: bytes, channel: int, fields: list[object]) -> tuple[list[Action], bool]:
        name, handle, role = _field(fields, 0), _field(fields, 1), _field(fields, 2)
        if name is None or not isinstance(handle, int) or not isinstance(role, bool):
            return [], True  # mandatory fields missing: proton refuses the attach as before
        if not isinstance(name, str) or isinstance(name, Symbol):
            self._closed = True
            return [CloseConnection(INVALID_FIELD, f"attach name: must be a string, got {_kind(name)}")], False
        handles = self._handles.setdefault(channel, {})
        if handle in handles or (channel, handle) in self._held:
            self._dropping.add(channel)
            self._watched.add(channel)
            user = handles[handle][0] if handle in handles else name
            description = f"attach of link {name!r} on handle {handle}, which link {user!r} still uses"
            return [EndSession(channel, HANDLE_IN_USE, description)], False
        key = (name.split("\x00", 1)[0], role)  # the name as proton holds it
        sender = role  # the peer receives: our side sends
        problem = _attach_problem(name, fields)
        refusal = None if problem is None else RefuseAttach(channel, key[0], sender, INVALID_FIELD, problem)
        older = self._names.get(key)
        if older is not None:
            self._held[(channel, handle)] = _Held(older, key, [frame], refusal)
            self._waiting[older] = (channel, handle)
            self._watched.add(channel)
            description = f"link {key[0]!r} was attached again (handle {handle}); the older attachment is closed"
            return [Steal(older[0], key[0], sender, description)], False
        handles[handle] = key
        self._names[key] = (channel, handle)
        return ([] if refusal is None else [refusal]), True

    def _detach(self, channel: int, handle: int) -> tuple[list[Action], bool]:
        """The peer detached a link: its handle and name are free; a held attach of the name goes on."""
        key = self._handles.get(channel, {}).pop(handle, None)
        if key is not None and self._names.get(key) == (channel, handle):
            del self._names[key]
        return self._release((channel, handle)), True  # the detach goes first, then what was held

    def _release(self, older: tuple[int, int]) -> list[Action]:
        """The older attachment ``older`` is gone: the attach held for it, and what followed on its handle, go to
        proton now (``feed`` puts them right after the frame that freed it)."""
        held_at = self._waiting.pop(older, None)
        if held_at is None:
            return []
        held = self._held.pop(held_at)
        self._handles.setdefault(held_at[0], {})[held_at[1]] = held.key  # the held attach now holds the name
        self._names[held.key] = held_at
        self._rewatch()
        attach, *rest = held.frames
        out: list[Action] = [Forward(attach)]
        if held.refusal is not None:
            out.append(held.refusal)
        out.extend(Forward(frame) for frame in rest)
        return out

    def _hold(self, channel: int, handle: int, frame: bytes) -> tuple[list[Action], bool]:
        held = self._held[(channel, handle)]
        held.frames.append(frame)
        if len(held.frames) > MAX_HELD_FRAMES:
            self._closed = True
            return [CloseConnection(RESOURCE_LIMIT, "a stolen link's older attachment was never detached")], False
        return [], False

    def _forget_channel(self, channel: int) -> list[Action]:
        """The peer ended the session on ``channel``: its handles, names and held attaches are gone; an attach
        held on another channel for an older attachment on this one goes on (what to forward after the end)."""
        for key in self._handles.pop(channel, {}).values():
            if self._names.get(key, (None,))[0] == channel:
                del self._names[key]
        for at in [at for at in self._held if at[0] == channel]:
            held = self._held.pop(at)
            self._waiting.pop(held.old, None)
        out: list[Action] = []
        for older in [older for older in self._waiting if older[0] == channel]:
            out.extend(self._release(older))
        self._rewatch()
        return out


_HOT = frozenset({FLOW, TRANSFER, DISPOSITION, CLOSE})


def _merged(actions: list[Action]) -> list[Action]:
    """Neighbouring ``Forward``s joined: one push into proton each."""
    out: list[Action] = []
    for action in actions:
        if isinstance(action, Forward) and out and isinstance(out[-1], Forward):
            out[-1] = Forward(out[-1].data + action.data)
        elif not isinstance(action, Forward) or action.data:
            out.append(action)
    return out


def _field(fields: list[object], index: int) -> object:
    return fields[index] if 0 <= index < len(fields) else None


def _small(descriptor: object) -> int | None:
    """A numeric descriptor that names a performative (domain 0, codes 0x10-0x18)."""
    if isinstance(descriptor, int) and OPEN <= descriptor <= CLOSE:
        return int(descriptor)
    return None


def _shown(descriptor: object) -> str:
    if isinstance(descriptor, int):
        return f"0x{int(descriptor):x}"
    text = repr(descriptor)
    return text if len(text) <= 64 else text[:63] + "…"


def _kind(value: object) -> str:
    """The AMQP type a decoded value had, as a description names it."""
    if isinstance(value, Symbol):
        return "symbol"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Described):
        return "a described value"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__.lower()


def _text_problem(value: object, *, symbol_allowed: bool, limit: int | None = None) -> str | None:
    if not isinstance(value, str) or (isinstance(value, Symbol) and not symbol_allowed):
        wanted = "a string or symbol" if symbol_allowed else "a string"
        return f"must be {wanted}, got {_kind(value)}"
    if "\x00" in value:
        return "contains a NUL byte"
    if limit is not None and len(value) > limit:
        return f"{len(value)} characters (at most {limit})"
    return None


def _attach_problem(name: str, fields: list[object]) -> str | None:
    """Why an attach is refused for its name or addresses, or None."""
    if "\x00" in name:
        return "attach name: contains a NUL byte"
    for index, descriptor, what in ((5, _SOURCE, "source"), (6, _TARGET, "target")):
        terminus = _field(fields, index)
        if not isinstance(terminus, Described) or terminus.descriptor != descriptor:
            continue  # absent, or a coordinator: nothing of an address
        address = _field(terminus.value, 0) if isinstance(terminus.value, list) else None
        if address is None:
            continue
        problem = _text_problem(address, symbol_allowed=True, limit=MAX_ADDRESS_LENGTH)
        if problem is not None:
            return f"{what} address: {problem}"
    return None
