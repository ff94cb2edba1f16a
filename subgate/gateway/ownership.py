"""The running server's hold on its store: claim the lease at start-up, renew it, release it on a clean stop.

Owns the timing around ``storage.lease`` (which owns the rules). ``claim`` runs at start-up, before the server
reads or writes anything else, so a second server on the same store stops there with ``StoreInUse``. Renewal
runs on its own thread (``subgate-lease``) with its own sessions: the reactor never waits on the database.
A server that loses its lease (it was paused past the expiry and another took over) logs an error each time
it tries to renew; it does not stop by itself.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

from sqlalchemy.orm import Session, sessionmaker

from subgate.storage import lease
from subgate.storage.errors import log_store_failure

log = logging.getLogger("subgate.ownership")

LEASE_SECONDS = 15.0  # how long a lease outlives its last renewal (a dead owner on another host blocks this long)
RENEW_SECONDS = 3.0


def now_ms() -> int:
    return int(time.time() * 1000)


class StoreOwnership:
    """The lease of one server process on its store (see the module docstring)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        name: str,
        listen_host: str,
        listen_port: int,
        lease_seconds: float = LEASE_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
    ) -> None:
        self._sessions = sessions
        self.me = lease.this_process(uuid.uuid4().hex, name, listen_host, listen_port)
        self._lease_ms = int(lease_seconds * 1000)
        self._renew_seconds = renew_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False

    def claim(self) -> None:
        """Raises StoreInUse while another live server owns the store."""
        with self._sessions.begin() as session:
            lease.claim(session, self.me, now_ms(), self._lease_ms)
        self._held = True

    def set_address(self, host: str, port: int) -> None:
        with self._sessions.begin() as session:
            lease.set_address(session, self.me.token, host, port)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="subgate-lease", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop renewing and delete the lease (a clean stop: the store is free at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if not self._held:
            return
        self._held = False
        try:
            with self._sessions.begin() as session:
                lease.release(session, self.me.token)
        except Exception as exc:  # the store went away: the lease runs out by itself
            expires = f"it expires in {self._lease_ms / 1000:.0f}s"
            log_store_failure(log, f"could not release the store's lease; {expires}", exc)

    def _run(self) -> None:
        while not self._stop.wait(self._renew_seconds):
            try:
                with self._sessions.begin() as session:
                    still_mine = lease.renew(session, self.me.token, now_ms() + self._lease_ms)
            except Exception as exc:
                log_store_failure(log, "could not renew the store's lease", exc)
                continue
            if not still_mine:
                log.error("this server no longer holds the store's lease: another server took the store over")
