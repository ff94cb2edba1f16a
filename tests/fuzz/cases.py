"""The fuzz cases: a pure, deterministic generator (seed and index in, bytes out; no sockets, no clock).

A ``Case`` is a list of ``Step``s: bytes to send once the server has answered with ``after`` protocol units
(headers or frames) since the connection opened (the runner waits a bounded time, then sends anyway). Steps keep
a mutated capture paced as the real client was, so its frames reach the state they were written for.

Case ``i`` depends only on (seed, i) and the captures: indices ``0..len(captures)-1`` replay each capture
unchanged (controls: they must be served normally), then every third case is the next targeted session
(``tests.fuzz.targeted``: invalid UTF-8 in one text field) until those run out, and every other case draws a
mutation family with ``random.Random(f"{seed}:{i}")``. ``half_close`` says whether the runner shuts its side
after the last step; targeted cases and replays end with the client's own close frame instead.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

from tests.fuzz import targeted
from tests.fuzz.wire import AMQP_HEADER, FRAME_HEADER, SASL_HEADER

INTERESTING_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0xC0, 0xED, 0x01, 0xFE)
INTERESTING_INTS = (0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x101, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x10001,
                    0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF)  # fmt: skip
TARGETED_EVERY = 3


@dataclass(frozen=True)
class Step:
    after: int  # server units (headers, frames) to wait for before sending
    data: bytes


@dataclass(frozen=True)
class Capture:
    """One recorded client session: its units (headers and frames) in order, each with its pacing."""

    name: str
    server: str  # "anonymous" or "plain"
    units: tuple[Step, ...]
    container_id: bytes  # replaced per case, so that replays never collide on sole-connection-for-container


@dataclass(frozen=True)
class Case:
    index: int
    family: str
    server: str
    steps: tuple[Step, ...]
    half_close: bool

    @property
    def data(self) -> bytes:
        return b"".join(step.data for step in self.steps)


Units = list[Step]
Mutator = Callable[[random.Random, Units, list[Capture]], Units]


def _flat(units: Units) -> bytes:
    return b"".join(u.data for u in units)


def _rebuild(units: Units, data: bytes) -> Units:
    """``data`` (same length as the units' bytes) cut back into the units' boundaries and pacing."""
    out, pos = [], 0
    for unit in units:
        out.append(Step(unit.after, data[pos : pos + len(unit.data)]))
        pos += len(unit.data)
    return out


def _bitflip(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    data = bytearray(_flat(units))
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return _rebuild(units, bytes(data))


def _interesting(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    data = bytearray(_flat(units))
    for _ in range(rng.randint(1, 4)):
        width = rng.choice((1, 1, 2, 4))
        pos = rng.randrange(max(1, len(data) - width))
        if width == 1:
            data[pos] = rng.choice(INTERESTING_BYTES)
        else:
            value = rng.choice(INTERESTING_INTS) & ((1 << (8 * width)) - 1)
            data[pos : pos + width] = value.to_bytes(width, "big")
    return _rebuild(units, bytes(data[: len(_flat(units))]))


def _truncate(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    cut = rng.randrange(1, len(_flat(units)))
    out, pos = [], 0
    for unit in units:
        if pos + len(unit.data) > cut:
            out.append(Step(unit.after, unit.data[: cut - pos]))
            break
        out.append(unit)
        pos += len(unit.data)
    return out


def _frames(units: Units) -> list[int]:
    return [i for i, u in enumerate(units) if not u.data.startswith(b"AMQP") and len(u.data) >= FRAME_HEADER.size]


def _size_lie(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    out = list(units)
    if not _frames(out):
        return out
    index = rng.choice(_frames(out))
    data = bytearray(out[index].data)
    field = rng.choice(("size", "size", "doff", "type", "channel"))
    if field == "size":
        size = len(data)
        lie = rng.choice((0, 1, 7, 8, size - 1, size + 1, size + rng.randint(2, 64), *INTERESTING_INTS))
        struct.pack_into(">I", data, 0, lie & 0xFFFFFFFF)
    elif field == "doff":
        data[4] = rng.choice((0, 1, 3, 0x7F, 0xFF))
    elif field == "type":
        data[5] = rng.choice((0x01, 0x02, 0x7F, 0xFF)) if data[5] == 0 else rng.choice((0x00, 0x02, 0xFF))
    else:
        struct.pack_into(">H", data, 6, rng.choice((1, 0x7FFF, 0xFFFF)))
    out[index] = Step(out[index].after, bytes(data))
    return out


def _duplicate(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    out = list(units)
    source = rng.randrange(len(out))
    out.insert(rng.randrange(source, len(out)) + 1, out[source])
    return out


def _drop(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    out = list(units)
    for _ in range(min(rng.randint(1, 3), len(out) - 1)):
        del out[rng.randrange(len(out))]
    return out


def _reorder(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    out = list(units)
    a, b = rng.randrange(len(out)), rng.randrange(len(out))
    out[a], out[b] = Step(out[a].after, out[b].data), Step(out[b].after, out[a].data)
    return out


def _splice(rng: random.Random, units: Units, others: list[Capture]) -> Units:
    donor = list(rng.choice(others).units)
    start = rng.randrange(len(donor))
    piece = donor[start : start + rng.randint(1, 4)]
    at = rng.randrange(len(units) + 1)
    return list(units[:at]) + [Step(units[at - 1].after if at else 0, s.data) for s in piece] + list(units[at:])


def _random_tail(rng: random.Random, units: Units, _o: list[Capture]) -> Units:
    keep = rng.randrange(1, len(units))
    return list(units[:keep]) + [Step(units[keep - 1].after, rng.randbytes(rng.randint(1, 512)))]


MUTATORS: dict[str, tuple[int, Mutator]] = {
    "bitflip": (14, _bitflip),
    "interesting": (14, _interesting),
    "truncate": (6, _truncate),
    "size-lie": (10, _size_lie),
    "duplicate": (6, _duplicate),
    "drop": (6, _drop),
    "reorder": (6, _reorder),
    "splice": (6, _splice),
    "random-tail": (8, _random_tail),
}
RANDOM_FAMILIES = {"random": (4, b""), "random-after-sasl": (8, SASL_HEADER), "random-after-amqp": (8, AMQP_HEADER)}
STACKED_WEIGHT = 4


def _personalise(capture: Capture, index: int) -> Units:
    """The capture's units with its container-id replaced by one of the same length unique to this case."""
    old = capture.container_id
    tag = f"-{index:x}".encode()
    new = (old[: max(0, len(old) - len(tag))] + tag)[-len(old) :] if old else old
    return [Step(u.after, u.data.replace(old, new) if old else u.data) for u in capture.units]


def _families() -> tuple[list[str], list[int]]:
    names = [*MUTATORS, *RANDOM_FAMILIES, "stacked"]
    weights = [w for w, _ in MUTATORS.values()] + [w for w, _ in RANDOM_FAMILIES.values()] + [STACKED_WEIGHT]
    return names, weights


def _mutated(rng: random.Random, index: int, captures: list[Capture]) -> Case:
    names, weights = _families()
    family = rng.choices(names, weights)[0]
    if family in RANDOM_FAMILIES:
        prefix = RANDOM_FAMILIES[family][1]
        server = rng.choice(("anonymous", "anonymous", "anonymous", "plain"))
        steps = (Step(0, prefix + rng.randbytes(rng.randint(1, 1024))),)
        return Case(index, family, server, steps, half_close=True)
    capture = rng.choice(captures)
    units = _personalise(capture, index)
    chosen = rng.sample(list(MUTATORS), rng.randint(2, 3)) if family == "stacked" else [family]
    for name in chosen:
        if len(units) > 1 and len(_flat(units)) > 1:  # an earlier mutation can leave too little to mutate
            units = MUTATORS[name][1](rng, units, captures)
    label = f"stacked:{'+'.join(chosen)}" if family == "stacked" else family
    return Case(index, f"{label}@{capture.name}", capture.server, tuple(units), half_close=True)


Sessions = list[tuple[str, str, tuple[bytes, bytes]]]


def generate(seed: int, index: int, captures: list[Capture], sessions: Sessions) -> Case:
    """Case ``index`` of the run with ``seed`` (see the module docstring); ``sessions`` is ``targeted.cases()``."""
    if index < len(captures):
        capture = captures[index]
        return Case(index, f"replay@{capture.name}", capture.server, tuple(_personalise(capture, index)), False)
    rest = index - len(captures)
    if rest % TARGETED_EVERY == 0 and rest // TARGETED_EVERY < len(sessions):
        field, server, (first, second) = sessions[rest // TARGETED_EVERY]
        steps = (Step(0, first), Step(targeted.ANSWER_UNITS, second))
        return Case(index, f"utf8:{field}", server, steps, half_close=False)
    return _mutated(random.Random(f"{seed}:{index}"), index, captures)


def minimum_cases(captures: list[Capture], sessions: Sessions) -> int:
    """How many cases a run needs so that every replay and every targeted session is in it."""
    return len(captures) + TARGETED_EVERY * len(sessions)
