"""The one exception a rule raises when it says no, and every AMQP error condition subgate sends.

Refused(condition, description)   the AMQP error condition symbol is part of the rule

The ``amqp:*`` condition symbols (AMQP 1.0 §2.8.15, §2.8.16, §2.8.17 and §4.5.8) are declared here and only here:
the rules, the topic engine, the gateway and the CLI import them (``tests/unit/mapping/test_conditions.py`` fails on an
``amqp:`` condition literal anywhere else in the package). Descriptor names (``amqp:header:list``...) are not
conditions and stay with the codecs that read them.
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


# amqp-error (§2.8.15)
NOT_FOUND = "amqp:not-found"
INVALID_FIELD = "amqp:invalid-field"
PRECONDITION_FAILED = "amqp:precondition-failed"
UNAUTHORIZED = "amqp:unauthorized-access"
NOT_IMPLEMENTED = "amqp:not-implemented"
NOT_ALLOWED = "amqp:not-allowed"
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
RESOURCE_LOCKED = "amqp:resource-locked"
RESOURCE_DELETED = "amqp:resource-deleted"
ILLEGAL_STATE = "amqp:illegal-state"
INTERNAL_ERROR = "amqp:internal-error"
DECODE_ERROR = "amqp:decode-error"
# connection-error (§2.8.16), and the open frame's property that says the connection is refused (§2.4.1)
CONNECTION_FORCED = "amqp:connection:forced"
CONNECTION_ESTABLISHMENT_FAILED = "amqp:connection-establishment-failed"
# link-error (§2.8.17)
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
LINK_STOLEN = "amqp:link:stolen"
# session-error (§2.8.18)
HANDLE_IN_USE = "amqp:session:handle-in-use"
# transaction-error (§4.5.8)
TRANSACTION_UNKNOWN_ID = "amqp:transaction:unknown-id"
