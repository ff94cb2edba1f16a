"""Micro-benchmark of the journal writer's operations: building and applying 10k message and 10k ack operations.

Measures the two halves of the journal's hot path separately, in CPU time of the thread (other processes on a
busy machine do not count), best of ``--repeat`` runs:

- reactor side: ``JournalWriter.submit_message`` and ``submit_ack`` on a writer that is not started (building
  the operation, taking a ticket, enqueueing); the ``NewMessage`` records are built beforehand, as the router
  builds them either way;
- writer side: applying the queued operations in one transaction on a migrated SQLite file, once with the bulk
  inserts replaced by no-ops (the dispatch alone: what the operation types change) and once for real.

It drives the writer's internals (``_queue``, ``_apply``) on purpose: the point is the per-operation cost inside
the writer, which no public verb isolates. Run from the repository root:

    .venv/bin/python bench/journal_ops.py
"""

from __future__ import annotations

import argparse
import importlib
import os
import queue
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from subgate.engine.records import NewMessage
from subgate.storage.db import make_engine, upgrade
from subgate.storage.journal import JournalWriter

# Modules that may hold a reference to the bulk inserts (the writer's, and where it applies operations).
_BULK_USERS = ("subgate.storage.journal", "subgate.storage.applying")


def _messages(count: int) -> list[NewMessage]:
    payload = b"x" * 1024
    return [
        NewMessage(i, "q", "queue", "c1/snd", i, f"c1/snd|{i}|", 1_790_000_000_000 + i, None, None, True, 4, payload)
        for i in range(1, count + 1)
    ]


def _fill(writer: JournalWriter, messages: list[NewMessage]) -> float:
    """Submit every message and one ack per message; returns the seconds taken."""
    submit_message, submit_ack = writer.submit_message, writer.submit_ack
    start = time.thread_time()
    for m in messages:
        submit_message(m, m)
    for m in messages:
        submit_ack(1, m.id)
    return time.thread_time() - start


def _drain(writer: JournalWriter) -> list[Any]:
    items = []
    while True:
        try:
            items.append(writer._queue.get_nowait())
        except queue.Empty:
            return items


@contextmanager
def _no_bulk() -> Iterator[None]:
    """Replace the bulk inserts with no-ops wherever the writer refers to them."""
    saved: list[tuple[Any, str, Callable[..., None]]] = []
    for name in _BULK_USERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr in ("insert_messages", "insert_acks"):
            if hasattr(module, attr):
                saved.append((module, attr, getattr(module, attr)))
                setattr(module, attr, lambda conn, rows: None)
    try:
        yield
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="messages (and acks) per run")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    messages = _messages(args.count)
    ops = 2 * args.count
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{os.path.join(tmp, 'bench.db')}"
        upgrade(url)
        engine = make_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO ack_cursors (id, owner_kind, owner, address, low_water, updated_at) "
                "VALUES (1, 'queue', 'q', 'q', 0, '2026-01-01 00:00:00')"
            )
        writer = JournalWriter(engine, lambda result: None)
        submit, dispatch, real = [], [], []
        for _ in range(args.repeat):
            submit.append(_fill(writer, messages))
            batch = _drain(writer)
            with _no_bulk():
                start = time.thread_time()
                writer._apply(batch)
                dispatch.append(time.thread_time() - start)
            with engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM acks")
                conn.exec_driver_sql("DELETE FROM messages")
            start = time.thread_time()
            writer._apply(batch)
            real.append(time.thread_time() - start)
            with engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM acks")
                conn.exec_driver_sql("DELETE FROM messages")
        engine.dispose()
    print(f"python {sys.version.split()[0]}, {args.count} messages + {args.count} acks, best of {args.repeat}")
    print(f"writer: {sys.modules[JournalWriter.__module__].__file__}")
    print(f"submit (reactor side):        {min(submit) / ops * 1e9:8.0f} ns per operation")
    print(f"apply, dispatch only:         {min(dispatch) / ops * 1e9:8.0f} ns per operation")
    print(f"apply, SQLite bulk inserts:   {min(real) / ops * 1e9:8.0f} ns per operation")


if __name__ == "__main__":
    main()
