"""Authorisation of the running broker: the policy in force and the checks every entry point asks of it.

Owns the current ``mapping.permissions.Policy`` (replaced whole when the store's is read again), which
connection owns each temporary node, and the questions the attach and publish handlers ask: may this
connection do this, may it do it on this node (plus MODIFY_TOPIC when the attach would create the node; only its
owner may receive from a temporary node), may it delete this subscription, and which topics may it
read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from subgate.gateway.links import ConnectionState
from subgate.mapping.addresses import TEMPORARY_PREFIX, NodeDecision, check_temporary_use
from subgate.mapping.permissions import OPEN_POLICY, Permission, Policy

if TYPE_CHECKING:
    from subgate.gateway.subscriptions import Subscription


class Authority:
    """The policy in force (see the module docstring)."""

    __slots__ = ("policy", "_temporary_owners")

    def __init__(self, policy: Policy = OPEN_POLICY) -> None:
        self.policy = policy
        self._temporary_owners: dict[str, ConnectionState] = {}  # temporary node name -> the connection that made it

    def own_temporary(self, name: str, owner: ConnectionState) -> None:
        self._temporary_owners[name] = owner

    def forget_temporary(self, name: str) -> None:
        self._temporary_owners.pop(name, None)

    def owned_by(self, state: ConnectionState) -> Callable[[str], bool]:
        """Whether ``state``'s connection made the temporary node at an address."""
        owners = self._temporary_owners
        return lambda address: owners.get(address) is state

    def use(self, policy: Policy) -> None:
        """A policy freshly read from the store decides every attach from now on."""
        self.policy = policy

    def check(
        self, state: ConnectionState, permission: Permission, path: str | None = None, kind: str | None = None
    ) -> None:
        """Raises: Refused(amqp:unauthorized-access) when the connection's principal lacks ``permission``."""
        self.policy.check(state.user, permission, path, kind)

    def check_node(self, state: ConnectionState, permission: Permission, decision: NodeDecision) -> None:
        """``permission`` on a node's address, plus MODIFY_TOPIC when the attach would create it. Temporary
        nodes are not in the permission tree: anyone may send to one, only the connection that created it may
        receive from it (mapping.addresses.check_temporary_use; docs/permissions.md)."""
        if decision.address.startswith(TEMPORARY_PREFIX):
            owner = self._temporary_owners.get(decision.address)
            receiving = permission is not Permission.UPDATE_TOPIC
            check_temporary_use(decision.address, owned=owner is state, receiving=receiving)
            return
        if decision.create:
            self.check(state, Permission.MODIFY_TOPIC, decision.address, decision.kind)
        self.check(state, permission, decision.address, decision.kind)

    def check_unsubscribe(self, state: ConnectionState, sub: Subscription) -> None:
        """May this connection delete ``sub`` (close an unsubscribe lookup of it, or replace it by attaching under
        its name with another topic, selector or no-local)? Only a principal that may subscribe there:
        SELECT_TOPIC and READ_TOPIC on its topic, or SELECT_TOPIC on the prefix of the selector it is on. A
        subscription on a temporary topic is its connection's, outside the tree."""
        if sub.selector_sub is not None:
            self.check(state, Permission.SELECT_TOPIC, sub.selector_sub.selector.prefix)
        elif not sub.topic.name.startswith(TEMPORARY_PREFIX):
            self.check(state, Permission.SELECT_TOPIC, sub.topic.name)
            self.check(state, Permission.READ_TOPIC, sub.topic.name)

    def readable(self, state: ConnectionState) -> Callable[[str], bool]:
        """Which topics a selector subscription or fetch of this connection may read (READ_TOPIC)."""
        user = state.user
        return lambda path: self.policy.allows(user, Permission.READ_TOPIC, path)
