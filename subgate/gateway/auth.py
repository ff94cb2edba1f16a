"""Password checks off the reactor thread.

Owns the SASL verdict: a worker thread looks the principal up in the store and verifies the password hash (for
EXTERNAL: that the name the client certificate gives is a principal; gateway.sasl_phase supplies it), then
hands ``(request, authenticated, username, keys)`` back to the reactor as the ``sasl_verdict`` application event.
For SCRAM-SHA-256 the worker's part is the first step only: ``keys`` are the user's SCRAM keys, or made-up ones
(``engine.scram.fake_keys``, from a secret of this process) for a user who is unknown or whose row still holds a
legacy hash, so that the exchange looks the same either way; the proof is checked on the reactor (two HMACs).
A PLAIN login that matches a legacy hash rewrites the row to the SCRAM encoding (``storage.passwords``).
Anonymous access follows the ``allow_anonymous`` setting, or, when that is unset, is allowed only while the
store has no principal at all (so ``make run`` works out of the box and adding a user locks the door).
Whenever a check finds that principals have appeared or all gone, ``on_principals_changed`` runs on the worker
thread before the verdict is handed back, so the permission policy it reloads (gateway.policy) reaches the
reactor ahead of the connection it concerns.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from proton.reactor import ApplicationEvent, EventInjector
from sqlalchemy.orm import Session, sessionmaker

from subgate.engine.scram import MECHANISM as SCRAM
from subgate.engine.scram import ScramKeys, fake_keys
from subgate.gateway.sasl import CredentialsReceived
from subgate.storage.errors import log_store_failure
from subgate.storage.passwords import (
    DEFAULT_ITERATIONS,
    is_legacy,
    scram_keys,
    upgraded_hash,
    verify_password,
)
from subgate.storage.principals import count_principals, find_principal, replace_password_hash

log = logging.getLogger("subgate.auth")


class Authenticator:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        injector: EventInjector,
        allow_anonymous: bool | None,
        on_principals_changed: Callable[[], None] | None = None,
    ) -> None:
        self._sessions = sessions
        self._injector = injector
        self._allow_anonymous = allow_anonymous
        self._on_principals_changed = on_principals_changed
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="subgate-auth")
        self._lock = threading.Lock()
        self._withdrawn: set[int] = set()  # requests whose connection ended before a worker got to them
        self._fake_secret = secrets.token_bytes(32)  # made-up SCRAM salts: stable while this process runs
        self._principals_exist = self._count() > 0

    def anonymous_allowed(self) -> bool:
        """Answerable on the reactor thread without touching the store."""
        if self._allow_anonymous is not None:
            return self._allow_anonymous
        return not self._principals_exist

    def refresh(self) -> None:
        """Re-read whether principals exist (on a worker thread)."""
        self._pool.submit(self._refresh)

    def _refresh(self) -> None:
        try:
            exist = self._count() > 0
        except Exception as exc:  # the store may be briefly unavailable; keep the last answer
            log_store_failure(log, "could not count principals", exc)
            return
        self._set_principals_exist(exist)

    def _set_principals_exist(self, exist: bool) -> None:
        changed, self._principals_exist = exist != self._principals_exist, exist
        if changed and self._on_principals_changed is not None:
            self._on_principals_changed()

    def _count(self) -> int:
        with self._sessions() as session:
            return count_principals(session)

    def submit(self, request: int, credentials: CredentialsReceived) -> None:
        """Check ``credentials`` on a worker; the verdict comes back tagged with ``request`` (a number, so no
        reactor object ever sits on a worker thread)."""
        self._pool.submit(self._check, request, credentials)

    def withdraw(self, request: int) -> None:
        """The connection behind ``request`` is gone: do not spend a password hash on it (a client that sends
        PLAIN credentials and hangs up at once must not queue work ahead of everybody else's login)."""
        with self._lock:
            self._withdrawn.add(request)

    def _check(self, request: int, credentials: CredentialsReceived) -> None:
        with self._lock:
            if request in self._withdrawn:
                self._withdrawn.discard(request)
                return
        keys: ScramKeys | None = None
        try:
            if credentials.mechanism == SCRAM:
                authenticated, username, keys = True, credentials.username, self._scram_keys(credentials.username)
            else:
                authenticated, username = self._verify(credentials)
        except Exception as exc:
            log_store_failure(log, "authentication check failed", exc)
            authenticated, username, keys = False, credentials.username, None
        self._injector.trigger(ApplicationEvent("sasl_verdict", subject=(request, authenticated, username, keys)))

    def _scram_keys(self, username: str | None) -> ScramKeys:
        """The user's SCRAM keys, or made-up ones that can never log in (same cost: one lookup, no hashing)."""
        name = username or ""
        with self._sessions() as session:
            principal = find_principal(session, name)
        keys = None if principal is None else scram_keys(principal.password_hash)
        if principal is not None:
            self._set_principals_exist(True)
            if keys is None and is_legacy(principal.password_hash):
                log.info(
                    "user %r has a password hash from before SCRAM-SHA-256: it can log in by SCRAM after one PLAIN "
                    "login or 'subgate users passwd'",
                    name,
                )
        return keys or fake_keys(self._fake_secret, name, DEFAULT_ITERATIONS)

    def check_password(self, username: str, password: str) -> bool:
        """A PLAIN login's verdict, on the calling thread (an HTTP worker: never the reactor): the same lookup,
        hash check and legacy-hash rewrite as a SASL PLAIN login. A store failure is logged and refuses."""
        try:
            return self._verify(CredentialsReceived("PLAIN", username, password, None))[0]
        except Exception as exc:
            log_store_failure(log, "authentication check failed", exc)
            return False

    def _verify(self, credentials: CredentialsReceived) -> tuple[bool, str | None]:
        if credentials.mechanism == "ANONYMOUS":
            self._refresh()
            return self.anonymous_allowed(), None
        if credentials.mechanism == "EXTERNAL":  # the TLS layer vouches for the name: it must be a principal
            if not credentials.username:
                return False, None
            with self._sessions() as session:
                known = find_principal(session, credentials.username) is not None
            if known:
                self._set_principals_exist(True)
            return known, credentials.username
        if credentials.mechanism != "PLAIN" or not credentials.username:
            return False, credentials.username
        with self._sessions() as session:
            principal = find_principal(session, credentials.username)
        if principal is None:
            verify_password(credentials.password or "", _DUMMY_HASH)  # same cost whether or not the user exists
            return False, credentials.username
        self._set_principals_exist(True)
        password = credentials.password or ""
        if not verify_password(password, principal.password_hash):
            return False, credentials.username
        self._upgrade(principal.name, password, principal.password_hash)
        return True, credentials.username

    def _upgrade(self, name: str, password: str, legacy: str) -> None:
        """Rewrite a legacy hash that ``password`` just matched to the SCRAM encoding (only if the row still holds
        it: a password set meanwhile wins). A failure is logged; the login stands."""
        new = upgraded_hash(password, legacy)
        if new is None:
            return
        try:
            with self._sessions.begin() as session:
                replaced = replace_password_hash(session, name, legacy, new)
        except Exception:
            log.exception("could not rewrite the password hash of %r", name)
            return
        if replaced:
            log.info("rewrote the password hash of %r for SCRAM-SHA-256", name)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


# A well-formed hash of the default cost that no password matches (its StoredKey is zeros, no SHA-256 digest).
_ZEROS = "A" * 43 + "="
_DUMMY_HASH = f"scram_sha256${DEFAULT_ITERATIONS}$AAAAAAAAAAAAAAAAAAAAAA==${_ZEROS}${_ZEROS}"
