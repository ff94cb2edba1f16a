"""What the names in an attach may be: sizes, characters and address prefixes (docs/protocol.md, "Limits").

Rules:

- **Sizes, checked before anything else at attach** (``check_link_name``, ``check_terminus``,
  ``check_selector``): a link name and a source or target address of at most ``MAX_NAME_LENGTH`` characters, a
  JMS selector of at most ``--max-selector-length`` (default ``MAX_SELECTOR_LENGTH``), at most
  ``MAX_CAPABILITIES`` capabilities per terminus. Above them the attach is refused with ``amqp:invalid-field``
  and a short description, so neither the refusal nor an accepted attach's echo can outgrow what a client takes
  in one frame (performatives are never split across frames).
- **Descriptions are bounded** (``bounded``): an error description quoting client input is cut to
  ``MAX_DESCRIPTION_LENGTH`` characters; ``Refused`` applies it to every description a rule writes.
- **Characters of a new node's name** (``check_new_name``): no control characters (U+0000–U+001F, U+007F–U+009F);
  a topic's name is also a topic path (``topics.paths``) whose first character is not one of the selector
  characters ``> ? * #``, since an address starting with one is read as a selector by subscribers and the
  topic could never be subscribed to by name.
- **Reserved names** (``reserved``): ``$management`` (the management node) and ``$subgate/…`` (the control links'
  and the fan-out's addresses) are the server's. No queue or topic is made under them, by an attach, a relayed
  message or ``$management`` ``CREATE``: a relayed management request would otherwise land, accepted and never
  answered, in a queue called ``$management``, and a consumer of that queue would read what others meant for the
  management node.
- **Address prefixes** (``split_prefix``), as Artemis' ``anycastPrefix``/``multicastPrefix``: an address that
  starts with an anycast prefix (default ``queue://``) names a queue, with a multicast prefix (default
  ``topic://``) a topic; the prefix is not part of the node's name.
"""

from __future__ import annotations

from collections.abc import Iterable

from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.store_values import check_text, text_problem

MAX_NAME_LENGTH = 1024
MAX_SELECTOR_LENGTH = 8192
MAX_CAPABILITIES = 32
MAX_DESCRIPTION_LENGTH = 512  # errors._MAX_DESCRIPTION is the same bound

QUEUE = "queue"
TOPIC = "topic"
DEFAULT_ANYCAST_PREFIXES = ("queue://",)
DEFAULT_MULTICAST_PREFIXES = ("topic://",)
SELECTOR_CHARACTERS = (">", "?", "*", "#")
MANAGEMENT_ADDRESS = "$management"
CONTROL_PREFIX = "$subgate/"

_ELLIPSIS = "…"


def bounded(text: str, limit: int = MAX_DESCRIPTION_LENGTH) -> str:
    """``text``, cut to ``limit`` characters (the last one an ellipsis) when longer."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + _ELLIPSIS


def check_link_name(name: str) -> None:
    """Raises: Refused(amqp:invalid-field) for a link name longer than ``MAX_NAME_LENGTH``."""
    if len(name) > MAX_NAME_LENGTH:
        raise Refused(INVALID_FIELD, f"link name of {len(name)} characters (at most {MAX_NAME_LENGTH})")


def check_terminus(address: str | None, capability_count: int) -> None:
    """Raises: Refused(amqp:invalid-field) for an address longer than ``MAX_NAME_LENGTH`` or more than
    ``MAX_CAPABILITIES`` capabilities."""
    if address is not None and len(address) > MAX_NAME_LENGTH:
        raise Refused(INVALID_FIELD, f"address of {len(address)} characters (at most {MAX_NAME_LENGTH})")
    if capability_count > MAX_CAPABILITIES:
        raise Refused(INVALID_FIELD, f"{capability_count} capabilities on one terminus (at most {MAX_CAPABILITIES})")


def check_selector(selector: str | None, limit: int = MAX_SELECTOR_LENGTH) -> None:
    """Raises: Refused(amqp:invalid-field) for a JMS selector longer than ``limit`` (``--max-selector-length``,
    by default ``MAX_SELECTOR_LENGTH``), or holding what the store cannot keep (a subscription's selector is
    stored: U+0000, a lone surrogate; ``mapping.store_values``)."""
    if selector is not None and len(selector) > limit:
        raise Refused(INVALID_FIELD, f"selector of {len(selector)} characters (at most {limit}: max-selector-length)")
    if selector:
        check_text("selector", selector, limit)


def control_character(name: str) -> str | None:
    """The first control character in ``name`` (as ``U+XXXX``), or None."""
    for char in name:
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            return f"U+{code:04X}"
    return None


def stored_name_problem(field: str, name: str) -> str | None:
    """What keeps the store from holding ``name`` as a node's name (None: nothing): 1 to ``MAX_NAME_LENGTH``
    characters of text (``mapping.store_values``) without control characters."""
    problem = text_problem(field, name, MAX_NAME_LENGTH)
    bad = control_character(name) if problem is None else None
    return problem if bad is None else f"{field} must not contain the control character {bad}"


def check_new_name(address: str, kind: str, path_problem: str | None) -> None:
    """May a node of ``kind`` be created under ``address``? ``path_problem`` is what ``topics.paths`` says is
    wrong with it as a topic path (None: nothing); it matters for topics only.

    Raises:
        Refused: ``amqp:invalid-field`` naming the broken rule.
    """
    bad = control_character(address)
    if bad is not None:
        raise Refused(INVALID_FIELD, f"{kind} name {address!r} contains the control character {bad}")
    problem = reserved(address)
    if problem is not None:
        raise Refused(INVALID_FIELD, f"no {kind} can be made at {address!r}: {problem}")
    if kind != TOPIC:
        return
    if path_problem is not None:
        raise Refused(INVALID_FIELD, f"{address!r} is not a topic path: {path_problem} (docs/topics.md)")
    if address.startswith(SELECTOR_CHARACTERS):
        raise Refused(
            INVALID_FIELD,
            f"a topic name must not start with one of {' '.join(SELECTOR_CHARACTERS)} ({address!r} is a selector: "
            "subscribe with it, publish to a topic path)",
        )


def reserved(address: str) -> str | None:
    """Why ``address`` is the server's and no node may be made there (None: it is not reserved)."""
    if address == MANAGEMENT_ADDRESS:
        return "the management node; send requests on a link attached to it (docs/operations.md)"
    if address.startswith(CONTROL_PREFIX):
        return f"addresses under {CONTROL_PREFIX!r} are the server's control links (docs/topics.md)"
    return None


def split_prefix(
    address: str,
    anycast: Iterable[str] = DEFAULT_ANYCAST_PREFIXES,
    multicast: Iterable[str] = DEFAULT_MULTICAST_PREFIXES,
) -> tuple[str, str | None]:
    """``(name, kind)``: the address without its routing prefix and the node type the prefix asks for (None: no
    prefix)."""
    for prefixes, kind in ((anycast, QUEUE), (multicast, TOPIC)):
        for prefix in prefixes:
            if prefix and address.startswith(prefix):
                return address[len(prefix) :], kind
    return address, None
