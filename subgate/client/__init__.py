"""The subgate client SDK: publishers with FTL send policies, subscribers with AMPS bookmark stores, failover.

Imports proton and the standard library only (never the broker's packages). Guide: docs/client.md.
"""

from __future__ import annotations

from subgate.client.bookmarks import EPOCH, NOW, SeqFilter, parse_bookmark
from subgate.client.client import Client
from subgate.client.errors import ClientError, PublishError
from subgate.client.publisher import Publisher
from subgate.client.ring import RingBookmarkStore
from subgate.client.stores import BookmarkStore, LoggedBookmarkStore, MemoryBookmarkStore
from subgate.client.subscriber import MemorySubscriptionManager, Message, Subscriber

__all__ = [
    "EPOCH",
    "NOW",
    "BookmarkStore",
    "Client",
    "ClientError",
    "LoggedBookmarkStore",
    "MemoryBookmarkStore",
    "MemorySubscriptionManager",
    "Message",
    "PublishError",
    "Publisher",
    "RingBookmarkStore",
    "SeqFilter",
    "Subscriber",
    "parse_bookmark",
]
