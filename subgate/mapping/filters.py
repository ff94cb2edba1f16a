"""The source filter map of a consumer attach: which JMS filters it asks for (mapping doc §2.4).

Filters are matched by descriptor, numeric or symbolic, never by map key. Values arrive as
(descriptor, value) pairs so that this module stays free of proton; the adapter converts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from subgate.mapping.bookmarks import BOOKMARK_KEY, BOOKMARK_SYMBOL, ReplayRequest, parse_replay
from subgate.mapping.errors import INVALID_FIELD, Refused

SELECTOR_CODE = 0x0000468C00000004
NO_LOCAL_CODE = 0x0000468C00000003
SELECTOR_SYMBOL = "apache.org:selector-filter:string"
NO_LOCAL_SYMBOL = "apache.org:no-local-filter:list"


@dataclass(frozen=True, slots=True)
class FilterRequest:
    """The filters asked for: a selector (None when absent or blank), no-local, a replay start (the
    ``subgate-bookmark`` filter, with the key it came under), and the map keys honoured."""

    selector: str | None = None
    no_local: bool = False
    honoured: frozenset[str] = field(default_factory=frozenset)
    replay: ReplayRequest | None = None
    replay_key: str | None = None

    @property
    def replay_echo(self) -> tuple[str, str] | None:
        """The bookmark filter's (key, value) as the attach answer echoes it once the replay is applied."""
        if self.replay is None or self.replay_key is None:
            return None
        return self.replay_key, self.replay.value


def _is(descriptor: object, code: int, name: str) -> bool:
    if isinstance(descriptor, bool):
        return False
    if isinstance(descriptor, int):
        return descriptor == code
    return isinstance(descriptor, str) and descriptor == name


def read_filters(filters: dict[str, tuple[object, object]]) -> FilterRequest:
    """Pick the selector and no-local filters out of a filter map of key -> (descriptor, value).

    Unknown filters are ignored (and not echoed). A selector value that is not a string is refused, and so is a
    bookmark value that ``mapping.bookmarks.parse_replay`` cannot read.

    Raises:
        Refused: ``amqp:invalid-field`` for a selector filter whose value is not a string, or a malformed
            bookmark.
    """
    selector: str | None = None
    no_local = False
    honoured: set[str] = set()
    replay: ReplayRequest | None = None
    replay_key: str | None = None
    for key, (descriptor, value) in filters.items():
        if _is(descriptor, SELECTOR_CODE, SELECTOR_SYMBOL):
            if not isinstance(value, str):
                raise Refused(INVALID_FIELD, f"the selector filter {key!r} must carry a string")
            honoured.add(key)
            if value.strip():
                selector = value
        elif _is(descriptor, NO_LOCAL_CODE, NO_LOCAL_SYMBOL):
            no_local = True
            honoured.add(key)
        elif (isinstance(descriptor, str) and descriptor == BOOKMARK_SYMBOL) or (
            descriptor is None and key == BOOKMARK_KEY
        ):
            # Ours: by its descriptor; a bare string under its conventional key is taken too (design.md §3).
            replay, replay_key = parse_replay(value), key
    return FilterRequest(selector, no_local, frozenset(honoured), replay, replay_key)
