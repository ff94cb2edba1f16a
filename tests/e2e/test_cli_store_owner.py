"""Issue 11, defects 8, 9, 10 and 12a: start-up errors, the server that owns a store, `make run`, `users add`.

Real ``subgate`` processes throughout (``tests.support.cli``, ``tests.support.server``): store errors are one
line in every command, config files are checked key by key, ``db current`` exits 3 when behind, a refused
``serve`` leaves no file; a running server's lease leads the commands to it, refuses a second server and an
offline write behind it, and keeps credentials away from a ``--server`` that does not own the store.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from subgate.storage.db import make_engine
from subgate.storage.models import ServerLease, Subscription
from tests.e2e.test_cli_subscriptions import seed
from tests.support.cli import run_subgate
from tests.support.server import SubgateProcess

REPO = Path(__file__).resolve().parents[2]
COMMANDS = [("serve", "--listen", "127.0.0.1:0"), ("users", "list"), ("db", "current"), ("subscriptions", "list")]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# -- defect 8: start-up errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_bad_store_urls_are_one_line_in_every_command(command, tmp_path, postgres_cluster):
    bad = one_line_error(run_subgate(*command, "--store", "nosuch://x", cwd=tmp_path), 2)
    assert "bad store URL 'nosuch://x'" in bad
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        unwritable = f"sqlite:///{folder / 'sub' / 'x.db'}"
        line = one_line_error(run_subgate(*command, "--store", unwritable, cwd=tmp_path), 1)
        assert line.startswith(f"Error: cannot open the store {unwritable}")
    finally:
        folder.chmod(0o700)
    port = free_port()
    unreachable = f"postgresql+psycopg://alice:s3cret@127.0.0.1:{port}/db"
    line = one_line_error(run_subgate(*command, "--store", unreachable, cwd=tmp_path), 1)
    assert f"cannot open the store postgresql+psycopg://alice:***@127.0.0.1:{port}/db: " in line
    assert "s3cret" not in line and "refused" in line


def test_listen_port_out_of_range_is_refused_without_a_traceback(tmp_path):
    result = run_subgate("serve", "--listen", "127.0.0.1:99999", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "port 99999 is out of range (0 to 65535)" in result.stderr


def test_config_file_unknown_key_and_bad_value_are_named(tmp_path):
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('log_levl = "debug"\n')
    line = one_line_error(run_subgate("serve", "--config", str(unknown), cwd=tmp_path), 2)
    assert line == f"Error: {unknown}: unknown setting 'log_levl'"
    bad = tmp_path / "bad.toml"
    bad.write_text('[subgate]\ncredit_window = "lots"\n')
    line = one_line_error(run_subgate("serve", "--config", str(bad), cwd=tmp_path), 2)
    assert line.startswith(f"Error: {bad}: bad value for 'credit_window': ")
    assert "SUBGATE_CREDIT_WINDOW" not in line
    port = tmp_path / "port.toml"
    port.write_text('listen = "127.0.0.1:70000"\n')
    line = one_line_error(run_subgate("serve", "--config", str(port), cwd=tmp_path), 2)
    assert "'listen'" in line and "out of range" in line
    # A key another command knows is fine in a shared file (serve ignores --user).
    shared = tmp_path / "shared.toml"
    shared.write_text('user = "admin"\nlisten = "127.0.0.1:0"\n')
    refused = run_subgate("serve", "--config", str(shared), cwd=tmp_path)  # refused for its empty store only
    assert "needs" in refused.stderr and "unknown" not in refused.stderr


def test_db_current_exits_3_when_behind_and_serve_refusing_leaves_no_file(tmp_path):
    behind = run_subgate("db", "current", cwd=tmp_path)
    assert behind.returncode == 3 and "out of date" in behind.stdout
    refused = run_subgate("serve", "--listen", "127.0.0.1:0", cwd=tmp_path)
    assert refused.returncode == 1 and "needs" in refused.stderr
    assert list(tmp_path.glob("subgate.db*")) == []
    assert run_subgate("db", "upgrade", cwd=tmp_path).returncode == 0
    assert run_subgate("db", "current", cwd=tmp_path).returncode == 0


# -- defect 9: the server that owns the store -----------------------------------------------------------------------
def lease_row(url: str) -> ServerLease | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(ServerLease)).first()  # type: ignore[return-value]
    finally:
        engine.dispose()


def subscription_names(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {row.name for row in conn.execute(select(Subscription))}
    finally:
        engine.dispose()


def test_commands_find_the_server_that_owns_the_store(store_url, tmp_path):
    server = SubgateProcess(store_url, tmp_path).start()
    try:
        row = lease_row(store_url)
        assert row is not None and row.listen_port == server.port and row.pid == server.proc.pid
        # No --server: the commands go to the store's owner, wherever it listens (live figures prove it).
        added = run_subgate("topics", "add", "orders/eu", "--store", store_url, cwd=tmp_path)
        assert added.returncode == 0, added.stderr
        tree = run_subgate("topics", "tree", "--json", "--store", store_url, cwd=tmp_path)
        assert tree.returncode == 0, tree.stderr
        assert [t.get("subscriptions") for t in json.loads(tree.stdout)["topics"]] == [0]
        gone = run_subgate("unsubscribe", "nosuch", "--global", "--store", store_url, cwd=tmp_path)
        assert gone.returncode == 1 and "no global subscription 'nosuch'" in gone.stderr
        assert "using the store" not in added.stderr + tree.stderr + gone.stderr
        second = run_subgate("serve", "--listen", "127.0.0.1:0", "--store", store_url, cwd=tmp_path)
        assert second.returncode == 1
        assert f"the store is in use by server 'subgate' (pid {server.proc.pid}" in second.stderr
    finally:
        server.stop()
    assert lease_row(store_url) is None  # released on a clean stop


def test_a_killed_owner_does_not_block_a_restart(store_url, tmp_path):
    server = SubgateProcess(store_url, tmp_path).start()
    server.kill()
    assert lease_row(store_url) is not None
    started = time.monotonic()
    server.start()
    try:
        assert time.monotonic() - started < 10
        assert lease_row(store_url).pid == server.proc.pid  # type: ignore[union-attr]
    finally:
        server.stop()


def test_offline_write_refused_while_the_owner_is_live_but_unreachable(store_url, tmp_path):
    seed(store_url)
    engine = make_engine(store_url)
    with engine.begin() as conn:  # a live owner (this test's own pid) that listens nowhere
        conn.execute(
            insert(ServerLease).values(
                id=1,
                token="t",
                name="elsewhere",
                host=socket.gethostname(),
                pid=os.getpid(),
                listen_host="127.0.0.1",
                listen_port=free_port(),
                started_at=datetime.now(UTC),
                expires_ms=int(time.time() * 1000) + 600_000,
            )
        )
    engine.dispose()
    refused = run_subgate("unsubscribe", "sub2", "--client-id", "app1", "--store", store_url, cwd=tmp_path)
    assert refused.returncode == 1
    assert "is in use by server 'elsewhere'" in refused.stderr and "not changing the store" in refused.stderr
    assert "sub2" in subscription_names(store_url)


class Listener:
    """A TCP listener that records whether anybody sent it a byte."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 60
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            try:
                self.received += conn.recv(4096)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_a_server_flag_that_disagrees_with_the_owner_gets_no_credentials(sqlite_url, tmp_path):
    server = SubgateProcess(sqlite_url, tmp_path).start()
    other = Listener()
    try:
        result = run_subgate(
            "subscriptions",
            "list",
            "--store",
            sqlite_url,
            "--server",
            f"127.0.0.1:{other.port}",
            "--user",
            "alice",
            "--password",
            "s3cret",
            cwd=tmp_path,
        )
        assert result.returncode == 1
        assert "is not the server that owns the store" in result.stderr
        assert f"listening on 127.0.0.1:{server.port}" in result.stderr
    finally:
        other.close()
        server.stop()
    assert other.received == b""


# -- defect 10: make run -----------------------------------------------------------------------------------------
def test_make_run_takes_the_listen_address_from_the_environment():
    dry = subprocess.run(
        ["make", "-n", "run", "STAMP=pyproject.toml"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert dry.returncode == 0, dry.stderr
    serve = [line for line in dry.stdout.splitlines() if "subgate serve" in line]
    assert serve and all("--listen" not in line for line in serve)


# -- defect 12a: the first user ----------------------------------------------------------------------------------
def test_users_add_says_what_changed_and_assigns_roles(sqlite_url, tmp_path):
    assert run_subgate("db", "upgrade", "--store", sqlite_url, cwd=tmp_path).returncode == 0
    first = run_subgate("users", "add", "alice", "--role", "admin", "--store", sqlite_url, cwd=tmp_path, stdin="pw\n")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("added user 'alice' with role(s) admin\n")
    assert "anonymous access is now off because a user exists" in first.stdout
    second = run_subgate("users", "add", "bob", "--store", sqlite_url, cwd=tmp_path, stdin="pw\n")
    assert "anonymous access" not in second.stdout
    assert "may do nothing until granted: 'subgate roles assign admin bob'" in second.stdout
    roles = run_subgate("roles", "list", "--json", "--store", sqlite_url, cwd=tmp_path)
    assert "alice" in roles.stdout and "bob" not in roles.stdout
    missing = run_subgate(
        "users", "add", "carol", "--role", "nosuch", "--store", sqlite_url, cwd=tmp_path, stdin="pw\n"
    )
    assert missing.returncode == 1 and "nosuch" in missing.stderr
    listed = run_subgate("users", "list", "--store", sqlite_url, cwd=tmp_path)
    assert "carol" not in listed.stdout  # the whole add is one transaction
