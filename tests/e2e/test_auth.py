"""SASL over real sockets, on SQLite and PostgreSQL: PLAIN against users added with ``subgate users add``, and
the anonymous policy (SASL ANONYMOUS, or no SASL layer at all) with and without users and flags.

Each case is checked twice: with the proton client (what an application sees: ``ConnectionException`` carrying
``amqp:unauthorized-access``) and on a raw socket (the exact sasl-outcome code, or which protocol header the
server answers a plain AMQP header with, and that it then closes the socket).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import ConnectionException

from tests.support.amqp import connect
from tests.support.cli import run_subgate
from tests.support.rawamqp import AMQP_HEADER, SASL_AUTH, SASL_HEADER, SASL_OK, RawClient
from tests.support.server import SubgateProcess
from tests.support.survival import Bystander, assert_still_serving

ALICE = {"user": "alice", "password": "s3cret"}


def subgate(tmp_path: Path, *args: str) -> str:
    result = run_subgate(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout


def add_alice(tmp_path: Path, store_url: str) -> None:
    """The user alice, an administrator (once a user exists only grants count: docs/permissions.md)."""
    subgate(tmp_path, "db", "upgrade", "--store", store_url)
    subgate(tmp_path, "users", "add", "alice", "--password", "s3cret", "--store", store_url)
    subgate(tmp_path, "roles", "assign", "admin", "alice", "--store", store_url)


def grant_anonymous_everything(tmp_path: Path, store_url: str) -> None:
    for permission in ("SELECT_TOPIC", "READ_TOPIC", "UPDATE_TOPIC", "MODIFY_TOPIC"):
        subgate(tmp_path, "grants", "add", permission, "--user", "anonymous", "--store", store_url)


def sasl_outcome(server: SubgateProcess, mechanism: str, response: bytes) -> int:
    """The sasl-outcome code for one exchange done by hand; after a failure the server must close the socket."""
    with RawClient(server.port) as raw:
        code = raw.sasl(mechanism, response)
        if code != SASL_OK:
            assert raw.read_to_eof() == b""
    return code


def answer_to_plain_amqp_header(server: SubgateProcess) -> bytes:
    """The protocol header the server answers a client that skips SASL with (it closes after a SASL header)."""
    with RawClient(server.port) as raw:
        raw.send(AMQP_HEADER)
        header = raw.read_exactly(len(AMQP_HEADER))
        if header == SASL_HEADER:
            assert raw.read_to_eof() == b""
    return header


def assert_refused(**connect_kwargs: object) -> str:
    with pytest.raises(ConnectionException) as refused:
        connect(**connect_kwargs)  # type: ignore[arg-type]
    return str(refused.value)


def test_plain_with_the_right_password_sends_and_receives(make_server, store_url, tmp_path):
    add_alice(tmp_path, store_url)
    server = make_server(store_url)
    assert sasl_outcome(server, "PLAIN", b"\x00alice\x00s3cret") == SASL_OK
    with Bystander(server, **ALICE) as alice:
        alice.exchange()


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "wrong"), ("bob", "s3cret"), ("ALICE", "s3cret")], ids=["wrong", "unknown", "case"]
)
def test_wrong_password_or_unknown_user_fails_and_others_keep_working(make_server, store_url, tmp_path, user, password):
    add_alice(tmp_path, store_url)
    server = make_server(store_url)
    with Bystander(server, **ALICE) as bystander:
        assert sasl_outcome(server, "PLAIN", f"\x00{user}\x00{password}".encode()) == SASL_AUTH
        message = assert_refused(url=server.url, user=user, password=password)
        assert "amqp:unauthorized-access" in message
        assert_still_serving(server, bystander, **ALICE)


POLICIES = [
    pytest.param(False, [], True, id="no-users-default"),
    pytest.param(True, [], False, id="users-default"),
    pytest.param(True, ["--allow-anonymous"], True, id="users-allow"),
    pytest.param(False, ["--no-allow-anonymous"], False, id="no-users-disallow"),
    pytest.param(True, ["--no-allow-anonymous"], False, id="users-disallow"),
]


@pytest.mark.parametrize(("users", "flags", "anonymous"), POLICIES)
def test_anonymous_policy(make_server, store_url, tmp_path, users, flags, anonymous):
    if users:
        add_alice(tmp_path, store_url)
        if anonymous:  # allowed in, but with users only grants count: the operator grants it what it may do
            grant_anonymous_everything(tmp_path, store_url)
    server = make_server(store_url, *flags)
    # SASL ANONYMOUS
    assert sasl_outcome(server, "ANONYMOUS", b"") == (SASL_OK if anonymous else SASL_AUTH)
    # no SASL layer: the plain AMQP header is answered in kind only when anonymous access is allowed
    assert answer_to_plain_amqp_header(server) == (AMQP_HEADER if anonymous else SASL_HEADER)
    if anonymous:
        for options in ({}, {"sasl_enabled": False}):
            with Bystander(server, **options) as client:
                client.exchange()
    else:
        assert "amqp:unauthorized-access" in assert_refused(url=server.url)
        assert "amqp:connection:framing-error" in assert_refused(url=server.url, sasl_enabled=False)
    if users:  # PLAIN keeps working whatever the anonymous policy
        assert_still_serving(server, **ALICE)


def test_users_added_and_removed_while_running_change_the_default_policy(make_server, store_url, tmp_path):
    server = make_server(store_url)
    with Bystander(server) as early, Bystander(server, sasl_enabled=False) as early_no_sasl:
        subgate(tmp_path, "users", "add", "alice", "--password", "s3cret", "--store", store_url)
        subgate(tmp_path, "roles", "assign", "admin", "alice", "--store", store_url)
        # The first check after the change is the no-SASL one: it used to answer from a cached "no users yet".
        assert answer_to_plain_amqp_header(server) == SASL_HEADER
        assert sasl_outcome(server, "ANONYMOUS", b"") == SASL_AUTH
        assert "amqp:unauthorized-access" in assert_refused(url=server.url)
        assert_still_serving(server, **ALICE)
        early.exchange()  # connections opened before the user existed are not dropped
        early_no_sasl.exchange()
        subgate(tmp_path, "users", "remove", "alice", "--store", store_url)
        assert answer_to_plain_amqp_header(server) == AMQP_HEADER
        assert sasl_outcome(server, "ANONYMOUS", b"") == SASL_OK
        assert_still_serving(server, early)
