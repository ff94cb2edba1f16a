"""Targeted cases: one whole client session, written byte by byte, with invalid text in exactly one field.

``session(field, raw)`` writes what a client pipelines in one go: SASL header and sasl-init, AMQP header, open,
begin, a receiver attach with a JMS selector and credit, a sender to the same queue and an anonymous-relay
sender, one transfer on each, then detach, end and close. Every text field of those frames is a named slot
(``TEXT_FIELDS``); the slot named ``field`` holds ``raw`` instead of its usual, valid value. Because the session
ends with the client's own close, a server that handled every frame answers with a close (or drops the socket)
without waiting for more input. Pure: bytes out, nothing else.
"""

from __future__ import annotations

from tests.fuzz.wire import (
    AMQP_HEADER,
    SASL_FRAME,
    SASL_HEADER,
    Described,
    Map,
    Raw,
    Str,
    Sym,
    SymArray,
    UByte,
    UInt,
    ULong,
    UShort,
    Value,
    encode,
    frame,
    performative,
)

SELECTOR_CODE = 0x0000468C00000004
QUEUE = "fuzz.targeted"
USER, PASSWORD = b"alice", b"s3cret"

# Invalid (or, for symbols, non-ASCII) text: overlong forms, surrogates, bytes never valid, cut sequences.
BAD_TEXT: tuple[bytes, ...] = (
    b"\xc0\xaf",  # overlong '/'
    b"\xe0\x80\x80",  # overlong NUL, 3 bytes
    b"\xed\xa0\x80",  # lone high surrogate
    b"\xed\xbf\xbf",  # lone low surrogate
    b"\xff",
    b"\xe2\x82",  # truncated 3-byte sequence
    b"\xf0\x9f\x98",  # truncated 4-byte sequence
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"ok\x80tail",  # stray continuation byte inside valid text
    b"PL\x8aIN",  # a non-ASCII byte in a mechanism-like word
    b"caf\xc3\xa9",  # valid UTF-8, but not ASCII (invalid in a symbol)
)

# slot -> the server it is sent to ("anonymous": SASL ANONYMOUS allowed; "plain": PLAIN with a user).
TEXT_FIELDS: dict[str, str] = {
    "sasl-init.mechanism": "anonymous",
    "sasl-init.mechanism@plain": "plain",
    "sasl-init.hostname": "anonymous",
    "sasl-init.plain-user": "plain",
    "sasl-init.plain-password": "plain",
    **{
        f"{where}.{name}": "anonymous"
        for where, names in {
            "open": ("container-id", "hostname", "outgoing-locales", "incoming-locales", "offered-capabilities",
                     "desired-capabilities", "properties-key", "properties-value"),
            "begin": ("offered-capabilities", "desired-capabilities", "properties-key", "properties-value"),
            "receiver": ("name", "source-address", "source-capabilities", "filter-key", "filter-descriptor",
                         "selector", "distribution-mode", "outcomes", "target-address", "offered-capabilities",
                         "desired-capabilities", "properties-key", "properties-value"),
            "sender": ("name", "source-address", "target-address", "target-capabilities", "properties-key",
                       "properties-value"),
            "flow": ("properties-key", "properties-value"),
            "message": ("message-id", "to", "subject", "reply-to", "content-type", "content-encoding", "group-id",
                        "reply-to-group-id", "application-key", "application-value", "annotation-key",
                        "annotation-value", "delivery-annotation-key", "body", "footer-key"),
            "detach": ("error-condition", "error-description"),
            "end": ("error-condition", "error-description"),
            "close": ("error-condition", "error-description"),
        }.items()
        for name in names
    },
}  # fmt: skip


class _Slots:
    """Field values for one session: the valid default everywhere except the one slot under test."""

    def __init__(self, field: str | None, raw: bytes) -> None:
        self.field, self.raw = field, raw

    def str(self, name: str, default: str) -> Str:
        return Str(self.raw if name == self.field else default.encode())

    def sym(self, name: str, default: str) -> Sym:
        return Sym(self.raw if name == self.field else default.encode())

    def syms(self, name: str, *defaults: str) -> SymArray:
        items = tuple(d.encode() for d in defaults)
        return SymArray(items + (self.raw,) if name == self.field else items)

    def props(self, prefix: str) -> Map:
        return Map(((self.sym(f"{prefix}.properties-key", "fuzz"), self.str(f"{prefix}.properties-value", "v")),))

    def error(self, prefix: str) -> Value:
        if self.field not in (f"{prefix}.error-condition", f"{prefix}.error-description"):
            return None
        condition = self.sym(f"{prefix}.error-condition", "amqp:internal-error")
        return Described(ULong(0x1D), [condition, self.str(f"{prefix}.error-description", "fuzz")])


def _sasl(s: _Slots, plain: bool) -> bytes:
    if plain:
        user = s.raw if s.field == "sasl-init.plain-user" else USER
        password = s.raw if s.field == "sasl-init.plain-password" else PASSWORD
        mechanism, response = s.sym("sasl-init.mechanism@plain", "PLAIN"), b"\x00" + user + b"\x00" + password
    else:
        mechanism, response = s.sym("sasl-init.mechanism", "ANONYMOUS"), b""
    init = performative(0x41, [mechanism, response, s.str("sasl-init.hostname", "localhost")])
    return SASL_HEADER + frame(init, frame_type=SASL_FRAME)


def _open_begin(s: _Slots, container: str) -> bytes:
    open_ = [s.str("open.container-id", container), s.str("open.hostname", "localhost"), UInt(65536),
             UShort(255), None, s.syms("open.outgoing-locales", "en-US"), s.syms("open.incoming-locales", "en-US"),
             s.syms("open.offered-capabilities", "fuzz"), s.syms("open.desired-capabilities", "ANONYMOUS-RELAY"),
             s.props("open")]  # fmt: skip
    begin = [None, UInt(0), UInt(2048), UInt(2048), UInt(65535), s.syms("begin.offered-capabilities", "fuzz"),
             s.syms("begin.desired-capabilities", "fuzz"), s.props("begin")]  # fmt: skip
    return frame(performative(0x10, open_)) + frame(performative(0x11, begin))


def _receiver(s: _Slots) -> bytes:
    selector = Described(ULong(SELECTOR_CODE), s.str("receiver.selector", "color = 'red' AND n > 1"))
    if s.field == "receiver.filter-descriptor":
        selector = Described(Sym(s.raw), selector.value)
    source = Described(ULong(0x28), [
        s.str("receiver.source-address", QUEUE), UInt(0), Sym(b"link-detach"), UInt(0), False, None,
        s.sym("receiver.distribution-mode", "move"), Map(((s.sym("receiver.filter-key", "jms-selector"), selector),)),
        None, s.syms("receiver.outcomes", "amqp:accepted:list"), s.syms("receiver.source-capabilities", "queue"),
    ])  # fmt: skip
    target = Described(ULong(0x29), [s.str("receiver.target-address", "reply")])
    attach = [s.str("receiver.name", "fuzz-receiver"), UInt(0), True, UByte(0), UByte(0), source, target, None,
              False, None, None, s.syms("receiver.offered-capabilities", "fuzz"),
              s.syms("receiver.desired-capabilities", "fuzz"), s.props("receiver")]  # fmt: skip
    flow = [UInt(0), UInt(2048), UInt(0), UInt(2048), UInt(0), UInt(0), UInt(10), UInt(0), False, False,
            s.props("flow")]  # fmt: skip
    return frame(performative(0x12, attach), channel=0) + frame(performative(0x13, flow))


def _senders(s: _Slots) -> bytes:
    out = b""
    for handle, address in ((1, s.str("sender.target-address", QUEUE)), (2, None)):
        source = Described(ULong(0x28), [s.str("sender.source-address", "fuzz-source")])
        target = Described(ULong(0x29), [address, UInt(0), None, UInt(0), False, None,
                                         s.syms("sender.target-capabilities", "queue")])  # fmt: skip
        attach = [s.str("sender.name", f"fuzz-sender-{handle}"), UInt(handle), False, UByte(0), UByte(0), source,
                  target, None, False, UInt(0), None, None, None, s.props("sender")]  # fmt: skip
        out += frame(performative(0x12, attach))
    return out


def message(s: _Slots) -> bytes:
    """A message with every text section: header, annotations, properties, application properties, footer."""
    m = "message."
    return b"".join(encode(Described(ULong(code), value)) for code, value in (
        (0x70, [False]),
        (0x71, Map(((s.sym(m + "delivery-annotation-key", "x-opt-trace"), "t"),))),
        (0x72, Map(((Sym(b"x-opt-jms-dest"), Raw(b"\x51\x00")),
                    (s.sym(m + "annotation-key", "x-opt-fuzz"), s.str(m + "annotation-value", "a"))))),
        (0x73, [s.str(m + "message-id", "ID:fuzz:1"), None, s.str(m + "to", QUEUE), s.str(m + "subject", "subj"),
                s.str(m + "reply-to", "replies"), None, s.sym(m + "content-type", "text/plain"),
                s.sym(m + "content-encoding", "utf-8"), None, None, s.str(m + "group-id", "g"), None,
                s.str(m + "reply-to-group-id", "rg")]),
        (0x74, Map(((s.str(m + "application-key", "color"), s.str(m + "application-value", "red")),
                    (Str(b"n"), Raw(b"\x71\x00\x00\x00\x05"))))),
        (0x77, s.str(m + "body", "hello")),
        (0x78, Map(((s.sym(m + "footer-key", "x-opt-footer"), "f"),))),
    ))  # fmt: skip


def _transfers(s: _Slots) -> bytes:
    body = message(s)
    out = b""
    for delivery, handle in ((0, 1), (1, 2)):
        transfer = performative(0x14, [UInt(handle), UInt(delivery), bytes([delivery]), UInt(0), False, False])
        out += frame(transfer + body)
    return out


def _closing(s: _Slots) -> bytes:
    detaches = b"".join(frame(performative(0x16, [UInt(h), True, s.error("detach") if h == 0 else None]))
                        for h in (0, 1, 2))  # fmt: skip
    return detaches + frame(performative(0x17, [s.error("end")])) + frame(performative(0x18, [s.error("close")]))


# The server's answer to the first step when all goes well: SASL header, mechanisms, outcome, AMQP header, open,
# begin, three attaches and the two senders' credit. Transfers wait for it: proton counts a transfer that
# arrives before its session is begun on the server side as a window violation.
ANSWER_UNITS = 11


def session(field: str | None, raw: bytes, *, container: str = "fuzz-targeted") -> tuple[bytes, bytes]:
    """The session with ``raw`` in slot ``field`` (None: every field valid), as two steps: everything up to the
    attaches and credit, then (once the server answered, see ``ANSWER_UNITS``) the transfers and the closing."""
    slots = _Slots(field, raw)
    plain = TEXT_FIELDS.get(field or "") == "plain"
    first = _sasl(slots, plain) + AMQP_HEADER + _open_begin(slots, container) + _receiver(slots) + _senders(slots)
    return first, _transfers(slots) + _closing(slots)


def cases() -> list[tuple[str, str, tuple[bytes, bytes]]]:
    """Every (slot, server, session) pair: each slot with each bad text, in a fixed order."""
    out = []
    for number, (field, server) in enumerate(TEXT_FIELDS.items()):
        for variant, raw in enumerate(BAD_TEXT):
            out.append((field, server, session(field, raw, container=f"fuzz-t{number}-{variant}")))
    return out
