"""gateway.console_access without a server: the $management rule (CONTROL_SERVER) for reading the console, and a
checked password remembered."""

from __future__ import annotations

from subgate.engine.login_throttle import ThrottleRule
from subgate.gateway.console_access import ConsoleAccess
from subgate.mapping.permissions import OPEN_POLICY, PRINCIPAL, Grant, Permission, Policy


class Passwords:
    def __init__(self, anonymous: bool) -> None:
        self.anonymous = anonymous
        self.checks: list[str] = []

    def check_password(self, username: str, password: str) -> bool:
        self.checks.append(username)
        return password == f"{username}-secret"

    def anonymous_allowed(self) -> bool:
        return self.anonymous


def test_an_open_store_reads_without_a_login():
    assert ConsoleAccess(Passwords(anonymous=True), lambda: OPEN_POLICY).verdict(None) == 200


def test_with_users_it_takes_a_login_and_control_server():
    policy = Policy(
        principal_count=3,
        grants=(Grant(PRINCIPAL, "carol", Permission.CONTROL_SERVER),),
        roles_by_principal={"admin": frozenset({"admin"}), "bob": frozenset(), "carol": frozenset()},
    )
    passwords = Passwords(anonymous=False)
    access = ConsoleAccess(passwords, lambda: policy)
    assert access.verdict(None) == 401
    assert access.verdict(("admin", "wrong")) == 401
    assert access.verdict(("bob", "bob-secret")) == 403
    assert access.verdict(("admin", "admin-secret")) == 200
    assert access.verdict(("carol", "carol-secret")) == 200
    assert access.verdict(("admin", "admin-secret")) == 200
    assert passwords.checks == ["admin", "bob", "admin", "carol"]  # the second admin login was remembered


def test_anonymous_needs_a_grant_of_its_own_when_anonymous_access_is_on():
    passwords = Passwords(anonymous=True)
    policy = Policy(principal_count=1, roles_by_principal={"admin": frozenset({"admin"})})
    assert ConsoleAccess(passwords, lambda: policy).verdict(None) == 403
    granted = Policy(principal_count=1, grants=(Grant(PRINCIPAL, "anonymous", Permission.CONTROL_SERVER),))
    assert ConsoleAccess(passwords, lambda: granted).verdict(None) == 200


def test_failed_logins_past_the_free_ones_are_answered_429_unchecked_for_the_delay():
    policy = Policy(principal_count=1, roles_by_principal={"admin": frozenset({"admin"})})
    passwords = Passwords(anonymous=False)
    access = ConsoleAccess(passwords, lambda: policy, ThrottleRule(free=2, base=60.0, ceiling=60.0))
    assert access.verdict(("admin", "admin-secret"), "10.0.0.1") == 200  # remembered from now on
    assert [access.verdict(("admin", f"guess-{n}"), "10.0.0.9") for n in range(3)] == [401, 401, 401]
    checked = len(passwords.checks)
    assert access.verdict(("admin", "guess-3"), "10.0.0.9") == 429  # the user is held: not checked
    assert access.verdict(("carol", "carol-secret"), "10.0.0.9") == 429  # the address too
    assert len(passwords.checks) == checked
    assert access.verdict(("admin", "admin-secret"), "10.0.0.1") == 200  # a password known right still reads
    assert access.verdict(("dave", "dave-secret"), "10.0.0.2") == 403  # elsewhere, another user: checked
