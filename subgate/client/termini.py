"""Writing the client's terminus fields: capabilities, the bookmark filter, durability (I/O thread only)."""

from __future__ import annotations

from proton import Data, Described, Terminus, symbol

BOOKMARK_KEY = "subgate-bookmark"
BOOKMARK_DESCRIPTOR = "subgate:bookmark:string"


def set_capabilities(terminus: Terminus, *capabilities: str) -> None:
    data: Data = terminus.capabilities
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for capability in capabilities:
        data.put_symbol(symbol(capability))
    data.exit()


def set_bookmark_filter(source: Terminus, value: str) -> None:
    """The ``subgate-bookmark`` filter entry (docs/bookmarks.md) asking for a replay from ``value``."""
    source.filter.put_dict({symbol(BOOKMARK_KEY): Described(symbol(BOOKMARK_DESCRIPTOR), value)})


def set_durable(source: Terminus) -> None:
    """A JMS durable subscription's source: durability 2 (deliveries) and expiry never."""
    source.durability = Terminus.DELIVERIES
    source.expiry_policy = Terminus.EXPIRE_NEVER
