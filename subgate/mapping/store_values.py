"""What a client-supplied value must be before it becomes a parameter of a store query (docs/security.md,
"Values that reach the store").

Owns the ranges every edge checks (an attach's bookmark filter, a message's publisher identity, a subscription's
name and ClientID, a ``$management`` request's arguments), so that the store never sees a value it cannot bind or
hold: the journal's writer applies every query of the server, and a value the driver refuses would fail a whole
batch of other clients' writes with it.

- **Numbers** (a publisher's sequence number, in ``x-opt-publisher-seq`` or in a bookmark ``publisherId|seq|``):
  0 to ``MAX_SEQ`` = 2^63 - 1, the range of the signed 64-bit columns (SQLite INTEGER, PostgreSQL BIGINT). Digits
  are judged by their count before they are read as a number (a run of 5,000 digits is not parsed).
- **Strings**: not empty, at most their column's width in characters (``MAX_PUBLISHER_ID`` for a publisher id,
  ``MAX_SUBSCRIPTION_NAME``, ``MAX_CLIENT_ID``, ``MAX_REMOVAL_OWNER``, a node's name or a link's
  ``mapping.names.MAX_NAME_LENGTH``),
  no U+0000 (PostgreSQL text cannot hold it) and no lone surrogate
  (it has no UTF-8 form: neither driver binds it).

A value outside is refused with ``amqp:invalid-field`` (``Refused``), a description naming the field and the
allowed range. Pure: no proton, no store.
"""

from __future__ import annotations

from subgate.mapping.errors import INVALID_FIELD, Refused

MAX_SEQ = 2**63 - 1  # the sequence columns are signed 64-bit integers
SEQ_RANGE = f"0 to {MAX_SEQ} (2^63 - 1)"
MAX_PUBLISHER_ID = 512  # characters (the column's width)
MAX_SUBSCRIPTION_NAME = 512
MAX_CLIENT_ID = 512
MAX_REMOVAL_OWNER = 256  # the container-id of a remove-with-session registration
MAX_LINK_NAME = 1024  # as mapping.names.MAX_NAME_LENGTH (which imports this module)
_MAX_SEQ_DIGITS = len(str(MAX_SEQ))  # 19: more significant digits cannot be in range


def seq_problem(field: str, value: object) -> str | None:
    """What is wrong with ``value`` as a sequence number named ``field`` (None: nothing)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{field} must be an integer from {SEQ_RANGE}, not {type(value).__name__}"
    if not 0 <= value <= MAX_SEQ:
        return f"{field} must be an integer from {SEQ_RANGE}"
    return None


def check_seq(field: str, value: object) -> int:
    """``value`` as a sequence number.

    Raises:
        Refused: ``amqp:invalid-field`` when it is not an integer from 0 to 2^63 - 1.
    """
    problem = seq_problem(field, value)
    if problem is not None:
        raise Refused(INVALID_FIELD, problem)
    return int(value)  # type: ignore[call-overload]  # an int, checked above


def parse_seq(field: str, digits: str) -> int | None:
    """ASCII decimal ``digits`` as a sequence number; None when they are not ASCII digits.

    Raises:
        Refused: ``amqp:invalid-field`` when the number is above 2^63 - 1 (judged by the digits' count first).
    """
    if not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0")
    if len(significant) > _MAX_SEQ_DIGITS or int(significant or "0") > MAX_SEQ:
        raise Refused(INVALID_FIELD, f"{field} must be an integer from {SEQ_RANGE}")
    return int(significant or "0")


def text_problem(field: str, value: object, max_chars: int) -> str | None:
    """What is wrong with ``value`` as a string the store keeps in a column of ``max_chars`` (None: nothing)."""
    if not isinstance(value, str):
        return f"{field} must be a string, not {type(value).__name__}"
    if not 0 < len(value) <= max_chars:
        return f"{field} must be 1 to {max_chars} characters, not {len(value)}"
    if "\x00" in value:
        return f"{field} must not contain U+0000"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{field} must be valid Unicode text (it holds a lone surrogate)"
    return None


def check_text(field: str, value: object, max_chars: int) -> str:
    """``value`` as a string the store can hold in a column of ``max_chars`` characters.

    Raises:
        Refused: ``amqp:invalid-field`` naming ``field`` and what it may be.
    """
    problem = text_problem(field, value, max_chars)
    if problem is not None:
        raise Refused(INVALID_FIELD, problem)
    return value  # type: ignore[return-value]  # a str, checked above


def check_registration(container_id: str, link_name: str) -> None:
    """A remove-with-session registration's container-id (empty: none) and link name, as its row keeps them.

    Raises:
        Refused: ``amqp:invalid-field`` naming the field and its range.
    """
    if container_id:
        check_text("container-id of a remove-with-session registration", container_id, MAX_REMOVAL_OWNER)
    if link_name:
        check_text("link name of a remove-with-session registration", link_name, MAX_LINK_NAME)
