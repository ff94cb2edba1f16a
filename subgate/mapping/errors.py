"""The one exception a rule raises when it says no.

Refused(condition, description)   the AMQP error condition symbol is part of the rule
"""

from __future__ import annotations

_MAX_DESCRIPTION = 512  # the same as mapping.names.MAX_DESCRIPTION_LENGTH (names imports this module)


class Refused(Exception):
    """A rule said no. ``condition`` is the AMQP error symbol to send back with ``description``."""

    def __init__(self, condition: str, description: str) -> None:
        # Descriptions quote client input (an address, a selector): bounded, so an error reply always fits in
        # what the client accepts in one frame (docs/protocol.md, "Limits").
        if len(description) > _MAX_DESCRIPTION:
            description = description[: _MAX_DESCRIPTION - 1] + "…"
        super().__init__(description)
        self.condition = condition
        self.description = description

    def __repr__(self) -> str:
        return f"Refused({self.condition!r}, {self.description!r})"


NOT_FOUND = "amqp:not-found"
INVALID_FIELD = "amqp:invalid-field"
PRECONDITION_FAILED = "amqp:precondition-failed"
UNAUTHORIZED = "amqp:unauthorized-access"
NOT_IMPLEMENTED = "amqp:not-implemented"
NOT_ALLOWED = "amqp:not-allowed"
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
INTERNAL_ERROR = "amqp:internal-error"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
DECODE_ERROR = "amqp:decode-error"
ILLEGAL_STATE = "amqp:illegal-state"
RESOURCE_LOCKED = "amqp:resource-locked"
RESOURCE_DELETED = "amqp:resource-deleted"
TRANSACTION_UNKNOWN_ID = "amqp:transaction:unknown-id"
CONNECTION_FORCED = "amqp:connection:forced"
# A connection property (not a condition) of a refused open: the open is about to be followed by a close.
CONNECTION_ESTABLISHMENT_FAILED = "amqp:connection-establishment-failed"
