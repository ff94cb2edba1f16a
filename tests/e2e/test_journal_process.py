"""The journal writer process from outside (``--journal-process``, the default; storage.journal_process): a
``kill -9`` of the server takes its writer with it and loses nothing confirmed; ``--no-journal-process`` keeps
the writer a thread. On SQLite and on PostgreSQL (``store_url``)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender

WRITER = re.compile(r"journal writer: process (\d+)")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # a zombie is dead (its reaper may be slow)


def _writer_pid(server) -> int:
    match = WRITER.search(server.log())
    assert match, "the server names its writer process in its log"
    return int(match.group(1))


def test_kill_9_takes_the_writer_process_along_and_loses_nothing_confirmed(make_server, store_url):
    server = make_server(store_url)
    writer = _writer_pid(server)
    assert _children(server.proc.pid) == [writer]
    assert "subgate.storage.journal_child" in _cmdline(writer)
    conn = connect(server.url)
    send_all(sender(conn, "wp.q", "queue"), [f"m{i}" for i in range(300)], durable=True)  # each one accepted
    conn.close()
    server.kill()
    deadline = time.monotonic() + 10
    while not _gone(writer) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(writer), "no writer is left to commit behind the next server's back"
    server.start()
    assert _writer_pid(server) != writer
    conn = connect(server.url)
    rcv = receiver(conn, "wp.q", "queue", credit=400)
    assert receive_bodies(rcv, 300) == [f"m{i}" for i in range(300)]
    assert nothing_arrives(rcv)
    conn.close()
    assert server.stop() == 0


def test_a_graceful_stop_commits_and_ends_the_writer_process(make_server, store_url):
    server = make_server(store_url)
    writer = _writer_pid(server)
    conn = connect(server.url)
    send_all(sender(conn, "wp.stop", "queue"), [f"m{i}" for i in range(50)], durable=True)
    conn.close()
    assert server.stop() == 0
    assert _gone(writer)
    assert "journal writer process ended unexpectedly" not in server.log()


def test_no_journal_process_keeps_the_writer_a_thread(make_server, store_url):
    server = make_server(store_url, "--no-journal-process")
    assert not WRITER.search(server.log())
    assert _children(server.proc.pid) == []
    conn = connect(server.url)
    send_all(sender(conn, "wp.t", "queue"), [f"m{i}" for i in range(20)], durable=True)
    conn.close()
    server.stop()
    server.start()
    conn = connect(server.url)
    assert receive_bodies(receiver(conn, "wp.t", "queue", credit=50), 20) == [f"m{i}" for i in range(20)]
    conn.close()


def test_a_writer_process_that_dies_stops_the_server_with_an_error(make_server, store_url):
    server = make_server(store_url)
    os.kill(_writer_pid(server), signal.SIGKILL)
    deadline = time.monotonic() + 20
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.alive()
    assert server.proc.returncode == 1
    assert "the journal writer process ended unexpectedly (exit code -9)" in server.log()
