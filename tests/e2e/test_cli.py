"""The ``subgate`` command line: store checks and migrations, option sources and their precedence (flag, then
``SUBGATE_*`` variable, then ``--config`` TOML file), signals, ``--listen`` port 0, and user management.

Servers run as child processes with exactly the arguments given (``tests.support.cli.ServeProcess``); the user
commands also run in-process through click's ``CliRunner``. The last test checks a package boundary: the pure
rule packages load neither proton nor SQLAlchemy.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from proton import Message

from subgate.cli.main import main
from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, sender
from tests.support.cli import ServeProcess, run_subgate
from tests.support.rawamqp import SASL_AUTH, SASL_OK, RawClient

REPO = Path(__file__).resolve().parents[2]
OUT_OF_DATE = "the store is at schema revision none (empty database) but this subgate needs"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sasl_outcome(port: int, mechanism: str = "ANONYMOUS", response: bytes = b"") -> int:
    with RawClient(port) as raw:
        return raw.sasl(mechanism, response)


def head_revision(tmp_path: Path, store_url: str) -> str:
    current = run_subgate("db", "current", "--store", store_url, cwd=tmp_path)
    assert current.returncode in (0, 3), current.stderr
    return current.stdout.split("head:", 1)[1].split()[0]


# -- the store ---------------------------------------------------------------------------------------------------
def test_serve_refuses_an_unmigrated_store_until_it_is_upgraded(store_url, tmp_path):
    refused = run_subgate("serve", "--listen", "127.0.0.1:0", "--store", store_url, cwd=tmp_path)
    assert refused.returncode == 1
    assert OUT_OF_DATE in refused.stderr
    assert "run 'subgate db upgrade' (or start with --migrate)" in refused.stderr
    assert "listening on" not in refused.stderr

    before = run_subgate("db", "current", "--store", store_url, cwd=tmp_path)
    assert before.returncode == 3, before.stderr  # behind the head revision
    assert before.stdout.splitlines()[0] == "current: none"
    assert "the store is out of date: run 'subgate db upgrade'" in before.stdout
    head = head_revision(tmp_path, store_url)

    upgraded = run_subgate("db", "upgrade", "--store", store_url, cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"migrated to {head}" in upgraded.stderr  # the progress bar, one step per revision, on stderr
    assert upgraded.stdout.strip().endswith("is at head")
    again = run_subgate("db", "upgrade", "--store", store_url, cwd=tmp_path)
    assert "the store is up to date" in again.stderr
    after = run_subgate("db", "current", "--store", store_url, cwd=tmp_path)
    assert after.stdout.splitlines() == [f"current: {head}", f"head:    {head}"]

    with ServeProcess("--listen", "127.0.0.1:0", "--store", store_url, cwd=tmp_path) as server:
        assert "migrating" not in server.log()
        conn = connect(server.url)
        conn.close()


def test_serve_with_migrate_upgrades_and_serves(sqlite_url, tmp_path):
    with ServeProcess("--listen", "127.0.0.1:0", "--store", sqlite_url, "--migrate", cwd=tmp_path) as server:
        assert "migrating the store from an empty database" in server.log()
    current = run_subgate("db", "current", "--store", sqlite_url, cwd=tmp_path)
    head = head_revision(tmp_path, sqlite_url)
    assert current.stdout.splitlines()[0] == f"current: {head}"


def test_default_store_is_subgate_db_in_the_working_directory(tmp_path):
    upgraded = run_subgate("db", "upgrade", cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    assert (tmp_path / "subgate.db").is_file()
    assert str(tmp_path / "subgate.db") in upgraded.stdout


# -- option sources ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layers", ["file", "file+env", "file+env+flag"])
def test_options_come_from_flag_then_environment_then_config_file(sqlite_url, tmp_path, layers):
    ports = {"file": free_port(), "env": free_port(), "flag": free_port()}
    config = tmp_path / "subgate.toml"
    # [subgate] table, dashed and underscored keys, a boolean: the forms the README allows.
    config.write_text(
        "[subgate]\n"
        f'listen = "127.0.0.1:{ports["file"]}"\n'
        'name = "from-file"\n'
        f"store = {json.dumps(sqlite_url)}\n"
        "migrate = true\n"
        "max-frame-size = 8192\n"
    )
    env: dict[str, str] = {}
    flags = ["--config", str(config)]
    if "env" in layers:
        env = {"SUBGATE_NAME": "from-env", "SUBGATE_LISTEN": f"127.0.0.1:{ports['env']}"}
    if "flag" in layers:
        flags += ["--name", "from-flag", "--listen", f"127.0.0.1:{ports['flag']}"]
    winner = layers.rsplit("+", 1)[-1]
    with ServeProcess(*flags, cwd=tmp_path, env=env) as server:
        assert (server.name, server.port) == (f"from-{winner}", ports[winner])
        conn = connect(server.url)
        assert conn.conn.remote_container == f"from-{winner}"  # the name is the container-id of the open
        conn.close()
        with RawClient(server.port) as raw:
            raw.sasl_anonymous()
            amqp = raw.start_amqp()
            raw.pump(lambda: amqp.remote_container is not None, "the server's open")
            assert raw.transport.remote_max_frame_size == 8192  # from the file in every case


def test_config_file_named_by_environment_and_boolean_options(sqlite_url, tmp_path):
    config = tmp_path / "subgate.toml"
    config.write_text(f'store = {json.dumps(sqlite_url)}\nmigrate = true\nallow_anonymous = false\nname = "cfg"\n')
    env = {"SUBGATE_CONFIG": str(config)}
    with ServeProcess("--listen", "127.0.0.1:0", cwd=tmp_path, env=env) as server:
        assert server.name == "cfg"
        assert sasl_outcome(server.port) == SASL_AUTH
    env["SUBGATE_ALLOW_ANONYMOUS"] = "true"
    with ServeProcess("--listen", "127.0.0.1:0", cwd=tmp_path, env=env) as server:
        assert sasl_outcome(server.port) == SASL_OK
    with ServeProcess("--listen", "127.0.0.1:0", "--no-allow-anonymous", cwd=tmp_path, env=env) as server:
        assert sasl_outcome(server.port) == SASL_AUTH


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "nowhere"], "expected HOST:PORT, got 'nowhere'"),
        (["--config", "missing.toml"], "cannot read missing.toml"),
        (["--max-frame-size", "100"], "--max-frame-size"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, args, message):
    result = run_subgate("serve", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr


def test_invalid_toml_is_a_usage_error(tmp_path):
    (tmp_path / "bad.toml").write_text("listen = \n")
    result = run_subgate("serve", "--config", "bad.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert "bad.toml is not valid TOML" in result.stderr


# -- lifecycle ---------------------------------------------------------------------------------------------------
def test_listen_on_port_zero_logs_the_chosen_port(sqlite_url, tmp_path):
    with ServeProcess("--listen", "127.0.0.1:0", "--store", sqlite_url, "--migrate", cwd=tmp_path) as server:
        assert server.port > 0
        assert f"subgate 'subgate' listening on 127.0.0.1:{server.port} (store sqlite:///" in server.log()
        conn = connect(server.url)
        conn.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signals_stop_the_server_cleanly(sqlite_url, tmp_path, signum):
    server = ServeProcess("--listen", "127.0.0.1:0", "--store", sqlite_url, "--migrate", cwd=tmp_path).start()
    try:
        conn = connect(server.url)
        sender(conn, "kept", "queue").send(Message(body="confirmed", durable=True))
        assert server.signal(signum) == 0
        log = server.log()
        assert "shutting down: no new connections; flushing the journal" in log
        assert "subgate stopped (" in log
        assert "Traceback" not in log and "KeyboardInterrupt" not in log
    finally:
        server.kill()
    with ServeProcess("--listen", "127.0.0.1:0", "--store", sqlite_url, cwd=tmp_path) as again:
        conn = connect(again.url)
        rcv = receiver(conn, "kept", "queue")
        assert receive_bodies(rcv, 1) == ["confirmed"]
        assert nothing_arrives(rcv)
        conn.close()


# -- users -------------------------------------------------------------------------------------------------------
def test_users_add_list_remove(sqlite_url, tmp_path):
    from subgate.storage.db import make_engine, session_factory
    from subgate.storage.passwords import verify_password
    from subgate.storage.principals import find_principal

    runner = CliRunner()
    store = ["--store", sqlite_url]
    not_migrated = runner.invoke(main, ["users", "list", *store])
    assert not_migrated.exit_code == 1
    assert OUT_OF_DATE in not_migrated.output

    assert runner.invoke(main, ["db", "upgrade", *store]).exit_code == 0
    empty = runner.invoke(main, ["users", "list", *store])
    assert empty.exit_code == 0 and empty.output.startswith("no users")

    added = runner.invoke(main, ["users", "add", "alice", "--password", "s3cret", *store])
    assert added.exit_code == 0 and added.output.startswith("added user 'alice'\n")
    from_stdin = runner.invoke(main, ["users", "add", "bob", *store], input="hunter2\n")
    assert from_stdin.exit_code == 0 and from_stdin.output.startswith("added user 'bob'\n")
    from_env = runner.invoke(main, ["users", "add", "carol", *store], env={"SUBGATE_PASSWORD": "pw-carol"})
    assert from_env.exit_code == 0, from_env.output
    again = runner.invoke(main, ["users", "add", "alice", "--password", "other", *store])
    assert again.exit_code == 1 and "alice" in again.output
    blank = runner.invoke(main, ["users", "add", "dave", *store], input="\n")
    assert blank.exit_code == 2 and "the password must not be empty" in blank.output

    listed = runner.invoke(main, ["users", "list", *store])
    assert listed.exit_code == 0
    lines = listed.output.splitlines()
    assert lines[0].split() == ["NAME", "ROLES", "CREATED"]
    assert [line.split()[0] for line in lines[1:]] == ["alice", "bob", "carol"]

    engine = make_engine(sqlite_url)
    try:
        with session_factory(engine)() as session:
            stored = {name: find_principal(session, name) for name in ("alice", "bob", "carol")}
    finally:
        engine.dispose()
    for name, password in (("alice", "s3cret"), ("bob", "hunter2"), ("carol", "pw-carol")):
        assert password not in stored[name].password_hash
        assert verify_password(password, stored[name].password_hash)
        assert not verify_password(password + "x", stored[name].password_hash)

    changed = runner.invoke(main, ["users", "passwd", "carol", *store], input="n3w-pw\n")
    assert (changed.exit_code, changed.output) == (0, "set the password of 'carol'\n")
    engine = make_engine(sqlite_url)
    try:
        with session_factory(engine)() as session:
            carol = find_principal(session, "carol")
    finally:
        engine.dispose()
    assert carol is not None and carol.password_hash.startswith("scram_sha256$")
    assert verify_password("n3w-pw", carol.password_hash) and not verify_password("pw-carol", carol.password_hash)
    unknown = runner.invoke(main, ["users", "passwd", "nobody", "--password", "x", *store])
    assert unknown.exit_code == 1 and "no user named 'nobody'" in unknown.output
    blank = runner.invoke(main, ["users", "passwd", "alice", *store], input="\n")
    assert blank.exit_code == 2 and "the password must not be empty" in blank.output

    removed = runner.invoke(main, ["users", "remove", "bob", *store])
    assert (removed.exit_code, removed.output) == (0, "removed user 'bob'\n")
    gone = runner.invoke(main, ["users", "remove", "bob", *store])
    assert gone.exit_code == 1 and "no user named 'bob'" in gone.output
    listed = runner.invoke(main, ["users", "list", *store])
    assert [line.split()[0] for line in listed.output.splitlines()[1:]] == ["alice", "carol"]


def test_users_added_by_the_cli_authenticate_on_the_server(store_url, tmp_path):
    assert run_subgate("db", "upgrade", "--store", store_url, cwd=tmp_path).returncode == 0
    added = run_subgate("users", "add", "alice", "--store", store_url, cwd=tmp_path, stdin="s3cret\n")
    assert added.returncode == 0, added.stderr
    with ServeProcess("--listen", "127.0.0.1:0", "--store", store_url, cwd=tmp_path) as server:
        conn = connect(server.url, user="alice", password="s3cret")
        conn.close()
        assert sasl_outcome(server.port, "PLAIN", b"\x00alice\x00s3cret\n") == SASL_AUTH


# -- package boundaries ------------------------------------------------------------------------------------------
IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("package", ["subgate.mapping", "subgate.topics"])
def test_pure_rule_packages_load_neither_proton_nor_sqlalchemy(package):
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING, package], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    own = [m for m in loaded if m == package or m.startswith(package + ".")]
    assert len(own) > 1, own  # the walk did import the modules
    forbidden = {"proton", "cproton", "_cproton", "sqlalchemy", "alembic", "psycopg"}
    ours = ("subgate.gateway", "subgate.storage", "subgate.cli")
    assert [m for m in loaded if m.split(".")[0] in forbidden or m.startswith(ours)] == []
