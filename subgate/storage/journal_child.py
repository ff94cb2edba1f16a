"""The journal writer process's main (``python -m subgate.storage.journal_child OPS_FD RESULTS_FD``).

Owns the child's side of ``storage.journal_process``: it reads its set-up, opens its own engine on the store,
runs a ``JournalWriter`` (the same writer thread as in the server) fed with the operations that arrive on the
ops pipe, and writes each batch's result with the writer's figures to the results pipe. It ignores SIGINT and
SIGTERM (the server stops it with a stop frame, after which it commits everything it holds) and asks the kernel
to kill it when the server dies. A pipe that closes without a stop frame, or that the server no longer reads, means
the server is gone (the kernel closes a killed process's pipes a moment before it signals its children): the child
then ends at once and quietly (``server_gone``), committing nothing more. Nothing it holds was confirmed, and a
commit now could land behind the back of the next server, which may already be reading the store.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import sys
import threading
from typing import IO, NoReturn

from subgate.metrics.startup import process_age
from subgate.storage.applying import ReadAnswer
from subgate.storage.db import make_engine
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.journal_process import READY, ChildSetup, WriterFigures, read_frame, write_frame

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


def serve(ops: IO[bytes], results: IO[bytes]) -> int:
    """Run the writer until the server stops it; the exit code (1: the store could not be opened)."""
    try:
        setup: ChildSetup = read_frame(ops)
    except EOFError:  # the server gave up before it started us
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
    write_frame(results, (READY, process_age()))
    sending = threading.Lock()  # the writer thread sends results; the main thread the last figures
    writer: JournalWriter

    def figures() -> WriterFigures:
        return WriterFigures(
            writer.batches, writer.rows, writer.health, writer.commit_seconds.view(), writer.batch_sizes.view()
        )

    def notify(result: BatchResult) -> None:
        with sending:
            try:
                write_frame(results, (portable(result), figures()))
            except OSError:  # (BrokenPipeError) the server is gone
                server_gone()

    writer = JournalWriter(engine, notify, max_batch=setup.max_batch)
    writer.start()
    try:
        while True:
            try:
                hurry, batch = read_frame(ops)
            except EOFError:  # no stop frame: the server is gone
                server_gone()
            if batch is None:
                break
            writer.enqueue(batch, hurry)
    finally:
        writer.close(timeout=600)
        with sending:
            try:
                write_frame(results, (None, figures()))
            except OSError:
                server_gone()
        engine.dispose()
    return 0


def server_gone() -> NoReturn:
    """End now, without a word, a commit or a flush: the server that started this process is gone."""
    os._exit(0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ops_fd, results_fd = int(argv[1]), int(argv[2])
    ops = open(ops_fd, "rb", buffering=1 << 20)  # noqa: SIM115 - the process ends with them
    results = open(results_fd, "wb", buffering=1 << 20)  # noqa: SIM115
    try:
        code = serve(ops, results)
        results.close()
    except OSError:  # (BrokenPipeError) the server is gone
        server_gone()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
