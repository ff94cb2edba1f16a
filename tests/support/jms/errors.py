"""What goes wrong: ``RemoteError`` (the error a broker frame carries) and the exceptions this client raises, from
``JmsError`` (the broker said no) to ``RefusedLocally`` (Qpid JMS refuses without a frame). ``SendFailed`` sits
with the outcomes it reports, in ``deliveries``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proton import Condition


@dataclass(frozen=True)
class RemoteError:
    """The error of a broker close/end/detach, or of a rejected outcome."""

    condition: str | None
    description: str | None = None
    info: dict[Any, Any] | None = None

    @classmethod
    def of(cls, condition: Condition | None) -> RemoteError | None:
        if condition is None:
            return None
        return cls(str(condition.name), condition.description, dict(condition.info) if condition.info else None)


class JmsError(Exception):
    """The broker said no; ``condition``/``description``/``info`` are those of its error (may be None)."""

    def __init__(self, message: str, error: RemoteError | None = None) -> None:
        self.error = error
        self.condition = error.condition if error else None
        self.description = error.description if error else None
        self.info = error.info if error else None
        super().__init__(f"{message}: {error}" if error else message)


class ConnectionRefused(JmsError):
    """The broker answered the open with a refusal (§1.6)."""


class ConnectionLost(JmsError):
    """The socket closed while a test was waiting for something."""


class SaslFailed(JmsError):
    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(f"sasl-outcome code {code}")


class LinkRefused(JmsError):
    """The attach reply carried a null source/target; the broker's detach error is attached."""


class TransactionFailed(JmsError):
    """The coordinator did not declare a transaction when the session needed one."""


class RefusedLocally(Exception):
    """Qpid JMS refuses this itself, without a frame (§2.3, §2.7)."""
