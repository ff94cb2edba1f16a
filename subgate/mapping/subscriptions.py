"""JMS topic subscriptions over AMQP 1.0: which subscription an attach means and what to do with it.

Owns the rules of mapping doc §2 (kinds, identity, link-name suffixes), §3 (unsubscribe by null-source lookup)
and §4 (re-subscribe with changed details). Pure: it sees plain values (link name, container-id, the source
fields, the current state of the subscription the attach names) and answers with a decision or a ``Refused``.

Identity (§2.8): a subscription key is (namespace, scope, name).

* namespace ``durable``: non-shared and shared durable subscriptions together (JMS forbids one name for both
  kinds within a ClientID, and the unsubscribe lookup cannot tell them apart);
* namespace ``volatile``: shared non-durable subscriptions;
* scope: the connection's container-id, or ``GLOBAL`` for shared subscriptions of connections without an
  application ClientID (capability ``global``);
* name: the whole link name for a non-shared durable subscription, the text before the first ``|`` for shared
  ones (``s``, ``s|2``, ``s|global``, ``s|global2``, ``s|volatile1``, ``s|global-volatile1`` all name ``s``).

A plain topic consumer (durable 0, not shared) has no key: its subscription is private to the link.

Decisions on attach (§4, JMS 2.0 §6.11.1 and §8.3):

=============================  ==========================  ===========================================
existing subscription          same topic/selector/no-local  different details
=============================  ==========================  ===========================================
none                           CREATE                      CREATE
idle (no consumers)            ATTACH (resume the backlog)   REPLACE (delete, then create anew)
active, shared, shared attach  ATTACH (one more consumer)    refuse ``amqp:illegal-state``
active, exclusive              refuse ``amqp:resource-locked`` (a second exclusive consumer)
=============================  ==========================  ===========================================

A shared attach to an existing non-shared durable subscription of the same key, or the reverse, is refused with
``amqp:illegal-state`` whether or not it is active: JMS says the two kinds may not share a name and ClientID
(Artemis silently mixes them; see docs/jms.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from subgate.mapping.errors import ILLEGAL_STATE, NOT_FOUND, RESOURCE_LOCKED, Refused
from subgate.mapping.store_values import MAX_CLIENT_ID, MAX_SUBSCRIPTION_NAME, check_text

GLOBAL = None  # the scope of global subscriptions
DURABLE = "durable"
VOLATILE = "volatile"
SEPARATOR = "|"


class Kind(Enum):
    """The six consumer kinds of mapping doc §2.2 (global/ClientID is the key's scope, not a kind)."""

    PLAIN = "plain"
    DURABLE = "durable"  # non-shared durable
    SHARED_DURABLE = "shared-durable"
    SHARED_VOLATILE = "shared-volatile"

    @property
    def shared(self) -> bool:
        return self in (Kind.SHARED_DURABLE, Kind.SHARED_VOLATILE)

    @property
    def durable(self) -> bool:
        return self in (Kind.DURABLE, Kind.SHARED_DURABLE)


@dataclass(frozen=True, slots=True)
class SubscriptionKey:
    namespace: str
    client_id: str | None  # None = global
    name: str

    def describe(self) -> str:
        scope = "global" if self.client_id is None else f"ClientID {self.client_id!r}"
        return f"{self.namespace} subscription {self.name!r} ({scope})"


@dataclass(frozen=True, slots=True)
class Details:
    """What a subscription selects: compared on re-subscribe (§4: selectors as strings, None ≠ '')."""

    topic: str
    selector: str | None
    no_local: bool


@dataclass(frozen=True, slots=True)
class SubscribeRequest:
    """A consumer attach on a topic, as read from the frame."""

    link_name: str
    container_id: str
    durable: bool  # source.durable >= 1 (configuration or unsettled-state)
    capabilities: frozenset[str]
    details: Details


@dataclass(frozen=True, slots=True)
class Existing:
    """The current state of the subscription an attach or lookup names."""

    kind: Kind
    details: Details
    consumers: int


class Action(Enum):
    CREATE = "create"
    ATTACH = "attach"
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    kind: Kind
    key: SubscriptionKey | None  # None for a plain (private) subscription


def kind_of(durable: bool, capabilities: frozenset[str]) -> Kind:
    """The consumer kind from the source's durability and capabilities (§2.8)."""
    if "shared" in capabilities:
        return Kind.SHARED_DURABLE if durable else Kind.SHARED_VOLATILE
    return Kind.DURABLE if durable else Kind.PLAIN


def subscription_name(link_name: str, shared: bool) -> str:
    """Shared subscriptions are named by the text before the first ``|``; a non-shared durable one by the
    whole link name (§2.2, §2.3)."""
    if shared:
        return link_name.split(SEPARATOR, 1)[0]
    return link_name


def key_for(request: SubscribeRequest) -> SubscriptionKey | None:
    """The subscription an attach names (None: a plain consumer's, private to its link).

    Raises:
        Refused: ``amqp:invalid-field`` for a name or ClientID the store cannot keep (``checked_key``).
    """
    kind = kind_of(request.durable, request.capabilities)
    if kind is Kind.PLAIN:
        return None
    namespace = DURABLE if kind.durable else VOLATILE
    scope = GLOBAL if kind.shared and "global" in request.capabilities else request.container_id
    return checked_key(SubscriptionKey(namespace, scope, subscription_name(request.link_name, kind.shared)))


def checked_key(key: SubscriptionKey) -> SubscriptionKey:
    """``key``, when the store can keep its name and ClientID (``mapping.store_values``: 1 to 512 characters of
    text without U+0000; an empty ClientID is the connection's and is taken as it is).

    Raises:
        Refused: ``amqp:invalid-field`` naming the field and its range.
    """
    check_text("subscription name", key.name, MAX_SUBSCRIPTION_NAME)
    if key.client_id:
        check_text("ClientID (container-id) of a subscription", key.client_id, MAX_CLIENT_ID)
    return key


def decide_subscribe(request: SubscribeRequest, existing: Existing | None) -> Decision:
    """What to do with a topic consumer attach, given the subscription its key names (see the table above).

    Raises:
        Refused: ``amqp:illegal-state`` for a kind clash or changed details while consumers are attached,
            ``amqp:resource-locked`` for a second consumer on a non-shared durable subscription.
    """
    kind = kind_of(request.durable, request.capabilities)
    key = key_for(request)
    if key is None or existing is None:
        return Decision(Action.CREATE, kind, key)
    if existing.kind.shared != kind.shared:
        have = "shared" if existing.kind.shared else "non-shared"
        raise Refused(
            ILLEGAL_STATE,
            f"{key.describe()} exists as a {have} durable subscription; JMS does not allow shared and non-shared "
            "durable subscriptions with one name",
        )
    same = existing.details == request.details
    if existing.consumers == 0:
        return Decision(Action.ATTACH if same else Action.REPLACE, kind, key)
    if not kind.shared:
        raise Refused(RESOURCE_LOCKED, f"{key.describe()} already has an active consumer")
    if not same:
        raise Refused(
            ILLEGAL_STATE,
            f"unable to change {key.describe()} (topic, selector or no-local): it has active consumers",
        )
    return Decision(Action.ATTACH, kind, key)


def lookup_key(link_name: str, container_id: str) -> SubscriptionKey:
    """The durable subscription an unsubscribe lookup (null source, §3.2) names.

    The ``[shared, global]`` link capability cannot be read with python-proton (Appendix A); the ``|global``
    suffix the client then uses is exact for Qpid JMS, which forbids ``|`` in subscription names.
    """
    if SEPARATOR in link_name:
        return SubscriptionKey(DURABLE, GLOBAL, link_name.split(SEPARATOR, 1)[0])
    return SubscriptionKey(DURABLE, container_id, link_name)


def decide_lookup(key: SubscriptionKey, existing: Existing | None) -> Existing:
    """Answer a lookup attach: the subscription to describe in the reply source, or refuse.

    Raises:
        Refused: ``amqp:not-found`` when no durable subscription has that key.
    """
    if existing is None:
        raise Refused(NOT_FOUND, f"no {key.describe()}")
    return existing


def decide_unsubscribe(key: SubscriptionKey, existing: Existing | None) -> None:
    """The lookup link is being closed (detach closed=true): delete the subscription, or refuse while it is in
    use (§3.2; Artemis silently keeps it and reports success, §10.4).

    Raises:
        Refused: ``amqp:resource-locked`` while consumers are attached, ``amqp:not-found`` if it went away.
    """
    if existing is None:
        raise Refused(NOT_FOUND, f"no {key.describe()}")
    if existing.consumers > 0:
        raise Refused(RESOURCE_LOCKED, "Cannot unsubscribe: subscription has active consumers")


def lookup_source_capabilities(key: SubscriptionKey, kind: Kind) -> list[str]:
    """Capabilities of the lookup reply's source (informational; the client checks only that it is there)."""
    capabilities = ["topic"]
    if kind.shared:
        capabilities.append("shared")
        if key.client_id is None:
            capabilities.append("global")
    return capabilities


def queue_name(key: SubscriptionKey, kind: Kind) -> str:
    """The name ActiveMQ Artemis gives the queue of this subscription (its AMQP naming, without core subscription
    naming), so ``<topic>::<queue name>`` names the same subscription on both brokers: ``<ClientID>.<name>``
    (``<name>`` when global), then ``:shared-volatile`` for a shared volatile one and ``:global`` for a global
    shared one (``app.s``, ``s:global``, ``app.s:shared-volatile``, ``s:shared-volatile:global``)."""
    name = key.name if key.client_id is None else f"{key.client_id}.{key.name}"
    if kind.shared:
        if kind is Kind.SHARED_VOLATILE:
            name += ":shared-volatile"
        if key.client_id is None:
            name += ":global"
    return name


def removed_on_detach(kind: Kind, closed: bool, remaining_consumers: int) -> bool:
    """Whether a subscription goes away when one of its consumer links ends (§2.6, §10.4).

    Plain and shared volatile subscriptions end with their last link, however it ends. A durable subscription
    ends only when its last consumer *closes* the link (detach closed=true) — Qpid JMS never does that (it uses
    the lookup link), other AMQP clients do to destroy a durable terminus — and never on detach(closed=false),
    session end or connection loss.
    """
    if remaining_consumers > 0:
        return False
    if kind.durable:
        return closed
    return True
