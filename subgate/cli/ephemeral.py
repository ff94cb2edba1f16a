"""``subgate serve --ephemeral``: the server's tie to the process that started it, and the line announcing it.

Owns the two things a test suite needs from a throwaway server besides its store (``storage.ephemeral``):

- **Gone with its parent.** On Linux ``prctl(PR_SET_PDEATHSIG, SIGUSR2)`` asks the kernel for a signal when
  the parent ends, and a watchdog thread polls ``getppid()`` (every ``WATCH_SECONDS``) for what the signal
  misses (a parent already gone before the ``prctl``, a platform without it). The kernel sends the death signal
  when the parent *thread* that started us ends, even while its process lives on (a JVM that starts the server
  from a pool thread); so the signal only wakes a check of ``getppid()``, which changes only when the whole
  parent process is gone. Either way the server sends itself SIGTERM: it stops, and the store's folder is
  removed.
  The parent is the one the server finds at start: a server started detached (its parent already gone) was
  adopted and is tied to nothing.
- **One line on stdout** once the listener is open (docs/jms.md, "A broker for test suites")::

    {"url": "amqp://127.0.0.1:PORT", "host": "127.0.0.1", "port": PORT, "amqps": null, "http": null,
     "pid": PID, "store": "sqlite:///..."}

  ``amqps`` and ``http`` are set when ``--tls-listen`` and ``--http`` are given (port 0 there too reports the
  real port). The log stays on stderr.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subgate.gateway.server import Server

PR_SET_PDEATHSIG = 1
WATCH_SECONDS = 0.25


DEATH_SIGNAL = signal.SIGUSR2


def _death_signal() -> bool:
    """Ask the kernel for DEATH_SIGNAL when the parent thread ends (Linux); False where it cannot be had."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _stop_if_orphaned(parent: int) -> bool:
    if os.getppid() == parent:
        return False
    os.kill(os.getpid(), signal.SIGTERM)
    return True


def _watch(parent: int) -> None:
    while not _stop_if_orphaned(parent):
        time.sleep(WATCH_SECONDS)


def tie_to_parent(parent: int) -> None:
    """End this process (SIGTERM to itself) when process ``parent`` (its parent at start) is gone. Call it from
    the main thread (it installs a signal handler)."""
    signal.signal(DEATH_SIGNAL, lambda *_: _stop_if_orphaned(parent))
    _death_signal()
    threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()


def announcement(server: Server, store_url: str) -> dict[str, Any]:
    """What the stdout line says about a listening ``gateway.server.Server``."""
    assert server.address is not None, "announced once listening"
    host, port = server.address
    client_host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    bracketed = f"[{client_host}]" if ":" in client_host else client_host
    amqps = None
    if server.tls_address is not None:
        amqps = f"amqps://{bracketed}:{server.tls_address[1]}"
    http = None
    if server.http is not None:
        http = f"http://{bracketed}:{server.http.address[1]}"
    return {
        "url": f"amqp://{bracketed}:{port}",
        "host": client_host,
        "port": port,
        "amqps": amqps,
        "http": http,
        "pid": os.getpid(),
        "store": store_url,
    }


def announce(server: Server, store_url: str) -> None:
    sys.stdout.write(json.dumps(announcement(server, store_url)) + "\n")
    sys.stdout.flush()
