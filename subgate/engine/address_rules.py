"""Which address settings each queue has, and who takes the messages it gives up on.

Owns the queues' side of ``mapping.address_settings``: the entries in force (from the configuration, replaceable
through ``$management``), the effective settings of a name, and ``govern``, which gives a queue its settings and
its ``on_move`` (the gateway's mover, ``gateway.dead_letters``, set once the publish pipeline exists; queues
recovered before that do not move anything until the server runs), and a durable queue's backlog limit
(``engine.backlog``: the server's, changed by ``max_backlog_messages`` and ``backlog_full_policy``). Pure: no
proton, no store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from subgate.engine.backlog import NO_BACKLOG_LIMIT, BacklogLimit
from subgate.engine.messages import Message
from subgate.engine.nodes import Queue, limit_backlog
from subgate.mapping.address_settings import AddressSettings, parse_entries, settings_for


class AddressRules:
    """The address settings in force (see the module docstring)."""

    def __init__(self, texts: tuple[str, ...], delimiter: str = ".", backlog: BacklogLimit = NO_BACKLOG_LIMIT) -> None:
        self.backlog = backlog  # the server's (--max-backlog-messages, --backlog-full-policy)
        self.delimiter = delimiter
        self.texts = texts
        self.entries = parse_entries(texts, delimiter)
        self.mover: Callable[[Queue, Message, str], None] | None = None

    def for_name(self, name: str) -> AddressSettings:
        """The settings of the queue or topic ``name``."""
        return settings_for(self.entries, name)

    def govern(self, queue: Queue, address: str | None = None) -> None:
        """Give ``queue`` (of topic ``address``, for a subscription's) its settings and its mover. A queue that is
        its own dead letter address never gives up on a message: it would have nowhere to go."""
        if address is not None:
            queue.address = address
        rules = self.for_name(queue.address)
        if rules.dead_letter_target(queue.name) == queue.name:
            rules = replace(rules, max_delivery_attempts=0)
        queue.address_settings = rules
        queue.on_move = self._move
        limit_backlog(queue, self._backlog(rules))  # a durable queue's only

    def _backlog(self, rules: AddressSettings) -> BacklogLimit:
        """The server's backlog limit, with what the queue's address settings change of it."""
        messages = rules.max_backlog_messages
        return BacklogLimit(
            self.backlog.messages if messages < 0 else messages, rules.backlog_full_policy or self.backlog.policy
        )

    def replace(self, texts: tuple[str, ...], queues: Iterable[Queue]) -> None:
        """New entries, for ``queues`` (every queue there is) now and for later ones.

        Raises:
            AddressSettingsError: a malformed entry (nothing changes).
        """
        self.entries = parse_entries(texts, self.delimiter)
        self.texts = texts
        for queue in queues:
            self.govern(queue)

    def _move(self, queue: Queue, message: Message, reason: str) -> None:
        assert self.mover is not None, "a queue gave up on a message before the publish pipeline was built"
        self.mover(queue, message, reason)
