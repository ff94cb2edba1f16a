"""Who may read the web console (``GET /api/console``): the ``$management`` rule, decided on an HTTP thread.

Owns ``ConsoleAccess``. The console shows what ``$management`` shows (connections with their users and addresses,
queues, temporary ones included, subscriptions), so reading it takes what attaching to ``$management`` takes:
``CONTROL_SERVER`` (``gateway.attach``), asked of the policy in force (``Authority.policy``, an immutable
``mapping.permissions.Policy``: one attribute read). An HTTP request is a principal as an AMQP connection is:

* with HTTP Basic credentials, the principal they name once its password checks out against the store
  (``Authenticator.check_password``: SASL PLAIN's check, on the calling HTTP worker, never the reactor);
  a wrong password is 401;
* without, the anonymous principal when anonymous access is allowed (``Authenticator.anonymous_allowed``), else
  401.

Then 200 when the policy grants that principal ``CONTROL_SERVER``, else 403. While the store has no principal the
policy is open and anonymous access allowed: the console reads without a login, as ``$management`` does.

Failed logins count as AMQP ones do (``engine.login_throttle``, the same ``--login-*`` rule, counters of their own):
where an AMQP failure's answer is held back ``delay`` seconds, an HTTP worker is not held; instead, for ``delay``
seconds after such a failure, a login from that address or for that user is answered 429 without its password
being checked (a password remembered as right still reads).

A password that checked out is remembered for ``REMEMBER_FOR`` seconds (by user and an HMAC of the password with a
secret of this process), so a page polling each second costs one password hash every ``REMEMBER_FOR`` seconds;
a password changed or a user removed meanwhile stops working for the console within that time (a grant taken away
at once: the policy is asked on every request).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from typing import Protocol

from subgate.engine.login_throttle import LoginThrottle, ThrottleRule
from subgate.mapping.permissions import Permission, Policy

REMEMBER_FOR = 30.0  # seconds
REMEMBERED_MAX = 1000  # remembered logins at most (then all are forgotten)


class PasswordCheck(Protocol):
    """What ``gateway.auth.Authenticator`` answers (any thread)."""

    def check_password(self, username: str, password: str) -> bool: ...

    def anonymous_allowed(self) -> bool: ...


class ConsoleAccess:
    """``verdict`` is ``metrics.console.Console.read_access`` (see the module docstring)."""

    def __init__(self, auth: PasswordCheck, policy: Callable[[], Policy], rule: ThrottleRule | None = None) -> None:
        self._auth = auth
        self._policy = policy
        self._secret = secrets.token_bytes(32)
        self._lock = threading.Lock()  # guards the three below
        self._remembered: dict[tuple[str, bytes], float] = {}  # (user, HMAC of the password) -> until
        self._throttle = LoginThrottle(rule, max_keys=REMEMBERED_MAX * 10)
        self._held: dict[tuple[str, str], float] = {}  # ("address"|"user", value) -> no login checked until

    def verdict(self, credentials: tuple[str, str] | None, address: str = "") -> int:
        """200, 401, 403 or 429 for a request with these (user, password), or None for none, from ``address``."""
        if credentials is None:
            if not self._auth.anonymous_allowed():
                return 401
            principal: str | None = None
        else:
            login = self._login(*credentials, address)
            if login != 200:
                return login
            principal = credentials[0]
        return 200 if self._policy().allows(principal, Permission.CONTROL_SERVER) else 403

    def _login(self, user: str, password: str, address: str) -> int:
        """200 (the password is right), 401 (it is not) or 429 (not checked: too many failures lately)."""
        key = (user, hmac.new(self._secret, password.encode(errors="surrogatepass"), hashlib.sha256).digest())
        keys = [("address", address), ("user", user)]
        now = time.monotonic()
        with self._lock:
            if self._remembered.get(key, 0.0) > now:
                return 200
            if any(self._held.get(held, 0.0) > now for held in keys):
                return 429
        if not self._auth.check_password(user, password):
            with self._lock:
                delay = self._throttle.failed(address, user, now).delay
                if delay > 0:
                    if len(self._held) >= REMEMBERED_MAX:
                        self._held = {held: until for held, until in self._held.items() if until > now}
                    for held in keys:
                        self._held[held] = now + delay
            return 401
        with self._lock:
            self._throttle.succeeded(user)
            if len(self._remembered) >= REMEMBERED_MAX:
                self._remembered.clear()
            self._remembered[key] = now + REMEMBER_FOR
        return 200
