"""The store's owner: the lease row of the one server that serves a store (table ``server_lease``).

Owns the rules of the lease, not its timing: a server ``claim``s the lease before it touches the store, and
the claim is refused (``StoreInUse``) while another owner is live. An owner is live while its ``expires_ms`` is
in the future, except that an owner recorded on this host whose pid no longer runs is dead at once (a server
killed with SIGKILL is restarted without waiting for its lease to run out). ``renew`` pushes the expiry forward
(``gateway.ownership`` calls it from its own thread, never the reactor's), ``set_address`` records the port
once the server listens, and ``release`` deletes the row on a clean stop. The command line calls ``live_owner``
to find the server that owns a store. Times are milliseconds since the epoch from the callers' clocks, so hosts
sharing a store need clocks that agree to within a few seconds.

The caller owns the transaction, as for every repository.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from subgate.storage.errors import StoreInUse
from subgate.storage.models import ServerLease

LEASE_ID = 1  # one owner per store
WILDCARDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds (or asks for) the lease; ``listen_port`` is 0 until the server listens."""

    token: str
    name: str
    host: str
    pid: int
    listen_host: str
    listen_port: int
    expires_ms: int = 0

    @property
    def address(self) -> str:
        """Where a client on this host reaches it: a wildcard listen address means loopback here, the owner's
        host name elsewhere."""
        host = self.listen_host
        if host in WILDCARDS:
            host = "127.0.0.1" if self.host == socket.gethostname() else self.host
        return f"[{host}]:{self.listen_port}" if ":" in host else f"{host}:{self.listen_port}"

    def describe(self) -> str:
        where = self.address if self.listen_port else "(still starting)"
        return f"server {self.name!r} (pid {self.pid} on {self.host}, listening on {where})"


def this_process(token: str, name: str, listen_host: str, listen_port: int) -> Owner:
    return Owner(token, name, socket.gethostname(), os.getpid(), listen_host, listen_port)


def pid_running(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def is_live(owner: Owner, now_ms: int) -> bool:
    if owner.expires_ms <= now_ms:
        return False
    return owner.host != socket.gethostname() or pid_running(owner.pid)


def live_owner(session: Session, now_ms: int) -> Owner | None:
    """The store's live owner, or None when no server owns it."""
    row = session.get(ServerLease, LEASE_ID)
    if row is None:
        return None
    owner = _owner(row)
    return owner if is_live(owner, now_ms) else None


def claim(session: Session, me: Owner, now_ms: int, lease_ms: int) -> None:
    """Take the lease for ``me`` until ``now_ms + lease_ms``.

    Raises:
        StoreInUse: another live server holds it (or took it at the same moment).
    """
    row = session.get(ServerLease, LEASE_ID, with_for_update=True)
    fields = _fields(me, now_ms + lease_ms)
    if row is None:
        session.add(ServerLease(id=LEASE_ID, **fields))
        try:
            session.flush()
        except IntegrityError as exc:
            raise StoreInUse("another server claimed the store at the same moment") from exc
        return
    holder = _owner(row)
    if holder.token != me.token and is_live(holder, now_ms):
        raise StoreInUse(f"the store is in use by {holder.describe()}")
    taken = session.execute(
        update(ServerLease).where(ServerLease.id == LEASE_ID, ServerLease.token == holder.token).values(**fields)
    )
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        raise StoreInUse("another server claimed the store at the same moment")


def renew(session: Session, token: str, expires_ms: int) -> bool:
    """Push the expiry of ``token``'s lease forward; False when the lease is no longer its own."""
    stmt = update(ServerLease).where(ServerLease.id == LEASE_ID, ServerLease.token == token)
    return bool(session.execute(stmt.values(expires_ms=expires_ms)).rowcount == 1)  # type: ignore[attr-defined]


def set_address(session: Session, token: str, host: str, port: int) -> None:
    stmt = update(ServerLease).where(ServerLease.id == LEASE_ID, ServerLease.token == token)
    session.execute(stmt.values(listen_host=host, listen_port=port))


def release(session: Session, token: str) -> bool:
    """Delete ``token``'s lease; False when it did not hold it."""
    stmt = delete(ServerLease).where(ServerLease.id == LEASE_ID, ServerLease.token == token)
    return bool(session.execute(stmt).rowcount == 1)  # type: ignore[attr-defined]


def _fields(me: Owner, expires_ms: int) -> dict[str, object]:
    return {
        "token": me.token,
        "name": me.name,
        "host": me.host,
        "pid": me.pid,
        "listen_host": me.listen_host,
        "listen_port": me.listen_port,
        "started_at": datetime.now(UTC),
        "expires_ms": expires_ms,
    }


def _owner(row: ServerLease) -> Owner:
    return Owner(row.token, row.name, row.host, row.pid, row.listen_host, row.listen_port, row.expires_ms)
