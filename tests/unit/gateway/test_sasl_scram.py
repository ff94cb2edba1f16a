"""gateway.sasl's SCRAM-SHA-256 round: the client is the ``scramp`` package's (not our code), the frames are
hand-built with test_sasl's encoder, and every peer mistake ends in sasl-outcome auth or a protocol violation,
never an exception out of ``receive_data``."""

from __future__ import annotations

import pytest
from proton import Data, Described
from scramp import ScramClient

from subgate.engine import scram
from subgate.gateway.sasl import (
    AMQP_HEADER,
    SASL_HEADER,
    CredentialsReceived,
    ProofChecked,
    ProtocolViolation,
    SaslDone,
    SaslError,
    SaslServer,
    SaslState,
)
from tests.unit.gateway.test_sasl import described, drain, frame, lst, sasl_init, smallulong, vbin

MECHS = ("SCRAM-SHA-256", "PLAIN", "ANONYMOUS")
SALT = bytes(range(16))
ITERATIONS = 4096


def performatives(out: bytes) -> list[tuple[int, list[object]]]:
    """The server's SASL frames as (descriptor, fields), binary fields copied out of proton's buffers."""
    found = []
    while out:
        size, doff = int.from_bytes(out[:4], "big"), out[4]
        data = Data()
        data.decode(out[doff * 4 : size])
        data.rewind()
        data.next()
        value = data.get_object()
        assert isinstance(value, Described)
        fields = [bytes(f) if isinstance(f, memoryview) else f for f in value.value]
        found.append((int(value.descriptor), fields))
        out = out[size:]
    return found


def keys_for(password: str) -> scram.ScramKeys:
    return scram.keys_from_salted(scram.salted_password(password, SALT, ITERATIONS), SALT, ITERATIONS)


def sasl_response(response: bytes | None) -> bytes:
    return frame(described(smallulong(0x43), lst(b"\x40" if response is None else vbin(response))))


def started(client: ScramClient) -> tuple[SaslServer, CredentialsReceived]:
    server = SaslServer(MECHS)
    server.receive_data(SASL_HEADER)
    server.data_to_send()
    server.receive_data(sasl_init("SCRAM-SHA-256", client.get_client_first().encode()))
    (event,) = drain(server)
    assert isinstance(event, CredentialsReceived) and event.password is None
    return server, event


def challenged(client: ScramClient, keys: scram.ScramKeys) -> SaslServer:
    server, _ = started(client)
    server.challenge(keys)
    ((code, fields),) = performatives(server.data_to_send())
    assert code == 0x42 and server.state is SaslState.AWAIT_RESPONSE
    client.set_server_first(bytes(fields[0]).decode())
    return server


def test_scramp_client_logs_in_and_checks_our_server_signature():
    client = ScramClient(["SCRAM-SHA-256"], "alice", "wonderland")
    server, event = started(client)
    assert event.mechanism == "SCRAM-SHA-256" and event.username == "alice"
    server.challenge(keys_for("wonderland"))
    ((_, fields),) = performatives(server.data_to_send())
    client.set_server_first(bytes(fields[0]).decode())
    server.receive_data(sasl_response(client.get_client_final().encode()) + AMQP_HEADER)
    assert drain(server) == [ProofChecked("alice", True)]
    server.complete(True, "alice")
    ((code, fields),) = performatives(server.data_to_send())
    assert code == 0x44 and fields[0] == 0
    client.set_server_final(bytes(fields[1]).decode())  # raises unless v= is the right ServerSignature
    assert drain(server) == [SaslDone(True, "alice", AMQP_HEADER)]


def test_wrong_password_is_a_failed_proof_then_sasl_outcome_auth():
    client = ScramClient(["SCRAM-SHA-256"], "alice", "guess")
    server = challenged(client, keys_for("wonderland"))
    server.receive_data(sasl_response(client.get_client_final().encode()))
    assert drain(server) == [ProofChecked("alice", False)]
    with pytest.raises(SaslError, match="not valid"):
        server.complete(True)
    server.complete(False)
    ((code, fields),) = performatives(server.data_to_send())
    assert code == 0x44 and fields[:1] == [1] and (len(fields) == 1 or fields[1] is None)
    assert drain(server) == [SaslDone(False, "alice", b"")]


def test_made_up_keys_fail_even_for_the_password_they_might_match():
    client = ScramClient(["SCRAM-SHA-256"], "nobody", "x")
    server = challenged(client, scram.fake_keys(b"secret", "nobody", ITERATIONS))
    server.receive_data(sasl_response(client.get_client_final().encode()))
    assert drain(server) == [ProofChecked("nobody", False)]


@pytest.mark.parametrize(
    "response",
    [None, b"", b"\xff", b"c=biws", b"c=biws,r=x,p=AAAA", b"garbage"],
)
def test_malformed_client_final_is_a_failed_proof(response):
    client = ScramClient(["SCRAM-SHA-256"], "alice", "wonderland")
    server = challenged(client, keys_for("wonderland"))
    server.receive_data(sasl_response(response))
    events = drain(server)
    if response is None:  # no binary response at all: the frame itself is wrong
        assert isinstance(events[0], ProtocolViolation)
    else:
        assert events == [ProofChecked("alice", False)]


@pytest.mark.parametrize("first", [b"", b"p=tls-unique,,n=alice,r=abc", b"n,,n=a=lice,r=abc", b"\xff"])
def test_bad_client_first_fails_at_once(first):
    server = SaslServer(MECHS)
    server.receive_data(SASL_HEADER + sasl_init("SCRAM-SHA-256", first))
    server.data_to_send()
    assert drain(server) == [SaslDone(False, None, b"")]
    assert server.state is SaslState.FAILED


def test_another_performative_instead_of_the_response_is_a_violation():
    client = ScramClient(["SCRAM-SHA-256"], "alice", "wonderland")
    server = challenged(client, keys_for("wonderland"))
    server.receive_data(sasl_init("PLAIN", b"\x00alice\x00wonderland"))
    (event,) = drain(server)
    assert isinstance(event, ProtocolViolation) and "sasl-response" in event.description


def test_response_sent_before_the_challenge_waits_for_it():
    client = ScramClient(["SCRAM-SHA-256"], "alice", "wonderland")
    server, _ = started(client)
    server.receive_data(sasl_response(b"c=biws,r=early,p=AAAA"))  # too early: kept, read once we challenge
    assert drain(server) == []
    server.challenge(keys_for("wonderland"))
    assert drain(server) == [ProofChecked("alice", False)]


def test_challenge_only_for_a_scram_exchange():
    server = SaslServer(MECHS)
    server.receive_data(SASL_HEADER + sasl_init("PLAIN", b"\x00alice\x00wonderland"))
    drain(server)
    with pytest.raises(SaslError, match="challenge"):
        server.challenge(keys_for("x"))


def test_refused_at_once_without_a_challenge():
    client = ScramClient(["SCRAM-SHA-256"], "alice", "wonderland")
    server, _ = started(client)
    server.complete(False, code=4)  # e.g. over a connection limit
    ((code, fields),) = performatives(server.data_to_send())
    assert code == 0x44 and fields[0] == 4
