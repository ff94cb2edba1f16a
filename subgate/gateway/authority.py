"""Authorisation of the running broker: the policy in force and the checks every entry point asks of it.

Owns the current ``mapping.permissions.Policy`` (replaced whole when the store's is read again) and the three
questions the attach and publish handlers ask: may this connection do this, may it do it on this node (plus
MODIFY_TOPIC when the attach would create the node), and which topics may it read.
"""

from __future__ import annotations

from collections.abc import Callable

from subgate.gateway.links import ConnectionState
from subgate.mapping.addresses import TEMPORARY_PREFIX, NodeDecision
from subgate.mapping.permissions import OPEN_POLICY, Permission, Policy


class Authority:
    """The policy in force (see the module docstring)."""

    __slots__ = ("policy",)

    def __init__(self, policy: Policy = OPEN_POLICY) -> None:
        self.policy = policy

    def use(self, policy: Policy) -> None:
        """A policy freshly read from the store decides every attach from now on."""
        self.policy = policy

    def check(self, state: ConnectionState, permission: Permission, path: str | None = None) -> None:
        """Raises: Refused(amqp:unauthorized-access) when the connection's principal lacks ``permission``."""
        self.policy.check(state.user, permission, path)

    def check_node(self, state: ConnectionState, permission: Permission, decision: NodeDecision) -> None:
        """``permission`` on a node's address, plus MODIFY_TOPIC when the attach would create it. Temporary
        nodes belong to the connection that made them and are not checked (docs/permissions.md)."""
        if decision.address.startswith(TEMPORARY_PREFIX):
            return
        if decision.create:
            self.check(state, Permission.MODIFY_TOPIC, decision.address)
        self.check(state, permission, decision.address)

    def readable(self, state: ConnectionState) -> Callable[[str], bool]:
        """Which topics a selector subscription or fetch of this connection may read (READ_TOPIC)."""
        user = state.user
        return lambda path: self.policy.allows(user, Permission.READ_TOPIC, path)
