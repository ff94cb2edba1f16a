"""Limits on what one connection may hold: sessions, links, unsettled deliveries, topics it created, selectors.

Owns the rules, not the endpoints (no proton, no I/O; ``gateway.lifecycle``, ``gateway.links`` and
``gateway.topic_admin`` apply them). Each rule answers with the refusal's description, naming the limit and the
``subgate serve`` flag that sets it, or None when the request is within the limit:

- **Sessions per connection** (``session_refusal``): a ``begin`` past ``max_sessions_per_connection`` open sessions
  is answered and then ended with ``amqp:resource-limit-exceeded`` (AMQP part 2.5.1: a begin is answered before
  an end can say why); the connection and its other sessions go on.
- **Links per session** (``link_refusal``): an ``attach`` past ``max_links_per_session`` attached links of its
  session is answered and then detached (closed) with ``amqp:resource-limit-exceeded``.
- **Unsettled deliveries per link** (``sendable``): a consumer that grants much credit and never settles would
  make the server hold every delivery it sent; at ``max_unsettled_per_link`` the link gets nothing more (its credit
  is kept, not consumed) until the consumer settles some. Incoming deliveries are bounded by the credit the server
  grants (``--credit-window``), so they need no rule here.
- **Topics per connection** (``CreatedTopics``): the topics a connection created (by publishing or subscribing to
  a new one, or a management ``CREATE``) that still exist; past ``max_topics_per_connection`` a further creation
  is refused with ``amqp:resource-limit-exceeded``. Removed topics stop counting.
- **Selector length** (``max_selector_length``): applied by ``mapping.names.check_selector``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class EndpointLimits:
    """The per-connection limits of ``subgate serve`` (docs/security.md lists them with their defaults)."""

    max_sessions_per_connection: int = 256
    max_links_per_session: int = 1_000
    max_unsettled_per_link: int = 5_000
    max_topics_per_connection: int = 10_000
    max_selector_length: int = 8_192


def session_refusal(open_sessions: int, limits: EndpointLimits) -> str | None:
    """Why one more session may not begin on a connection with ``open_sessions`` open, or None."""
    limit = limits.max_sessions_per_connection
    if open_sessions < limit:
        return None
    return (
        f"session limit reached: {open_sessions} sessions open on this connection (max-sessions-per-connection {limit})"
    )


def link_refusal(attached: int, limits: EndpointLimits) -> str | None:
    """Why one more link may not attach to a session with ``attached`` links, or None."""
    limit = limits.max_links_per_session
    if attached < limit:
        return None
    return f"link limit reached: {attached} links attached on this session (max-links-per-session {limit})"


def sendable(credit: int, unsettled: int, limit: int) -> int:
    """How many deliveries a consumer link may be sent now: its credit, up to what the unsettled limit leaves."""
    return max(0, min(credit, limit - unsettled))


class CreatedTopics(Generic[T]):
    """The topics one connection created, to bound how many of them exist at once (``max_topics_per_connection``).

    ``exists`` says whether a topic is still in the server's tree; removed ones are pruned when the limit is
    reached, so the set never holds more than the limit and the check is one comparison below it.
    """

    __slots__ = ("_topics", "_exists")

    def __init__(self, exists: Callable[[T], bool]) -> None:
        self._topics: set[T] = set()
        self._exists = exists

    def __len__(self) -> int:
        return len(self._topics)

    def refusal(self, limits: EndpointLimits) -> str | None:
        """Why this connection may not create one more topic, or None."""
        limit = limits.max_topics_per_connection
        if len(self._topics) >= limit:
            self._topics = {topic for topic in self._topics if self._exists(topic)}
        if len(self._topics) < limit:
            return None
        return (
            f"topic limit reached: this connection created {len(self._topics)} topics that exist "
            f"(max-topics-per-connection {limit})"
        )

    def add(self, topic: T) -> None:
        self._topics.add(topic)
