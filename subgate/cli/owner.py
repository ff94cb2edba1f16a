"""Which server to talk to: the one that owns the store (its lease, ``storage.lease``), or ``--server``.

Owns the decision ``running_server`` (cli.subscriptions) acts on, for every command that can work either
through a running server or on the store directly:

* the store has a live owner and no ``--server`` was given: talk to the owner's address; when nothing answers
  there, refuse (a live lease means a server is serving the store, and an offline write would change the
  store behind it);
* the store has a live owner and ``--server`` names another address: refuse before connecting, so no
  credentials are sent to a server that does not own the store (the message names the owner's address);
* no live owner, ``--server`` given (flag, ``SUBGATE_SERVER``/``SUBGATE_LISTEN``, the config's ``listen``): try
  it, and use the store when nothing listens there (as before the lease existed);
* no live owner and no ``--server``: nothing to connect to (no guess at 127.0.0.1:5672): use the store.

Reading the lease never creates a SQLite file, and a store whose schema predates the lease has no owner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from subgate.storage.lease import WILDCARDS, Owner

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True, slots=True)
class Decision:
    """Connect to ``address`` (None: use the store); ``owner`` is the store's live owner, if any."""

    address: tuple[str, int] | None
    owner: Owner | None


def store_owner(url: str) -> Owner | None:
    """The live owner of the store at ``url``, or None (store errors propagate, translated by the caller)."""
    from sqlalchemy import inspect

    from subgate.storage.db import make_engine, missing_sqlite_file, session_factory
    from subgate.storage.lease import live_owner

    if missing_sqlite_file(url):
        return None
    engine = make_engine(url)
    try:
        if not inspect(engine).has_table("server_lease"):
            return None
        with session_factory(engine)() as session:
            return live_owner(session, int(time.time() * 1000))
    finally:
        engine.dispose()


def owner_endpoint(owner: Owner) -> tuple[str, int]:
    host, _, port = owner.address.rpartition(":")
    return host.strip("[]"), int(port)


def same_server(host: str, port: int, owner: Owner) -> bool:
    """Whether HOST:PORT plausibly reaches ``owner``: same port, and the same host, both loopback, or an owner
    listening on every interface."""
    if port != owner.listen_port:
        return False
    owner_host, _ = owner_endpoint(owner)
    if owner.listen_host in WILDCARDS or host == owner_host:
        return True
    return host in LOOPBACK and owner_host in LOOPBACK


def decide(server: tuple[str, int] | None, owner: Owner | None) -> Decision:
    """Where to go (see the module docstring); ``server`` is the explicit --server, if any.

    Raises:
        ValueError: ``server`` disagrees with the store's live owner (the message says why).
    """
    if owner is not None:
        if server is not None and not same_server(*server, owner):
            raise ValueError(
                f"--server {server[0]}:{server[1]} is not the server that owns the store: that is "
                f"{owner.describe()}; not connecting (no credentials sent). Leave out --server to use the "
                "store's server, or give the --store of the server you mean"
            )
        return Decision(owner_endpoint(owner), owner)
    return Decision(server, None)
