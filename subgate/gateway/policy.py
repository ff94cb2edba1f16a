"""The running server's permission policy, read from the store off the reactor thread.

Owns keeping ``mapping.permissions.Policy`` current: it is read once, synchronously, before the reactor runs,
and again on a worker thread whenever ``refresh`` is called (every ``policy_refresh_interval`` seconds from the
broker's housekeeping, and on the management operation ``RELOAD`` of type ``permissions``). A freshly read
policy reaches the reactor as the ``policy_loaded`` application event; a failed read keeps the last policy and
is logged. The reactor thread never waits for the store.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from proton.reactor import ApplicationEvent, EventInjector
from sqlalchemy.orm import Session, sessionmaker

from subgate.mapping.permissions import Policy
from subgate.storage.errors import log_store_failure
from subgate.storage.permissions import load_policy

log = logging.getLogger("subgate.policy")


def read_policy(sessions: sessionmaker[Session]) -> Policy:
    with sessions() as session:
        return Policy(*load_policy(session))


class PolicyLoader:
    def __init__(self, sessions: sessionmaker[Session], injector: EventInjector) -> None:
        self._sessions = sessions
        self._injector = injector
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="subgate-policy")
        self._busy = threading.Lock()

    def load_now(self) -> Policy:
        """Read the policy on the calling thread (start-up, before the reactor runs)."""
        return read_policy(self._sessions)

    def publish_now(self) -> None:
        """Read the policy on the calling (worker) thread and hand it to the reactor (gateway.auth calls this
        when principals appear or disappear, before its verdict)."""
        try:
            policy = read_policy(self._sessions)
        except Exception as exc:  # the store may be briefly unavailable: keep the last policy
            log_store_failure(log, "could not read permissions from the store", exc)
            return
        self._injector.trigger(ApplicationEvent("policy_loaded", subject=policy))

    def refresh(self) -> None:
        """Read the policy again on the worker thread; at most one read is queued at a time."""
        if self._busy.acquire(blocking=False):
            self._pool.submit(self._load)

    def _load(self) -> None:
        try:
            self.publish_now()
        finally:
            self._busy.release()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
