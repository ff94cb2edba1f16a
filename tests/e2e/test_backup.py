"""Issue 19 item 7: backups taken while a server runs under load, then served and restored (docs/operations.md).

SQLite: ``subgate db backup`` copies a live store while ``tests.support.backup_load`` publishes persistent
messages to a queue, a topic with a durable subscription, and a queue a consumer empties; the copy is checked
(integrity, every publish confirmed before the backup began is in it, each stream a whole prefix of what was
sent, every row whole, users/grants/subscriptions equal to the original's), served by a second server, and put
back with ``subgate db restore`` into the original store, which then serves exactly the copy. PostgreSQL: the
``pg_dump``/``pg_restore`` commands ``subgate db backup`` prints (the documented ones) run against the live
server, and a server on the restored database serves the data.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from proton import Message
from sqlalchemy import Engine, select, text

from subgate.storage.db import make_engine, session_factory, upgrade
from subgate.storage.models import JournalMessage
from subgate.storage.passwords import hash_password
from subgate.storage.permissions import add_role, assign_role, grant
from subgate.storage.principals import add_principal
from tests.support.backup_load import body_for
from tests.support.cli import run_subgate
from tests.support.jms import DURABLE, QUEUE, Consumer, JmsWire
from tests.support.jms.errors import SaslFailed
from tests.support.server import SubgateProcess

REPO = Path(__file__).resolve().parents[2]
USER, PASSWORD = "alice", "s3cret-ü"
CLIENT_ID = "bk-app"
SETTINGS_TABLES = ("principals", "roles", "principal_roles", "permission_grants", "subscriptions")


# -- the load and its ledger -----------------------------------------------------------------------------------
@contextmanager
def running_load(server: SubgateProcess, out: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(out, "wb") as sink:
        load = subprocess.Popen(
            [sys.executable, "-m", "tests.support.backup_load", server.url, USER, PASSWORD],
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            yield load
        finally:
            if load.poll() is None:
                load.send_signal(signal.SIGTERM)
            try:
                load.wait(10)
            except subprocess.TimeoutExpired:
                load.kill()
                load.wait(5)


def ledger(out: Path) -> tuple[set[str], set[str]]:
    """(keys whose publish the server confirmed, keys the consumer accepted), as printed so far."""
    confirmed, accepted = set(), set()
    for line in out.read_text().splitlines():
        kind, _, key = line.partition(" ")
        if kind == "P":
            confirmed.add(key)
        elif kind == "A":
            accepted.add(key)
    return confirmed, accepted


def wait_for_confirms(load: subprocess.Popen[bytes], out: Path, count: int, seconds: float = 30) -> set[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        confirmed, _ = ledger(out)
        if len(confirmed) >= count:
            return confirmed
        if load.poll() is not None:
            raise AssertionError(f"the load ended early ({load.returncode}):\n{out.read_text()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"the load confirmed fewer than {count} publishes in {seconds}s:\n{out.read_text()[-2000:]}")


def of(stream: str, keys: set[str]) -> set[str]:
    return {key for key in keys if key.startswith(f"{stream}-")}


# -- what a store holds --------------------------------------------------------------------------------------------
def journal(url: str) -> dict[str, list[str]]:
    """The keys of each stream in the journal, in journal order; every row checked whole on the way."""
    engine = make_engine(url)
    streams: dict[str, list[str]] = {"q": [], "t": [], "c": []}
    try:
        with engine.connect() as conn:
            for row in conn.execute(select(JournalMessage).order_by(JournalMessage.id)):
                message = Message()
                message.decode(row.payload)
                key = str(message.id)
                assert message.body == body_for(key), f"row {row.id} ({key}) is not whole"
                assert row.address == {"q": "bk.q", "t": "bk/t", "c": "bk.c"}[key[0]]
                streams[key[0]].append(key)
    finally:
        engine.dispose()
    return streams


def is_prefix(keys: list[str], stream: str) -> bool:
    """``keys`` are the stream's first ``len(keys)`` messages, in order: a cut with no hole and nothing torn."""
    return keys == [f"{stream}-{n}" for n in range(len(keys))]


def settings_rows(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    with engine.connect() as conn:
        return {
            table: [tuple(row) for row in conn.execute(text(f"SELECT * FROM {table} ORDER BY 1, 2"))]
            for table in SETTINGS_TABLES
        }


def prepare_store(url: str) -> None:
    """Schema, a user with the admin role and a role of its own with a grant: the rows a backup must keep (in
    process, through the repositories the CLI uses: a child process per row costs seconds on a busy machine)."""
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_factory(engine).begin() as session:
            add_principal(session, USER, hash_password(PASSWORD))
            assign_role(session, "admin", USER)
            add_role(session, "readers")
            grant(session, "role", "readers", "READ_TOPIC", "bk")
            assign_role(session, "readers", USER)
    finally:
        engine.dispose()


def subscribe_durably(server: SubgateProcess) -> None:
    with JmsWire.connect(server.address, client_id=CLIENT_ID, user=USER, password=PASSWORD) as jms:
        jms.session().consumer("bk/t", DURABLE, name="sub").detach()


def drain(consumer: Consumer, rounds: int = 2000) -> list[str]:
    """Everything the server has for ``consumer``, accepted; the keys in delivery order."""
    keys: list[str] = []
    for _ in range(rounds):
        consumer.drain(timeout=15)
        got = consumer.take_buffered()
        if not got:
            return keys
        for received in got:
            received.accept()
            keys.append(str(received.message.id))
        consumer.top_up()
    raise AssertionError("the consumer never ran dry")


def served(server: SubgateProcess) -> dict[str, list[str]]:
    """What a server hands out: ``bk.q``, ``bk.c`` and the durable subscription on ``bk/t``, as the user."""
    with JmsWire.connect(server.address, client_id=CLIENT_ID, user=USER, password=PASSWORD) as jms:
        session = jms.session()
        got = {stream: drain(session.consumer(address, QUEUE, prefetch=500)) for stream, address in QUEUES.items()}
        got["t"] = drain(session.consumer("bk/t", DURABLE, name="sub", prefetch=500))
    with pytest.raises(SaslFailed):
        JmsWire.connect(server.address, user=USER, password="wrong")
    return got


QUEUES = {"q": "bk.q", "c": "bk.c"}


def check_copy_against_ledger(copy: dict[str, list[str]], before: set[str], accepted: set[str]) -> None:
    for stream in ("q", "t"):
        assert of(stream, before) <= set(copy[stream]), f"confirmed {stream} publishes missing from the copy"
        assert is_prefix(copy[stream], stream), f"the {stream} stream in the copy is not a whole prefix"
    missing = of("c", before) - set(copy["c"]) - accepted
    assert not missing, f"confirmed, never consumed, and not in the copy: {sorted(missing)[:5]}"


# -- SQLite ----------------------------------------------------------------------------------------------------
def test_sqlite_backup_under_load_is_consistent_serves_and_restores(tmp_path):
    store = tmp_path / "subgate.db"
    url = f"sqlite:///{store}"
    prepare_store(url)
    server = SubgateProcess(url, tmp_path).start()
    copy_path, out = tmp_path / "backup" / "copy.db", tmp_path / "load.txt"
    copy_path.parent.mkdir()
    try:
        subscribe_durably(server)
        with running_load(server, out) as load:
            before = wait_for_confirms(load, out, 600)
            backup = run_subgate("db", "backup", str(copy_path), "--store", url, cwd=tmp_path)
            assert backup.returncode == 0, backup.stderr
            during = ledger(out)[0]
            wait_for_confirms(load, out, len(during) + 200)
        assert len(during) > len(before), "the server confirmed nothing while the backup ran"
        assert "integrity: ok" in backup.stdout and "revision:  0005" in backup.stdout
    finally:
        server.stop()
    _, accepted = ledger(out)
    original = journal(url)
    copy_url = f"sqlite:///{copy_path}"
    copy = journal(copy_url)
    check_copy_against_ledger(copy, before, accepted)
    assert len(original["q"]) > len(copy["q"]), "the original should have moved on after the backup"
    for line in backup.stdout.splitlines():
        if line.startswith("messages "):
            assert int(line.split()[1]) == sum(map(len, copy.values()))
    assert not list(copy_path.parent.glob(".*partial*")) and not Path(f"{copy_path}-wal").exists()
    engines = make_engine(url), make_engine(copy_url)
    try:
        assert settings_rows(engines[0]) == settings_rows(engines[1])
    finally:
        for engine in engines:
            engine.dispose()
    pristine = tmp_path / "pristine.db"
    shutil.copyfile(copy_path, pristine)  # the copy is one self-contained file

    second = SubgateProcess(copy_url, tmp_path / "backup").start()
    try:
        got = served(second)
        in_use = run_subgate("db", "restore", str(pristine), "--store", copy_url, cwd=tmp_path)
        assert in_use.returncode == 1 and "in use" in in_use.stderr
    finally:
        second.stop()
    assert got["q"] == copy["q"] and got["t"] == copy["t"]
    assert set(got["c"]) <= set(copy["c"])

    restore = run_subgate("db", "restore", str(pristine), "--store", url, cwd=tmp_path)
    assert restore.returncode == 0, restore.stderr
    assert journal(url) == copy  # the original's newer rows are gone: it holds the copy, page for page
    restored = SubgateProcess(url, tmp_path).start()
    try:
        assert served(restored) == got
    finally:
        restored.stop()


# -- PostgreSQL ------------------------------------------------------------------------------------------------
def documented_commands(url: str, dump: Path, workdir: Path) -> tuple[str, str]:
    """The pg_dump and pg_restore lines ``subgate db backup`` prints for a PostgreSQL store."""
    result = run_subgate("db", "backup", str(dump), "--store", url, cwd=workdir)
    assert result.returncode == 1
    lines = [line.strip() for line in result.stderr.splitlines()]
    dump_line = next(line for line in lines if line.startswith("pg_dump "))
    restore_line = next(line for line in lines if line.startswith("pg_restore "))
    return dump_line, restore_line


def test_postgres_documented_dump_and_restore_of_a_live_server(postgres_cluster, postgres_url, tmp_path):
    prepare_store(postgres_url)
    server = SubgateProcess(postgres_url, tmp_path).start()
    dump = tmp_path / "subgate.dump"
    dump_line, restore_line = documented_commands(postgres_url, dump, tmp_path)
    env = {"PATH": f"{postgres_cluster.bindir}:/usr/bin:/bin"}
    out = tmp_path / "load.txt"
    try:
        subscribe_durably(server)
        with running_load(server, out) as load:
            before = wait_for_confirms(load, out, 300)
            result = subprocess.run(dump_line, shell=True, env=env, capture_output=True, text=True, timeout=60)
            assert result.returncode == 0, result.stderr
            wait_for_confirms(load, out, len(ledger(out)[0]) + 100)
    finally:
        server.stop()
    _, accepted = ledger(out)
    fresh = postgres_url.rsplit("/", 1)[1] + "_restored"
    restored_url = postgres_cluster.create_database(fresh)
    try:
        assert restored_url.endswith(f"/{fresh}") and f"/{fresh}'" in restore_line
        result = subprocess.run(restore_line, shell=True, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        upgrade = run_subgate("db", "upgrade", "--store", restored_url, cwd=tmp_path)
        assert upgrade.returncode == 0, upgrade.stderr
        copy = journal(restored_url)
        check_copy_against_ledger(copy, before, accepted)
        second = SubgateProcess(restored_url, tmp_path).start()  # no lease row came along: it starts at once
        try:
            got = served(second)
        finally:
            second.stop()
        assert got["q"] == copy["q"] and got["t"] == copy["t"]
    finally:
        postgres_cluster.drop_database(fresh)
