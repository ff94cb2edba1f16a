"""A rich progress bar on stderr for the operator's long operations (``subgate queues purge``, ``db upgrade``).

Owns ``stepped``, ``revisions`` and ``pages``. ``stepped`` runs ``step()`` until a step comes back short (the
work is done) or the work counted at the start is all done (new work arriving meanwhile does not keep it going),
and shows how far it got. ``revisions`` shows ``subgate db upgrade`` going through the migrations, one step per
revision. ``pages`` shows ``subgate db backup`` and ``db restore`` copying the store's pages.
stdout is left to the command's own result line, so scripts can read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


def stepped(label: str, total: int, size: int, step: Callable[[], tuple[int, int]]) -> tuple[int, int]:
    """Run ``step`` (returns: items done by it, items left) until done; returns (items done, items left)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    done, left = 0, total
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task(label, total=max(total, 1))
        while True:
            went, left = step()
            done += went
            progress.update(task, completed=min(done, max(total, 1)) if total else 1)
            if went < size or done >= total:
                return done, left


@contextmanager
def revisions(total: int) -> Iterator[Callable[[str], None]]:
    """A bar of ``total`` migrations; the callable it gives is told each revision once applied."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task("migrating the store", total=max(total, 1))
        if not total:
            progress.update(task, completed=1, description="the store is up to date")

        def applied(revision: str) -> None:
            progress.update(task, advance=1, description=f"migrated to {revision}")

        yield applied


@contextmanager
def pages(label: str) -> Iterator[Callable[[int, int], None]]:
    """A bar of pages copied, shown from the first step on (a refusal before any copying shows none); the callable
    it gives is told (pages copied, pages in all) after each step."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=Console(stderr=True))
    task: list[TaskID] = []

    def copied(done: int, total: int) -> None:
        if not task:
            progress.start()
            task.append(progress.add_task(label, total=max(total, 1)))
        progress.update(task[0], completed=done, total=max(total, 1))

    try:
        yield copied
    finally:
        if task:
            progress.stop()
