"""A rich progress bar on stderr for the operator's long operations that run in steps (``subgate queues purge``).

Owns ``stepped``: it runs ``step()`` until a step comes back short (the work is done) or the work counted at the
start is all done (new work arriving meanwhile does not keep it going), and shows how far it got. stdout is
left to the command's own result line, so scripts can read it.
"""

from __future__ import annotations

from collections.abc import Callable


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
