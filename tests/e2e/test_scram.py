"""SASL SCRAM-SHA-256 over real sockets against ``subgate serve --sasl-scram``, with a client that is not ours: the
``scramp`` package's ``ScramClient`` drives raw SASL frames (sasl-init, the sasl-challenge, sasl-response, and the
server-final message in the sasl-outcome's additional-data, which scramp checks), then a proton transport opens the
connection and a message goes through. Also: a wrong password is sasl-outcome auth and counted by the login
throttle; an unknown user gets a server-first message like anybody's; a user with a legacy PBKDF2 hash is refused
by SCRAM until a PLAIN login rewrites the row; without the flag SCRAM is not offered; SCRAM over TLS.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from proton import Delivery, Message, symbol
from scramp import ScramClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from subgate.storage.db import make_engine
from subgate.storage.models import Principal
from subgate.storage.passwords import legacy_hash_password
from subgate.storage.permissions import assign_role
from subgate.storage.principals import add_principal
from tests.e2e.test_tls import client_context, tls_flags, tls_port
from tests.support.certificates import Pki, make_pki
from tests.support.cli import run_subgate
from tests.support.rawamqp import (
    SASL_AUTH,
    SASL_CHALLENGE,
    SASL_FRAME,
    SASL_HEADER,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OK,
    SASL_OUTCOME,
    SASL_RESPONSE,
    RawClient,
    frame,
    performative,
)
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import assert_clean_log

SCRAM = "SCRAM-SHA-256"


class ScramLogin:
    """One SCRAM-SHA-256 login on ``raw``: what the server offered, sent and answered."""

    def __init__(self, raw: RawClient, user: str, password: str) -> None:
        client = ScramClient([SCRAM], user, password)
        init = performative(SASL_INIT, [symbol(SCRAM), client.get_client_first().encode(), None])
        raw.send(SASL_HEADER + frame(init, frame_type=SASL_FRAME))
        assert raw.read_exactly(len(SASL_HEADER)) == SASL_HEADER
        mechanisms = raw.read_frame()
        assert mechanisms.descriptor == SASL_MECHANISMS
        self.offered = [str(name) for name in mechanisms.fields[0].elements]
        challenge = raw.read_frame()
        self.server_first = ""
        if challenge.descriptor == SASL_OUTCOME:  # refused at once
            self.code = int(challenge.fields[0])
            return
        assert challenge.descriptor == SASL_CHALLENGE, challenge
        self.server_first = challenge.fields[0].decode()
        client.set_server_first(self.server_first)
        response = performative(SASL_RESPONSE, [client.get_client_final().encode()])
        raw.send(frame(response, frame_type=SASL_FRAME))
        outcome = raw.read_frame()
        assert outcome.descriptor == SASL_OUTCOME, outcome
        self.code = int(outcome.fields[0])
        if self.code == SASL_OK:
            client.set_server_final(outcome.fields[1].decode())  # raises unless the server proved it has the keys

    @property
    def salt_and_iterations(self) -> tuple[str, str]:
        fields = dict(field.split("=", 1) for field in self.server_first.split(","))
        return fields["s"], fields["i"]


def scram_login(server: SubgateProcess, user: str, password: str, **raw_kwargs: object) -> ScramLogin:
    with RawClient(server.port, **raw_kwargs) as raw:  # type: ignore[arg-type]
        return ScramLogin(raw, user, password)


def exchange(raw: RawClient, address: str) -> str:
    """Open the AMQP connection after SASL, send one message to ``address`` and receive it back."""
    connection = raw.start_amqp("scram-client")
    session = connection.session()
    session.open()
    sender = session.sender("scram-sender")
    sender.target.address = address
    sender.open()
    receiver = session.receiver("scram-receiver")
    receiver.source.address = address
    receiver.open()
    receiver.flow(1)
    raw.pump(lambda: sender.credit > 0, "credit for the sender")
    delivery = sender.delivery(b"1")
    sender.send(Message(body="sent after SCRAM").encode())
    sender.advance()
    raw.pump(lambda: delivery.remote_state == Delivery.ACCEPTED, "the broker to accept the message")
    raw.pump(lambda: receiver.current is not None and not receiver.current.partial, "the message")
    message = Message()
    message.decode(receiver.recv(receiver.current.pending))
    return str(message.body)


LEGACY = legacy_hash_password("0ld-s3cret", iterations=10_000)


def subgate(cwd: Any, *args: str) -> None:
    result = run_subgate(*args, cwd=cwd)
    assert result.returncode == 0, result.stderr


@contextmanager
def rows(store_url: str) -> Iterator[Session]:
    """A session on the store, committed at the end."""
    engine = make_engine(store_url)
    try:
        with Session(engine) as session, session.begin():
            yield session
    finally:
        engine.dispose()


def password_hash(store_url: str, name: str) -> str:
    with rows(store_url) as session:
        return str(session.scalar(select(Principal.password_hash).where(Principal.name == name)))


@pytest.fixture(scope="module")
def module_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("scram-pki"))


@pytest.fixture(scope="module")
def server(request, tmp_path_factory, module_pki) -> Iterator[SubgateProcess]:
    """``--sasl-scram`` on the plain and a TLS listener. alice (an administrator) is added by 'subgate users add';
    bob, carol and dave have legacy PBKDF2 rows from before SCRAM."""
    flags = ("--sasl-scram", "--login-free-failures", "100", *tls_flags(module_pki))
    with module_server(request, tmp_path_factory, "scram", extra=flags) as served:
        subgate(served.workdir, "users", "add", "alice", "--password", "s3cret", "--store", served.store_url)
        with rows(served.store_url) as session:
            assign_role(session, "admin", "alice")
            for name in ("bob", "carol", "dave"):
                add_principal(session, name, LEGACY)
        yield served


def test_users_add_writes_the_scram_encoding(server):
    assert password_hash(server.store_url, "alice").startswith("scram_sha256$200000$")


def test_scram_login_then_a_message_goes_through(server):
    with RawClient(server.port) as raw:
        login = ScramLogin(raw, "alice", "s3cret")
        assert login.offered == [SCRAM, "PLAIN", "ANONYMOUS"]
        assert login.code == SASL_OK
        assert exchange(raw, "scram-queue") == "sent after SCRAM"
    with RawClient(server.port) as raw:  # PLAIN checks the same stored keys
        assert raw.sasl("PLAIN", b"\x00alice\x00s3cret") == SASL_OK


def test_scram_over_tls(server, module_pki):
    with RawClient(tls_port(server), tls=client_context(module_pki, None)) as raw:
        login = ScramLogin(raw, "alice", "s3cret")
        assert login.offered == [SCRAM, "PLAIN", "ANONYMOUS"] and login.code == SASL_OK
        assert exchange(raw, "scram-tls-queue") == "sent after SCRAM"


def test_wrong_password_and_unknown_user_fail_and_are_counted(server):
    wrong = scram_login(server, "alice", "guess-1", source="127.0.0.3")
    assert wrong.code == SASL_AUTH
    first = scram_login(server, "nobody", "guess-2", source="127.0.0.3")
    again = scram_login(server, "nobody", "guess-3", source="127.0.0.3")
    assert first.code == again.code == SASL_AUTH
    # an unknown user's salt is the same each time and its iterations are a real user's: nothing tells them apart
    assert first.salt_and_iterations == again.salt_and_iterations
    assert first.salt_and_iterations[1] == wrong.salt_and_iterations[1]
    assert first.salt_and_iterations[0] != wrong.salt_and_iterations[0]
    assert scram_login(server, "alice", "s3cret").code == SASL_OK  # and the right password still works
    log = server.log()
    assert "authentication failed for 'alice' from ('127.0.0.3'" in log
    assert "(SCRAM-SHA-256; failures lately: 1 from 127.0.0.3, 1 for 'alice'" in log
    assert "(SCRAM-SHA-256; failures lately: 3 from 127.0.0.3, 2 for 'nobody'" in log
    assert "guess-" not in log and "s3cret" not in log


def test_a_legacy_hash_is_upgraded_by_a_plain_login_then_scram_works(server):
    assert scram_login(server, "bob", "0ld-s3cret").code == SASL_AUTH  # SCRAM cannot use a legacy hash
    assert "'bob' has a password hash from before SCRAM-SHA-256" in server.log()
    with RawClient(server.port) as raw:
        assert raw.sasl("PLAIN", b"\x00bob\x000ld-s3cret") == SASL_OK
    upgraded = password_hash(server.store_url, "bob")
    _, iterations, salt, digest = LEGACY.split("$")
    assert upgraded.split("$")[:3] == ["scram_sha256", iterations, salt] and digest not in upgraded
    login = scram_login(server, "bob", "0ld-s3cret")
    assert login.code == SASL_OK and login.salt_and_iterations == (salt, iterations)
    with RawClient(server.port) as raw:  # PLAIN goes on working against the new row
        assert raw.sasl("PLAIN", b"\x00bob\x000ld-s3cret") == SASL_OK
    with RawClient(server.port) as raw:  # a failed PLAIN login leaves a legacy row alone
        assert raw.sasl("PLAIN", b"\x00carol\x00wrong") == SASL_AUTH
    assert password_hash(server.store_url, "carol") == LEGACY


def test_users_passwd_sets_a_scram_password(server):
    subgate(server.workdir, "users", "passwd", "dave", "--password", "n3w-s3cret", "--store", server.store_url)
    assert password_hash(server.store_url, "dave").startswith("scram_sha256$")
    assert scram_login(server, "dave", "n3w-s3cret").code == SASL_OK
    with RawClient(server.port) as raw:
        assert raw.sasl("PLAIN", b"\x00dave\x000ld-s3cret") == SASL_AUTH


def _challenged(server: SubgateProcess, user: str) -> RawClient:
    """A raw client from 127.0.0.4 that sent its client-first message and read the challenge."""
    raw = RawClient(server.port, source="127.0.0.4")
    client = ScramClient([SCRAM], user, "whatever")
    init = performative(SASL_INIT, [symbol(SCRAM), client.get_client_first().encode(), None])
    raw.send(SASL_HEADER + frame(init, frame_type=SASL_FRAME))
    assert raw.read_exactly(len(SASL_HEADER)) == SASL_HEADER
    assert raw.read_frame().descriptor == SASL_MECHANISMS
    assert raw.read_frame().descriptor == SASL_CHALLENGE
    return raw


AFTER_CHALLENGE = {
    "sasl-init-again": frame(performative(SASL_INIT, [symbol(SCRAM), b"n,,n=x,r=y", None]), frame_type=SASL_FRAME),
    "response-not-binary": frame(performative(SASL_RESPONSE, ["c=biws,r=x,p=AAAA"]), frame_type=SASL_FRAME),
    "response-empty-list": frame(performative(SASL_RESPONSE, []), frame_type=SASL_FRAME),
    "amqp-frame": frame(performative(0x10, ["container"])),
    "oversize": (70_000).to_bytes(4, "big") + b"\x02\x01\x00\x00",
    "garbage": b"\xff" * 16,
}


@pytest.mark.parametrize("sent", sorted(AFTER_CHALLENGE))
def test_protocol_violations_after_the_challenge_close_that_connection_only(server, sent):
    with _challenged(server, "mallory") as raw:
        raw.send(AFTER_CHALLENGE[sent])
        assert raw.read_to_eof() == b""  # closed without an outcome: a protocol violation
    assert scram_login(server, "alice", "s3cret").code == SASL_OK


def test_a_client_final_that_is_not_scram_is_a_counted_failure_and_a_hang_up_costs_nothing(server):
    with _challenged(server, "mallory") as raw:
        raw.send(frame(performative(SASL_RESPONSE, [b"not a client-final message"]), frame_type=SASL_FRAME))
        outcome = raw.read_frame()
        assert outcome.descriptor == SASL_OUTCOME and int(outcome.fields[0]) == SASL_AUTH
    assert "(SCRAM-SHA-256; failures lately: 1 from 127.0.0.4, 1 for 'mallory'" in server.log()
    for _ in range(3):
        _challenged(server, "mallory").close()  # leaves with its challenge unanswered
    with RawClient(server.port, source="127.0.0.4") as raw:  # a client-first that cannot be parsed: not counted
        init = performative(SASL_INIT, [symbol(SCRAM), b"p=tls-unique,,n=mallory,r=abc", None])
        raw.send(SASL_HEADER + frame(init, frame_type=SASL_FRAME))
        raw.read_exactly(len(SASL_HEADER))
        raw.read_frame()
        outcome = raw.read_frame()
        assert outcome.descriptor == SASL_OUTCOME and int(outcome.fields[0]) == SASL_AUTH
    assert "failures lately: 2 from 127.0.0.4" not in server.log()
    assert scram_login(server, "alice", "s3cret").code == SASL_OK


def test_no_traceback_in_the_log(server):
    assert server.alive()
    assert_clean_log(server)


def test_scram_is_not_offered_without_the_flag(make_server):
    plain = make_server(None)
    login = scram_login(plain, "alice", "s3cret")
    assert login.offered == ["PLAIN", "ANONYMOUS"] and login.code == SASL_AUTH and not login.server_first
    assert plain.alive()
