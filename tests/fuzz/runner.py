"""Sending fuzz cases to running servers, many at a time, and reading how each connection ended.

``run_cases`` keeps up to ``concurrency`` non-blocking loopback connections going with one ``selectors`` loop.
Each connection sends its case's steps (a step waits until the server has answered with ``Step.after`` units, or
``step_wait`` seconds), shuts its write side when ``Case.half_close``, then reads until the server closes. A
connection still open ``case_deadline`` seconds after its last step moves aside (it no longer counts against the
concurrency) and is only called hung if it is still open ``linger`` seconds later, so a slow, shared machine
does not turn into failures. Every wait is bounded; the loop calls ``tick`` between rounds.

``main`` sends one case file to a server: ``python -m tests.fuzz.runner CASE.bin HOST:PORT``.
"""

from __future__ import annotations

import errno
import selectors
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from tests.fuzz.cases import Case, Step
from tests.fuzz.wire import split_units
from tests.support.rawamqp import parse_frames

CLOSE, OPEN, SASL_OUTCOME = 0x18, 0x10, 0x44


@dataclass(frozen=True)
class Outcome:
    """How the server answered one case: ``answer`` is close-frame, sasl-outcome, dropped, reset, refused or
    hung; ``detail`` the close condition or the SASL code; ``opened`` whether the server sent its open."""

    index: int
    family: str
    answer: str
    detail: str
    opened: bool


def describe(received: bytes) -> tuple[str, bool]:
    """(the server's last word: close condition or SASL outcome code, "" if none; whether it sent an open)."""
    last, opened = "", False
    for unit in split_units(received):
        if unit.startswith(b"AMQP"):
            continue
        try:
            frames, _ = parse_frames(unit)
        except Exception:  # the server's own bytes: a failure here is reported, not raised
            return "undecodable answer", opened
        for frame in frames:
            opened = opened or frame.descriptor == OPEN
            if frame.descriptor == CLOSE:
                error = frame.error()
                last = f"close:{error[0] if error else 'none'}"
            elif frame.descriptor == SASL_OUTCOME:
                last = f"sasl-outcome:{int(frame.fields[0])}"
    return last, opened


@dataclass
class _Conn:
    case: Case
    sock: socket.socket
    step: int = 0
    out: bytes = b""
    received: bytes = b""
    units: int = 0
    connected: bool = False
    done_sending: bool = False
    deadline: float = 0.0
    lingering: bool = False

    def units_seen(self) -> int:
        self.units = len(split_units(self.received))
        return self.units


@dataclass
class Settings:
    concurrency: int = 48
    step_wait: float = 1.0
    case_deadline: float = 2.0
    linger: float = 30.0


@dataclass
class _Loop:
    ports: dict[str, int]
    settings: Settings
    outcomes: list[Outcome] = field(default_factory=list)
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    active: dict[int, _Conn] = field(default_factory=dict)
    lingering: dict[int, _Conn] = field(default_factory=dict)

    def start(self, case: Case) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        conn = _Conn(case, sock, deadline=time.monotonic() + self.settings.step_wait)
        code = sock.connect_ex(("127.0.0.1", self.ports[case.server]))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.outcomes.append(Outcome(case.index, case.family, "refused", errno.errorcode.get(code, ""), False))
            return
        self.active[case.index] = conn
        self.selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def finish(self, conn: _Conn, answer: str) -> None:
        self.selector.unregister(conn.sock)
        conn.sock.close()
        self.active.pop(conn.case.index, None)
        self.lingering.pop(conn.case.index, None)
        last, opened = describe(conn.received)
        if answer == "eof":
            answer = last.split(":", 1)[0] + ("-frame" if last.startswith("close") else "") if last else "dropped"
        detail = last.split(":", 1)[1] if ":" in last else last
        self.outcomes.append(Outcome(conn.case.index, conn.case.family, answer, detail, opened))

    def _next_step(self, conn: _Conn, now: float) -> None:
        """Queue the next step once the server answered enough (or the step's wait ran out)."""
        steps: tuple[Step, ...] = conn.case.steps
        while not conn.out and conn.step < len(steps):
            step = steps[conn.step]
            if step.after and conn.units_seen() < step.after and now < conn.deadline:
                return
            conn.out, conn.step = step.data, conn.step + 1
            conn.deadline = now + self.settings.step_wait
        if not conn.out and conn.step == len(steps) and not conn.done_sending:
            conn.done_sending = True
            conn.deadline = now + self.settings.case_deadline
            if conn.case.half_close:
                self._shutdown(conn)

    @staticmethod
    def _shutdown(conn: _Conn) -> None:
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def service(self, conn: _Conn, mask: int, now: float) -> None:
        if not conn.connected and mask & selectors.EVENT_WRITE:
            error = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                return self.finish(conn, "refused")
            conn.connected = True
        if mask & selectors.EVENT_READ and not self._read(conn):
            return
        if conn.connected and not conn.done_sending:
            self._next_step(conn, now)
            self._write(conn)
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0)
        self.selector.modify(conn.sock, events, conn)

    def _read(self, conn: _Conn) -> bool:
        try:
            chunk = conn.sock.recv(65536)
        except BlockingIOError:
            return True
        except OSError:
            self.finish(conn, "reset")
            return False
        if not chunk:
            self.finish(conn, "eof")
            return False
        conn.received += chunk
        return True

    def _write(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out) if conn.out else 0
        except BlockingIOError:
            return
        except OSError:  # the server closed first: stop sending, read what it said
            conn.out, conn.step, conn.done_sending = b"", len(conn.case.steps), True
            conn.deadline = time.monotonic() + self.settings.case_deadline
            return
        conn.out = conn.out[sent:]

    def expire(self, now: float) -> None:
        for conn in list(self.active.values()):
            if now < conn.deadline:
                continue
            if not conn.done_sending:
                self._next_step(conn, now)
                self.selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            elif not conn.lingering:
                conn.lingering, conn.deadline = True, now + self.settings.linger
                self.lingering[conn.case.index] = self.active.pop(conn.case.index)
        for conn in list(self.lingering.values()):
            if now >= conn.deadline:
                self.finish(conn, "hung")


def run_cases(
    cases: Iterable[Case], ports: dict[str, int], settings: Settings, tick: Callable[[set[int]], None]
) -> list[Outcome]:
    """Run every case (see the module docstring); ``tick`` gets the indices of the cases in flight."""
    loop = _Loop(ports, settings)
    pending: Iterator[Case] = iter(cases)
    exhausted = False
    while not exhausted or loop.active or loop.lingering:
        while not exhausted and len(loop.active) < settings.concurrency:
            case = next(pending, None)
            if case is None:
                exhausted = True
                break
            loop.start(case)
        now = time.monotonic()
        for key, mask in loop.selector.select(timeout=0.05):
            conn = key.data
            if conn.case.index in loop.active or conn.case.index in loop.lingering:
                loop.service(conn, mask, now)
        loop.expire(time.monotonic())
        tick(set(loop.active) | set(loop.lingering))
    loop.selector.close()
    return sorted(loop.outcomes, key=lambda outcome: outcome.index)


def main(argv: list[str]) -> int:
    """Send one case file (raw bytes, one step, no half-close) and print how the server answered."""
    path, address = argv
    host, _, port = address.rpartition(":")
    assert host == "127.0.0.1", "loopback only"
    with open(path, "rb") as handle:
        case = Case(0, "file", "server", (Step(0, handle.read()),), half_close=False)
    (outcome,) = run_cases([case], {"server": int(port)}, Settings(concurrency=1), lambda _active: None)
    print(outcome)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
