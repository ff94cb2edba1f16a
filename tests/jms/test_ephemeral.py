"""``subgate serve --ephemeral``: the JSON line, a store at the head revision in a folder removed on exit, a free
port, refusal of --store, and the end of the server when the process that started it dies (even by SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from proton import Message
from proton.utils import BlockingConnection
from sqlalchemy.engine import make_url

from subgate.storage.ephemeral import PREFIX, sweep
from subgate.testing import EphemeralServer

SERVE = [sys.executable, "-m", "subgate.cli", "serve", "--ephemeral"]


def store_folder(info: dict) -> Path:
    return Path(make_url(info["store"]).database or "").parent


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_until(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_line_store_and_cleanup(tmp_path):
    server = EphemeralServer("--http", "127.0.0.1:0", log_dir=tmp_path).start()
    try:
        info = server.info
        assert set(info) == {"url", "host", "port", "amqps", "http", "pid", "store"}
        assert info["url"] == f"amqp://127.0.0.1:{info['port']}" and info["port"] > 0
        assert info["pid"] == server.pid and info["amqps"] is None
        folder = store_folder(info)
        assert folder.name.startswith(f"{PREFIX}{server.pid}-") and folder.is_dir()
        # The schema was created directly, stamped at the head revision: the --store commands accept it.
        current = subprocess.run(
            [sys.executable, "-m", "subgate.cli", "db", "current", "--store", info["store"]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert current.returncode == 0, current.stdout + current.stderr
        with urllib.request.urlopen(f"{info['http']}/readyz", timeout=20) as response:
            assert response.status == 200
        conn = BlockingConnection(info["url"], timeout=20)
        try:
            conn.create_sender("eph").send(Message(body="kept", durable=True))
            rcv = conn.create_receiver("eph")
            assert rcv.receive(timeout=20).body == "kept"
            rcv.accept()
        finally:
            conn.close()
    finally:
        assert server.stop() == 0, server.log()
    assert not folder.exists()


def test_two_servers_get_their_own_port_and_store(tmp_path):
    first = EphemeralServer(log_dir=tmp_path).start()
    second = EphemeralServer(log_dir=tmp_path).start()
    try:
        assert first.info["port"] != second.info["port"]
        assert first.info["store"] != second.info["store"]
    finally:
        first.stop()
        second.stop()


def test_store_option_is_refused():
    result = subprocess.run([*SERVE, "--store", "sqlite:///x.db"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--ephemeral makes its own store" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_server_ends_with_its_parent(tmp_path, how):
    """A parent that starts the server and then dies (SIGKILL: no chance to clean up) takes the server with it,
    and the server removes its store folder on the way out."""
    parent_code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen({SERVE!r}, stdout=subprocess.PIPE)\n"
        "sys.stdout.write(p.stdout.readline().decode()); sys.stdout.flush()\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        info = json.loads(parent.stdout.readline())
        server_pid = info["pid"]
        assert not gone(server_pid)
        os.kill(parent.pid, how)
        parent.wait(30)
        assert wait_until(lambda: gone(server_pid)), f"server {server_pid} outlived its parent"
        assert wait_until(lambda: not store_folder(info).exists())
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_sweep_removes_folders_of_dead_servers(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(30)
    stale = tmp_path / f"{PREFIX}{dead.pid}-abc"
    stale.mkdir()
    (stale / "subgate.db").write_bytes(b"x")
    live = tmp_path / f"{PREFIX}{os.getpid()}-abc"
    live.mkdir()
    assert sweep(tmp_path) == [stale]
    assert not stale.exists() and live.exists()


def test_server_outlives_the_parent_thread_that_started_it(tmp_path):
    """The kernel's death signal follows the parent *thread*; a parent process that starts the server from a
    thread which then ends (a JVM pool thread, say) keeps its server until the process itself ends."""
    parent_code = (
        "import subprocess, sys, threading, time\n"
        "out = []\n"
        "def start():\n"
        f"    p = subprocess.Popen({SERVE!r}, stdout=subprocess.PIPE)\n"
        "    out.append(p.stdout.readline().decode())  # the server is up (and tied to this thread) when it ends\n"
        "t = threading.Thread(target=start)\n"
        "t.start(); t.join()\n"
        "sys.stdout.write(out[0]); sys.stdout.flush()\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        info = json.loads(parent.stdout.readline())
        # The starting thread has ended; the server still serves (checked over AMQP, after the watchdog has
        # had several turns).
        time.sleep(1.0)
        assert not gone(info["pid"])
        conn = BlockingConnection(info["url"], timeout=20)
        conn.close()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        assert wait_until(lambda: gone(info["pid"])), "the server outlived its parent process"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_watchdog_alone_stops_an_orphan(tmp_path):
    """The fallback without the kernel's death signal (a parent gone before the prctl, or no prctl at all): the
    watchdog sees getppid() differ from the parent recorded at start and sends the process SIGTERM."""
    code = (
        "import os, signal, sys, time\n"
        "from subgate.cli import ephemeral\n"
        "signal.signal(signal.SIGTERM, lambda *_: (print('stopped', flush=True), os._exit(0)))\n"
        "ephemeral._death_signal = lambda: False  # no prctl: the watchdog is all there is\n"
        "ephemeral.tie_to_parent(os.getppid() + 1_000_000)  # a parent that is not ours: as if ours were gone\n"
        "time.sleep(60)\n"
        "print('still running', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "stopped", done.stdout + done.stderr
