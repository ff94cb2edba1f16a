"""The exceptions the topic engine raises, each carrying the AMQP condition the gateway sends back.

    TopicsError                        base: ``condition`` (AMQP error symbol) and ``description``
    ├── TopicPathError(ValueError)     a topic path that breaks the path rules      amqp:invalid-field
    ├── SelectorError(ValueError)      a topic selector expression that is invalid  amqp:invalid-field
    ├── UnknownTopicError(KeyError)    no topic at that path                        amqp:not-found
    └── RegistrationConflict           remove-with-session above or below another   amqp:precondition-failed

The package imports nothing but the standard library and the condition names of ``mapping.errors`` (where every
AMQP condition is declared), so these are not ``mapping.errors.Refused``; the gateway turns any ``TopicsError``
into a ``Condition(err.condition, err.description)`` at the one place it catches them.
"""

from __future__ import annotations

from subgate.mapping.errors import INVALID_FIELD, NOT_FOUND, PRECONDITION_FAILED


class TopicsError(Exception):
    """Base class: a topic rule said no. ``condition`` is the AMQP error symbol to answer with."""

    condition: str = INVALID_FIELD

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description

    def __str__(self) -> str:
        return self.description


class TopicPathError(TopicsError, ValueError):
    """A topic path is empty, starts or ends with ``/``, or has an empty segment."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid topic path {path!r}: {reason}")
        self.path = path
        self.reason = reason


class SelectorError(TopicsError, ValueError):
    """A topic selector expression cannot be parsed."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"invalid topic selector {expression!r}: {reason}")
        self.expression = expression
        self.reason = reason


class UnknownTopicError(TopicsError, KeyError):
    """There is no topic at this path (an intermediate node without a topic does not count)."""

    condition = NOT_FOUND

    def __init__(self, path: str) -> None:
        super().__init__(f"no topic at {path!r}")
        self.path = path


class RegistrationConflict(TopicsError):
    """A remove-with-session registration would sit strictly above or below an existing one (seed 001)."""

    condition = PRECONDITION_FAILED

    def __init__(self, branch: str, existing: str) -> None:
        relation = "below" if existing.startswith(branch + "/") else "above"
        super().__init__(f"cannot register removal of {branch!r}: a registration on {existing!r} exists {relation} it")
        self.branch = branch
        self.existing = existing
