"""The journal writer process's main (``python -m subgate.storage.journal_child OPS_FD RESULTS_FD``).

Owns the child's side of ``storage.journal_process``: it reads its set-up, opens its own engine on the store,
runs the same ``JournalWriter`` as the server's writer thread, on its only thread, with the ops pipe as its queue
(``PipeSource``: no hand-off between two threads), and writes each batch's result with the writer's figures to the
results pipe. It ignores SIGINT and
SIGTERM (the server stops it with a stop frame, after which it commits everything it holds) and asks the kernel
to kill it when the server dies; an ops pipe that closes without a stop frame (the server is gone) ends it too,
after the writer has committed what it holds.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import queue
import select
import signal
import sys
from collections import deque
from collections.abc import Callable
from typing import IO, Any

from subgate.storage.applying import ReadAnswer
from subgate.storage.db import make_engine
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.journal_process import FRAME, READY, ChildSetup, WriterFigures, write_frame
from subgate.storage.operations import Operation

log = logging.getLogger("subgate.journal")

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the server's thread that started it ends (Linux); gone already: exit."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):  # not Linux: the closed ops pipe still ends the child
        pass
    if os.getppid() != parent_pid:
        sys.exit(0)


def _configure_logging(setup: ChildSetup) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(setup.log_formatter or logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(setup.log_level)


def portable(result: BatchResult) -> BatchResult:
    """``result`` with errors that pickle (a driver's exception may not: then a RuntimeError with its text); the
    result itself when it holds no error."""
    if result.error is None and not any(_failed_read(t) for t in result.tokens):
        return result
    tokens = [ReadAnswer(t.token, _plain(t.result)) if _failed_read(t) else t for t in result.tokens]
    error = _plain(result.error) if result.error is not None else None
    return BatchResult(tokens, error, result.size, result.failed)


def _failed_read(ticket: object) -> bool:
    return isinstance(ticket, ReadAnswer) and isinstance(ticket.result, BaseException)


def _plain(error: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(str(error).strip() or type(error).__name__)
    return error


class PipeSource:
    """The ops pipe as the writer's queue (``storage.journal.OperationSource``): frames read straight from the
    descriptor, so the writer runs on the child's only thread, without a hand-off to a second one. The first frame
    is the set-up (``setup``); each later one an operation batch, the last a stop (None). A pipe that closes
    without a stop (the server is gone) stops the writer too, after it has committed what it holds."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._bytes = bytearray()
        self._frames: deque[Any] = deque()
        self._ready: deque[Operation | None] = deque()
        self._ended = False
        self.on_hurry: Callable[[], None] = lambda: None

    def setup(self) -> ChildSetup | None:
        """The first frame; None when the pipe closed before it."""
        while not self._frames and not self._ended:
            self._read(block=True)
        return self._frames.popleft() if self._frames else None

    def put(self, item: Operation | None) -> None:
        self._ready.append(item)

    def get(self) -> Operation | None:
        while not self._ready:
            if self._ended:
                return None
            self._read(block=True)
        return self._ready.popleft()

    def get_nowait(self) -> Operation | None:
        if not self._ready:
            self._read(block=False)
        if not self._ready:
            raise queue.Empty
        return self._ready.popleft()

    def qsize(self) -> int:
        self._read(block=False)
        return len(self._ready)

    def _read(self, *, block: bool) -> None:
        if self._ended:
            return
        if not block and not select.select([self._fd], [], [], 0)[0]:
            return
        data = os.read(self._fd, 1 << 20)
        if not data:
            self._ended = True
            self._ready.append(None)
            return
        self._bytes += data
        self._split()

    def _split(self) -> None:
        buf, at = self._bytes, 0
        while len(buf) - at >= FRAME.size:
            (size,) = FRAME.unpack_from(buf, at)
            end = at + FRAME.size + size
            if len(buf) < end:
                break
            frame = pickle.loads(buf[at + FRAME.size : end])
            at = end
            if isinstance(frame, tuple):
                hurry, batch = frame
                if batch is None:
                    self._ready.append(None)
                    continue
                if hurry:
                    self.on_hurry()
                self._ready.extend(batch)
            else:
                self._frames.append(frame)
        del buf[:at]


def serve(ops: PipeSource, results: IO[bytes]) -> int:
    """Run the writer until the server stops it; the exit code (1: the store could not be opened)."""
    setup = ops.setup()
    if setup is None:  # the server gave up before it started us
        return 0
    die_with_parent(setup.parent_pid)
    _configure_logging(setup)
    engine = make_engine(setup.store_url)
    try:
        with engine.connect():  # the store answers: the server may listen
            pass
    except Exception as exc:
        log.critical("the journal writer cannot open the store: %s", str(exc).strip().splitlines()[0])
        return 1
    write_frame(results, READY)
    writer: JournalWriter

    def figures() -> WriterFigures:
        return WriterFigures(
            writer.batches, writer.rows, writer.health, writer.commit_seconds.view(), writer.batch_sizes.view()
        )

    def notify(result: BatchResult) -> None:
        write_frame(results, (portable(result), figures()))

    writer = JournalWriter(engine, notify, max_batch=setup.max_batch)
    ops.on_hurry = writer.hurry
    try:
        writer.run_on(ops)
    finally:
        write_frame(results, (None, figures()))
        engine.dispose()
    return 0


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ops_fd, results_fd = int(argv[1]), int(argv[2])
    with open(results_fd, "wb", buffering=1 << 20) as results:
        try:
            return serve(PipeSource(ops_fd), results)
        except BrokenPipeError:  # the server is gone
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
