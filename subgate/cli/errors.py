"""One-line errors for the operator commands that talk to a running server's ``$management``.

Owns ``management_errors``: a ``ManagementError`` (a status outside 2xx) or a failed exchange
(``ManagementUnavailable``) becomes a ``click.ClickException`` (exit code 1) whose one line says what could not be
done and why: a 404's description as the server gave it (``no queue 'q'``), else the action, the status and its
description.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import click

from subgate.cli.management import ManagementError, ManagementUnavailable


class Addressed(Protocol):
    @property
    def server(self) -> str: ...


@contextmanager
def management_errors(target: Addressed, action: str) -> Iterator[None]:
    """Translate the management client's errors while doing ``action`` (``list the queues``, ...)."""
    try:
        yield
    except ManagementError as exc:
        if exc.status == 404 and exc.description:
            raise click.ClickException(exc.description) from exc
        detail = f": {exc.description}" if exc.description else ""
        raise click.ClickException(f"the server could not {action} (status {exc.status}{detail})") from exc
    except ManagementUnavailable as exc:
        raise click.ClickException(f"the server at {target.server} did not answer the request: {exc}") from exc
