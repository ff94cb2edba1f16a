"""What the command line shows while Spark works, in place of Spark's console progress bar (kept off).

Owns one thread that polls the SparkContext's status tracker (a read of the driver's own bookkeeping, no I/O)
and reports each stage: on a terminal, a rich progress bar per running stage; elsewhere one line per stage as it
finishes (``stage 3: 2/2 tasks``). Everything goes to stderr: stdout carries the ``--json`` output.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_POLL_SECONDS = 0.2


class _StageWatch:
    """Polls the status tracker; reports stages through ``show`` (stage id, completed, total, finished)."""

    def __init__(self, spark: SparkSession, show: Any) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._show = show
        self._running: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="subgate-pipeline-progress", daemon=True)

    def __enter__(self) -> _StageWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._poll()
        for stage in list(self._running):
            self._finish(stage)

    def _run(self) -> None:
        while not self._stop.wait(_POLL_SECONDS):
            try:
                self._poll()
            except Exception:  # the context may be stopping: progress is best effort
                return

    def _poll(self) -> None:
        active = set(self._tracker.getActiveStageIds())
        for stage in active:
            info = self._tracker.getStageInfo(stage)
            if info is not None:
                self._running[stage] = (info.numCompletedTasks, info.numTasks)
                self._show(stage, info.numCompletedTasks, info.numTasks, False)
        for stage in [s for s in self._running if s not in active]:
            self._finish(stage)

    def _finish(self, stage: int) -> None:
        _done, total = self._running.pop(stage)
        self._show(stage, total, total, True)


def _lines(stage: int, done: int, total: int, finished: bool) -> None:
    if finished:
        print(f"stage {stage}: {done}/{total} tasks", file=sys.stderr, flush=True)


@contextmanager
def stage_progress(spark: SparkSession, *, quiet: bool = False) -> Iterator[None]:
    """Report Spark's stages on stderr while the block runs (nothing with ``quiet``)."""
    if quiet:
        yield
        return
    if not sys.stderr.isatty():
        with _StageWatch(spark, _lines):
            yield
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), transient=False) as bar:
        tasks: dict[int, Any] = {}

        def show(stage: int, done: int, total: int, _finished: bool) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(f"stage {stage}", total=total)
            bar.update(tasks[stage], completed=done, total=total)

        with _StageWatch(spark, show):
            yield
