"""Address settings: what happens to a queue's undeliverable and expired messages, per name pattern (Artemis's
``address-setting``).

Owns the rule (docs/jms.md, "Dead letters and expiry"). An entry is a match pattern in Artemis wildcard syntax
(words joined by the delimiter ``.``; ``#`` any number of words, ``*`` exactly one word; no wildcard: exactly
that name) with some of the fields of ``AddressSettings``. The settings of a queue are the defaults overridden,
field by field, by every entry whose pattern matches its name, from the least specific to the most specific (an
exact name beats any wildcard; among wildcards the one with more literal characters wins). A topic
subscription's queue matches on its topic's name.

The text form (the ``--address-settings`` flag, ``SUBGATE_ADDRESS_SETTINGS``, and how ``[address_settings]``
TOML tables arrive) is ``PATTERN:key=value;key=value`` entries separated by commas. Pure: no proton, no store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any

MAX_DELIVERY_ATTEMPTS = "max-delivery-attempts"  # the reasons a message leaves for its dead letter address
REJECTED = "rejected"
BACKLOG_POLICIES = ("block", "fail")
EXPIRED = "expired"


class AddressSettingsError(ValueError):
    """A malformed address settings entry, an unknown key or a bad value (the message names it)."""


@dataclass(frozen=True, slots=True)
class AddressSettings:
    """The effective settings of one queue (module docstring: how they are chosen)."""

    max_delivery_attempts: int = 10  # failed deliveries before the dead letter address; 0 or less: never
    dead_letter_address: str = "DLQ"  # '' drops what would go there (logged)
    expiry_address: str = "ExpiryQueue"  # '' drops an expired message, as without address settings
    auto_create_dead_letter_resources: bool = False  # dead letters to queue PREFIX+name rather than the address
    dead_letter_queue_prefix: str = "DLQ."
    expiry_queue_prefix: str = "ExpiryQueue."
    auto_create_expiry_resources: bool = False
    redelivery_delay: int = 0  # ms before a failed message is offered again (0: at once)
    redelivery_delay_multiplier: float = 1.0  # each further failure multiplies the delay
    max_redelivery_delay: int = 0  # ms; 0: ten times redelivery_delay (as Artemis)
    auto_create_queues: bool = True  # a consumer or browser of an unknown name creates the queue
    # A durable queue's or durable subscription's backlog limit (engine.backlog): -1 / '' take the server's
    # --max-backlog-messages / --backlog-full-policy (as Artemis' max-size-bytes and address-full-policy).
    max_backlog_messages: int = -1
    backlog_full_policy: str = ""

    def redelivery_wait(self, failures: int) -> int:
        """Milliseconds a message waits after its ``failures``-th failed delivery before it is offered again."""
        if self.redelivery_delay <= 0 or failures <= 0:
            return 0
        ceiling = self.max_redelivery_delay or 10 * self.redelivery_delay
        wait = self.redelivery_delay * self.redelivery_delay_multiplier ** (failures - 1)
        return int(min(wait, ceiling))

    def dead_letter_target(self, queue: str) -> str:
        """Where a dead letter of ``queue`` goes ('' : nowhere, it is dropped)."""
        return _target(
            self.dead_letter_address, self.auto_create_dead_letter_resources, self.dead_letter_queue_prefix, queue
        )

    def expiry_target(self, queue: str) -> str:
        """Where an expired message of ``queue`` goes ('' : nowhere, it is dropped)."""
        return _target(self.expiry_address, self.auto_create_expiry_resources, self.expiry_queue_prefix, queue)

    def gives_up(self, failures: int) -> bool:
        """Has a message with ``failures`` failed deliveries reached the maximum?"""
        return 0 < self.max_delivery_attempts <= failures


def _target(address: str, per_queue: bool, prefix: str, queue: str) -> str:
    if not address:
        return ""
    return prefix + queue if per_queue else address


DEFAULTS = AddressSettings()
_FIELDS = {f.name: f for f in fields(AddressSettings)}


@dataclass(frozen=True, slots=True)
class Entry:
    pattern: str
    values: tuple[tuple[str, Any], ...]
    regex: re.Pattern[str]
    specificity: tuple[int, int]


def _pattern_regex(pattern: str, delimiter: str) -> tuple[re.Pattern[str], tuple[int, int]]:
    """The regular expression of a match pattern, and its specificity (exact or not, literal characters)."""
    words = pattern.split(delimiter)
    sep = re.escape(delimiter)
    parts: list[str] = []
    last = len(words) - 1
    for i, word in enumerate(words):
        if word == "#":
            if i == 0:
                parts.append(".*" if i == last else f"(?:.*{sep})?")  # "#", "#.b": b, x.b, x.y.b
            elif i == last:
                parts.append(f"(?:{sep}.*)?")  # "a.#": a, a.x, a.x.y
            else:
                parts.append(f"{sep}(?:.*{sep})?")  # "a.#.b": a.b, a.x.b
            continue
        token = f"[^{sep}]+" if word == "*" else re.escape(word)
        parts.append(token if i == 0 or words[i - 1] == "#" else sep + token)
    literal = sum(len(w) for w in words if w not in ("#", "*"))
    exact = all(w not in ("#", "*") for w in words)
    return re.compile("".join(parts)), (1 if exact else 0, literal)


def _value(pattern: str, key: str, text: Any) -> Any:
    spec = _FIELDS.get(key)
    if spec is None:
        known = ", ".join(sorted(_FIELDS))
        raise AddressSettingsError(f"address settings {pattern!r}: unknown key {key!r} (known: {known})")
    kind = type(spec.default)
    try:
        if kind is bool:
            if isinstance(text, bool):
                return text
            lowered = str(text).strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return lowered in ("true", "1", "yes")
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise AddressSettingsError(f"address settings {pattern!r}: {key} = {text!r} is not a {kind.__name__}") from None
    value = str(text).strip()
    if key == "backlog_full_policy" and value not in BACKLOG_POLICIES:
        raise AddressSettingsError(f"address settings {pattern!r}: backlog_full_policy must be block or fail")
    return value


def parse_entries(texts: tuple[str, ...], delimiter: str = ".") -> tuple[Entry, ...]:
    """The entries of the text form (module docstring), most specific last.

    Raises:
        ValueError: a malformed entry, an unknown key or a bad value, named in the message.
    """
    entries: list[Entry] = []
    for text in texts:
        pattern, sep, body = text.partition(":")
        pattern = pattern.strip()
        if not sep or not pattern:
            raise AddressSettingsError(f"address settings {text!r}: expected PATTERN:key=value;key=value")
        values: list[tuple[str, Any]] = []
        for item in filter(None, (part.strip() for part in body.split(";"))):
            key, eq, value = item.partition("=")
            if not eq:
                raise AddressSettingsError(f"address settings {pattern!r}: expected key=value, got {item!r}")
            key = key.strip().replace("-", "_")
            values.append((key, _value(pattern, key, value)))
        regex, specificity = _pattern_regex(pattern, delimiter)
        entries.append(Entry(pattern, tuple(values), regex, specificity))
    entries.sort(key=lambda entry: entry.specificity)
    return tuple(entries)


def settings_for(entries: tuple[Entry, ...], name: str) -> AddressSettings:
    """The effective settings of the queue (or topic) ``name``."""
    changes: dict[str, Any] = {}
    for entry in entries:
        if entry.regex.fullmatch(name):
            changes.update(entry.values)
    return replace(DEFAULTS, **changes) if changes else DEFAULTS


def table_to_text(table: dict[str, Any]) -> str:
    """A TOML ``[address_settings."PATTERN"]`` table (pattern -> {key: value}) in the text form."""
    parts = []
    for pattern, values in table.items():
        if not isinstance(values, dict):
            raise ValueError(f"address_settings.{pattern} must be a table of settings")
        body = ";".join(
            f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in values.items()
        )
        parts.append(f"{pattern}:{body}")
    return ",".join(parts)
