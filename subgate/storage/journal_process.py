"""The journal writer in a process of its own: the same ``JournalWriter``, off the reactor's GIL (docs/threading.md).

Owns the hand-over between the server and its writer process (``python -m subgate.storage.journal_child``):

- The reactor's ``submit_*`` verbs (``storage.submissions``) build the same operations as for the writer thread,
  and ``JournalProcess`` keeps them in a buffer. ``flush`` sends the buffer as one pickled frame down a pipe: the
  reactor calls it when it is about to wait for input (``gateway.io``), and it runs by itself when the buffer
  holds ``FLUSH_AT`` operations. One frame per burst, not one write per message.
- The child applies them in group commits exactly as the thread would, and sends each batch's result (tickets,
  never tokens) and the writer's figures back up a second pipe. The child's main thread only reads the ops pipe
  into the writer's queue, so the pipe never fills while a commit is slow (a store outage, a long read): the
  reactor's write to it never waits for the store. A thread of the server (``_receive``, waiting
  on that pipe without the GIL) hands each result to ``notify``; tokens are claimed on the reactor thread as
  with the writer thread (``TokenTable``).
- The child ignores SIGINT and SIGTERM (the server stops it: ``close`` sends a stop frame once everything is
  sent, and the child commits all it holds first) and dies with the server (``PR_SET_PDEATHSIG``): after a
  ``kill -9`` of the server no writer is left to commit behind the next one's back.
- A child that ends on its own (a crash) is reported through ``on_lost``: the server can no longer journal.

Why a process: with the writer a thread, each of its turns on the GIL cost the reactor more than its own Python
(the hand-offs at every call into proton-c; measured in docs/performance.md, "The journal writer process").
"""

from __future__ import annotations

import fcntl
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from subgate.metrics.buckets import BATCH_SIZES, COMMIT_SECONDS, Buckets, HistogramView
from subgate.storage.journal import BatchResult, CommitHealth
from subgate.storage.operations import Operation
from subgate.storage.submissions import Submissions

log = logging.getLogger("subgate.journal")

READY = "ready"  # the child's first frame, ("ready", seconds since it started): it has its engine on the store
READY_SECONDS = 60.0  # the longest the server waits for it (its start-up is logged: metrics.startup)
FLUSH_AT = 256  # operations buffered before a flush that does not wait for the reactor to run out of work
FRAME = struct.Struct("!I")  # each frame: its length, then a pickle
_PIPE_BYTES = 1 << 20  # pipe capacity asked for (F_SETPIPE_SZ): a burst fits without the reactor waiting
_F_SETPIPE_SZ = 1031


@dataclass(frozen=True)
class ChildSetup:
    """The child's first frame: the store, the batch limit, the server's pid and its log set-up."""

    store_url: str
    max_batch: int
    parent_pid: int
    log_level: int
    log_formatter: logging.Formatter | None


@dataclass(frozen=True, slots=True)
class WriterFigures:
    """The child writer's counters and histograms, sent with each result."""

    batches: int
    rows: int
    health: CommitHealth | None
    commit_seconds: HistogramView
    batch_sizes: HistogramView


class ReportedBuckets:
    """A histogram as the child last reported it (``view`` like ``metrics.buckets.Buckets``)."""

    __slots__ = ("latest",)

    def __init__(self, bounds: Any) -> None:
        self.latest: HistogramView = Buckets(bounds).view()

    def view(self) -> HistogramView:
        return self.latest


def write_frame(out: IO[bytes], payload: object) -> None:
    data = pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)
    out.write(FRAME.pack(len(data)))
    out.write(data)
    out.flush()


def read_frame(source: IO[bytes]) -> Any:
    """The next frame's object; EOFError when the other end is gone."""
    head = source.read(FRAME.size)
    if len(head) < FRAME.size:
        raise EOFError
    (size,) = FRAME.unpack(head)
    data = source.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def widen(fd: int) -> None:
    """Ask for a larger pipe buffer (best effort: the kernel caps it at /proc/sys/fs/pipe-max-size)."""
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:
        pass


class JournalProcess(Submissions):
    """``JournalWriter``'s interface with the writer in a child process. ``start()``; ``close()`` commits
    everything submitted, then ends the child."""

    def __init__(
        self,
        store_url: str,
        notify: Callable[[BatchResult], None],
        *,
        on_lost: Callable[[str], None] | None = None,
        max_batch: int = 4000,
    ) -> None:
        super().__init__()
        self._notify = notify
        self._on_lost = on_lost
        self._setup = ChildSetup(store_url, max_batch, os.getpid(), *_log_setup())
        self._buffer: list[Operation] = []
        self._put = self._buffer_op
        self._child: subprocess.Popen[bytes] | None = None
        self._ops: IO[bytes] | None = None
        self._results: IO[bytes] | None = None
        self._receiver = threading.Thread(target=self._receive, name="subgate-journal-results", daemon=True)
        self._started = False
        self.child_seconds: float | None = None  # the child's start to its hand-shake, as it reported it
        self._closing = False
        self._broken = False
        self.batches = 0
        self.rows = 0
        self.commit_seconds = ReportedBuckets(COMMIT_SECONDS)
        self.batch_sizes = ReportedBuckets(BATCH_SIZES)
        self.health: CommitHealth | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def launch(self) -> None:
        """Start the child (its imports and its engine take a few hundred ms: the server launches it early, while
        it recovers). Nothing is sent to it before ``start``."""
        ops_r, ops_w = os.pipe()
        results_r, results_w = os.pipe()
        for fd in (ops_w, results_w):
            widen(fd)
        # The child imports what this process imports, from where it imports it ("" is the working directory).
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.getcwd() for p in sys.path))
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "subgate.storage.journal_child", str(ops_r), str(results_w)],
                pass_fds=(ops_r, results_w),
                stdin=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        finally:
            os.close(ops_r)
            os.close(results_w)
        self._ops = open(ops_w, "wb", buffering=_PIPE_BYTES)  # noqa: SIM115 - closed by close()
        self._results = open(results_r, "rb", buffering=_PIPE_BYTES)  # noqa: SIM115 - closed by _receive
        write_frame(self._ops, self._setup)

    def start(self, timeout: float = READY_SECONDS) -> None:
        """Wait until the child has its engine on the store (so that the server never listens with a writer that
        cannot commit yet), then send what was submitted meanwhile and take results.

        Raises:
            RuntimeError: the child did not get ready within ``timeout`` (it is killed) or ended.
        """
        if self._child is None:
            self.launch()
        assert self._results is not None and self._child is not None
        ready, _, _ = select.select([self._results], [], [], timeout)
        try:
            answer = read_frame(self._results) if ready else None
        except EOFError:  # it ended (it logged why)
            answer = None
        if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == READY:
            self.child_seconds = answer[1]
        else:
            try:
                self._child.wait(1.0 if answer is None and ready else 0.0)  # ending on its own: its exit code
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            raise RuntimeError(f"the journal writer process did not start (exit code {self._child.returncode})")
        self._started = True
        self._receiver.start()
        log.info("journal writer: process %d", self._child.pid)
        self.flush()

    def _buffer_op(self, op: Operation) -> None:
        buffer = self._buffer
        buffer.append(op)
        if len(buffer) >= FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        """Send what is buffered to the child (the reactor calls it before it waits for input)."""
        buffer = self._buffer
        if not buffer or not self._started:
            return
        self._buffer = []
        hurry, self._hurry = self._hurry, False
        self._send((hurry, buffer))

    def _send(self, frame: object) -> None:
        if self._broken or self._ops is None:
            return
        try:
            write_frame(self._ops, frame)
        except (BrokenPipeError, ValueError, OSError) as exc:
            self._broken = True
            log.error("the journal writer process is gone: %s", exc)

    def close(self, timeout: float = 30.0) -> None:
        """Commit everything submitted, then end the child (and the thread that waits for its results)."""
        self._closing = True
        if self._started:
            self.flush()
            self._send((False, None))
        if self._ops is not None:
            try:
                self._ops.close()
            except OSError:
                pass
        if self._child is not None:
            try:
                self._child.wait(timeout)
            except subprocess.TimeoutExpired:
                log.error("the journal writer process did not stop within %.0f s; killing it", timeout)
                self._child.kill()
                self._child.wait()
        if self._receiver.is_alive():
            self._receiver.join(timeout)
        elif self._results is not None:
            self._results.close()

    def _receive(self) -> None:
        """Thread: the child's results, handed to ``notify``; ``on_lost`` when the child ends unasked."""
        assert self._results is not None
        with self._results as results:
            while True:
                try:
                    result, figures = read_frame(results)
                except (EOFError, OSError, pickle.UnpicklingError):
                    break
                self._take(figures)
                if result is not None:
                    self._notify(result)
        if not self._closing:
            code = self._child.wait() if self._child is not None else None
            reason = f"the journal writer process ended unexpectedly (exit code {code})"
            log.critical(reason)
            self._broken = True
            if self._on_lost is not None:
                self._on_lost(reason)

    def _take(self, figures: WriterFigures) -> None:
        self.batches, self.rows, self.health = figures.batches, figures.rows, figures.health
        self.commit_seconds.latest = figures.commit_seconds
        self.batch_sizes.latest = figures.batch_sizes


def _log_setup() -> tuple[int, logging.Formatter | None]:
    """The server's root log level and its handler's formatter, when that pickles (the child logs alike)."""
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    try:
        pickle.dumps(formatter)
    except Exception:
        formatter = None
    return root.level, formatter
