"""Newcomer friction (issue 33): what a new user meets first, with the real ``subgate`` command line (a child
process, ``tests.support.cli.run_subgate``) and, where it matters, a real server process.

- An operator command run from another directory names the store URL it tried and says that no store is there
  and no server owns one, without advising ``db upgrade`` (which would make a second store).
- ``publish``/``subscribe`` without ``--url`` go to the server that owns the store; a refused connection is said at
  once, with its HOST:PORT, instead of a loss report after the retry duration.
- A bare file path as ``--store`` gets the SQLite URL to use; a port out of range is one line; an HTTP port in use
  is named, not the AMQP listener's ``127.0.0.1:0``.
- A user whose credentials are right but who lacks a grant is told the grant (and the role) that would allow it.
- ``status`` leaves out its own connection, links and reply queue; ``users list`` shows roles; ``queues show``
  gives the age of the oldest waiting message.
"""

from __future__ import annotations

import json
import socket

from proton import Message

from tests.support.amqp import connect, sender
from tests.support.cli import run_subgate

OPERATOR_COMMANDS = (("status",), ("queues", "list"), ("journal", "stats"), ("subscriptions", "list"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_operator_commands_from_another_directory_name_the_url_and_say_no_store_is_there(server, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in OPERATOR_COMMANDS:
        result = run_subgate(*command, cwd=elsewhere)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert f"no store at sqlite:///{elsewhere / 'subgate.db'} (the file does not exist)" in result.stderr, command
        assert "no server owns a store there" in result.stderr, (command, result.stderr)
        assert "db upgrade" not in result.stderr, (command, result.stderr)
    assert list(elsewhere.iterdir()) == []  # no empty store left behind
    assert server.alive()


def test_publish_and_subscribe_without_url_use_the_server_that_owns_the_store(make_server):
    server = make_server()  # its store is subgate.db in its working directory
    sent = run_subgate("publish", "newcomer/prices", "--count", "2", cwd=server.workdir)
    assert sent.returncode == 0, sent.stderr
    assert "published 2 message(s)" in sent.stdout
    got = run_subgate(
        "subscribe", "newcomer/prices", "--bookmark", "0", "--count", "2", "--timeout", "20", cwd=server.workdir
    )
    assert got.returncode == 0, got.stderr
    assert [line.split("\t")[1] for line in got.stdout.splitlines()] == ["message 1", "message 2"]


def test_publish_to_a_port_where_nothing_listens_says_connection_refused_at_once(tmp_path):
    port = free_port()
    # A retry duration far above the subprocess's bound: a publish that waited it out fails with TimeoutExpired.
    result = run_subgate(
        "publish", "t/a", "--url", f"amqp://127.0.0.1:{port}", "--retry-duration", "120", cwd=tmp_path, timeout=60
    )
    assert result.returncode == 1, result.stderr
    assert f"connection refused at 127.0.0.1:{port}" in result.stderr
    assert "may have been lost" not in result.stderr


def test_a_bare_file_path_as_store_gets_the_sqlite_url_to_use(tmp_path):
    result = run_subgate("status", "--store", "./x.db", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "Error: bad store URL './x.db': Could not parse SQLAlchemy URL from given URL string; for a SQLite file "
        "there, give sqlite:///./x.db (sqlite:////absolute/path for an absolute path)"
    ]


def test_a_port_out_of_range_is_one_line(tmp_path):
    for command in (("serve", "--listen", "127.0.0.1:99999"), ("status", "--server", "127.0.0.1:99999")):
        result = run_subgate(*command, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert "port 99999 is out of range (0 to 65535)" in lines[0]


def test_an_http_port_in_use_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store = f"sqlite:///{tmp_path / 'subgate.db'}"
        result = run_subgate(
            "serve", "--listen", "127.0.0.1:0", "--http", f"127.0.0.1:{port}", "--store", store, "--migrate",
            cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"Error: cannot listen on 127.0.0.1:{port} (--http): "), error
    assert "127.0.0.1:0" not in error


def add_user(server, name: str, *roles: str) -> None:
    role_flags = [flag for role in roles for flag in ("--role", role)]
    added = run_subgate(
        "users", "add", name, "--store", server.store_url, *role_flags, cwd=server.workdir, stdin=f"{name}-pw\n"
    )
    assert added.returncode == 0, added.stderr


def test_a_missing_grant_is_named_and_not_blamed_on_the_credentials(make_server):
    server = make_server()
    add_user(server, "bob")
    result = run_subgate("status", "--user", "bob", "--password", "bob-pw", cwd=server.workdir)
    assert result.returncode == 1, result.stderr
    assert "CONTROL_SERVER denied to principal 'bob'" in result.stderr
    assert "grant: subgate grants add CONTROL_SERVER --user bob" in result.stderr
    assert "subgate roles assign admin bob" in result.stderr
    assert "the credentials were accepted, the grant is missing" in result.stderr
    assert "check --user/--password" not in result.stderr


def test_users_list_shows_roles(make_server, tmp_path):
    server = make_server()
    add_user(server, "alice", "admin")
    add_user(server, "bob")
    listed = run_subgate("users", "list", "--store", server.store_url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["NAME", "ROLES", "CREATED"]
    assert [row[:2] for row in rows[1:]] == [["alice", "admin"], ["bob", "-"]]


def test_status_leaves_out_its_own_connection_and_reply_queue(make_server):
    server = make_server()
    result = run_subgate("status", "--json", cwd=server.workdir)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)["server"]
    assert (figures["connections"], figures["links"], figures["queues"]) == (0, 0, 0)
    app = connect(server.url, container_id="newcomer-app")
    try:
        sender(app, "jobs", "queue")
        seen = json.loads(run_subgate("status", "--json", cwd=server.workdir).stdout)["server"]
        assert (seen["connections"], seen["links"], seen["queues"]) == (1, 1, 1)
    finally:
        app.close()


def test_queues_show_gives_the_age_of_the_oldest_waiting_message(make_server):
    server = make_server()
    app = connect(server.url, container_id="newcomer-producer")
    try:
        snd = sender(app, "backlog", "queue")
        for n in range(2000):
            snd.send(Message(body=f"m{n}", durable=True))
    finally:
        app.close()
    shown = run_subgate("queues", "show", "backlog", cwd=server.workdir)
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(":", 1) for line in shown.stdout.splitlines())
    assert fields["depth"].strip() == "2000"
    oldest = fields["oldest"].strip()
    assert oldest != "-" and oldest.endswith(" ago)"), shown.stdout
    as_json = json.loads(run_subgate("queues", "show", "backlog", "--json", cwd=server.workdir).stdout)
    assert as_json["oldest"] is not None and as_json["oldest"].endswith("Z")
