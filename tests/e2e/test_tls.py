"""The TLS listener (``--tls-listen``), with certificates the tests make (tests.support.certificates).

A proton client (``SSLDomain``) and rhea connect over TLS, send and receive; a client that does not trust the
server's CA, a client certificate from a CA the server does not trust, and a plain-text client on the TLS port all
fail cleanly, and the server keeps serving TLS and plain clients alike. SASL EXTERNAL: offered only over TLS with a
verified client certificate, whose subject CN must name a principal.
"""

from __future__ import annotations

import random
import re
import socket
import ssl
from pathlib import Path

import pytest
from proton import ConnectionException, SSLDomain, SSLException

from tests.support.amqp import connect, receive_bodies, receiver, send_all, sender
from tests.support.certificates import Credentials, Pki, make_pki
from tests.support.cli import run_subgate
from tests.support.rawamqp import SASL_AUTH, SASL_HEADER, SASL_OK, RawClient
from tests.support.rhea import RheaError, messages_of, rhea_available, run_rhea, summary_of
from tests.support.server import SubgateProcess
from tests.support.survival import Bystander, assert_clean_log

TLS_LINE = re.compile(r"accepting TLS on (\S+):(\d+)")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def tls_flags(pki: Pki, *extra: str) -> list[str]:
    return ["--tls-listen", "127.0.0.1:0", "--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key),
            *extra]  # fmt: skip


def tls_port(server: SubgateProcess) -> int:
    match = TLS_LINE.search(server.log())
    assert match, server.log()
    return int(match.group(2))


def client_domain(ca: Path, credentials: Credentials | None = None) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    if credentials is not None:
        domain.set_credentials(str(credentials.cert), str(credentials.key), None)
    return domain


def exchange_over_tls(port: int, domain: SSLDomain, address: str, host: str = "127.0.0.1", **kwargs: object) -> None:
    conn = connect(f"amqps://{host}:{port}", ssl_domain=domain, **kwargs)  # type: ignore[arg-type]
    try:
        rcv = receiver(conn, address, "queue")
        send_all(sender(conn, address, "queue"), [f"{address}-{i}" for i in range(3)])
        assert receive_bodies(rcv, 3) == [f"{address}-{i}" for i in range(3)]
    finally:
        conn.close()


def test_proton_client_sends_and_receives_over_tls(make_server, pki):
    server = make_server(None, *tls_flags(pki))
    port = tls_port(server)
    exchange_over_tls(port, client_domain(pki.ca.cert), "tls-proton")
    with Bystander(server) as plain:  # the plain listener serves as before
        plain.exchange()
    assert_clean_log(server)


def test_large_messages_and_many_clients_over_tls(make_server, pki):
    """Output larger than a socket buffer (TLS records queued while the socket is full), and several TLS clients
    at once next to plain ones."""
    server = make_server(None, *tls_flags(pki))
    port = tls_port(server)
    domain = client_domain(pki.ca.cert)
    bodies = [bytes([i]) * (3 * 1024 * 1024) for i in range(3)]
    conns = [connect(f"amqps://127.0.0.1:{port}", ssl_domain=domain) for _ in range(4)]
    try:
        rcv = receiver(conns[0], "tls-large", "queue", credit=10)
        send_all(sender(conns[1], "tls-large", "queue"), bodies)
        got = [rcv.receive(timeout=30) for _ in bodies]
        rcv.accept()
        assert [m.body for m in got] == bodies
        for i, conn in enumerate(conns[2:]):
            small = receiver(conn, f"tls-small-{i}", "queue")
            send_all(sender(conn, f"tls-small-{i}", "queue"), ["x", "y"])
            assert receive_bodies(small, 2) == ["x", "y"]
        with Bystander(server) as plain:
            plain.exchange()
    finally:
        for conn in conns:
            conn.close()
    assert_clean_log(server)


@pytest.mark.interop
@pytest.mark.skipif(not rhea_available(), reason="node and rhea are needed (scripts/install-test-deps)")
def test_rhea_sends_and_receives_over_tls(make_server, pki):
    server = make_server(None, *tls_flags(pki))
    url = f"amqps://127.0.0.1:{tls_port(server)}"
    tls = ["--ca", str(pki.ca.cert)]
    lines = run_rhea("send", "--url", url, *tls, "--address", "tls-rhea", "--capability", "queue", "--count", 3)
    assert summary_of(lines)["accepted"] == 3
    got = messages_of(run_rhea("receive", "--url", url, *tls, "--address", "tls-rhea", "--capability", "queue",
                               "--count", 3))  # fmt: skip
    assert [m["body"] for m in got] == ["message 0", "message 1", "message 2"]


def test_bad_tls_clients_fail_cleanly_and_others_are_served(make_server, pki, tmp_path):
    server = make_server(None, *tls_flags(pki, "--tls-ca", str(pki.ca.cert)))
    port = tls_port(server)
    good = client_domain(pki.ca.cert)
    # 1. the client does not trust the server's CA: its handshake fails, the server shrugs
    with pytest.raises((ConnectionException, SSLException)):
        connect(f"amqps://127.0.0.1:{port}", ssl_domain=client_domain(pki.rogue.cert), timeout=10)
    # 2. a client certificate from a CA the server does not trust
    rogue_client = pki.rogue.issue("mallory")
    with pytest.raises((ConnectionException, SSLException)):
        connect(f"amqps://127.0.0.1:{port}", ssl_domain=client_domain(pki.ca.cert, rogue_client), timeout=10)
    # 3. plain text on the TLS port: the server closes the socket (no AMQP answer in plain text)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(SASL_HEADER)
        assert _read_to_eof(raw)[:4] != b"AMQP"
    # 4. a plain-text AMQP client on the TLS port fails with a connection error
    with pytest.raises(ConnectionException):
        connect(f"amqp://127.0.0.1:{port}", timeout=10)
    # 5. a TLS client on the plain port gets the plain listener's SASL header, not a handshake
    context = ssl.create_default_context(cafile=str(pki.ca.cert))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, OSError)):
            context.wrap_socket(raw, server_hostname="localhost")
    # meanwhile and afterwards: good TLS clients and plain ones are served
    exchange_over_tls(port, good, "tls-after")
    # a client certificate (EXTERNAL is offered) with another mechanism chosen: no user "alice" is needed
    exchange_over_tls(port, client_domain(pki.ca.cert, pki.client("alice")), "tls-with-cert", allowed_mechs="ANONYMOUS")
    with Bystander(server) as plain:
        plain.exchange()
    assert server.alive()
    assert_clean_log(server)
    assert "TLS with" in server.log()


def _read_to_eof(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_tls_options_are_checked_at_start(make_server, pki, tmp_path):
    with pytest.raises(RuntimeError, match="needs --tls-ca"):
        make_server(None, *tls_flags(pki, "--tls-verify-client"))
    with pytest.raises(RuntimeError, match="cannot load --tls-cert"):
        make_server(None, "--tls-listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "missing.crt"),
                    "--tls-key", str(pki.server.key))  # fmt: skip


# -- SASL EXTERNAL ---------------------------------------------------------------------------------------------


def add_user(tmp_path: Path, store_url: str, name: str, password: str = "unused-pw") -> None:
    """A principal ``name`` with the admin role (a password it never needs over EXTERNAL)."""
    for args in (
        ("db", "upgrade"),
        ("users", "add", name, "--password", password),
        ("roles", "assign", "admin", name),
    ):
        result = run_subgate(*args, "--store", store_url, cwd=tmp_path)
        assert result.returncode == 0, result.stderr


def client_context(pki: Pki, credentials: Credentials | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca.cert))
    if credentials is not None:
        context.load_cert_chain(str(credentials.cert), str(credentials.key))
    return context


def external_outcome(port: int, pki: Pki, credentials: Credentials | None, authzid: bytes = b"") -> tuple[list, int]:
    """(mechanisms offered, sasl-outcome code) of a SASL EXTERNAL exchange done by hand over TLS."""
    with RawClient(port, tls=client_context(pki, credentials)) as raw:
        code = raw.sasl("EXTERNAL", authzid)
        return raw.offered, code


def test_external_maps_the_certificate_cn_to_a_principal(make_server, store_url, pki, tmp_path):
    add_user(tmp_path, store_url, "alice")
    server = make_server(store_url, *tls_flags(pki, "--tls-ca", str(pki.ca.cert), "--tls-verify-client"))
    port = tls_port(server)
    alice = pki.client("alice")
    offered, code = external_outcome(port, pki, alice)
    assert offered[0] == "EXTERNAL" and code == SASL_OK
    exchange_over_tls(port, client_domain(pki.ca.cert, alice), "external-proton", allowed_mechs="EXTERNAL")
    assert "principal 'alice'" in server.log()
    # a certificate whose CN is no principal, and alice's certificate asking to act as somebody else: as a wrong
    # password (sasl-outcome auth), and the proton client sees amqp:unauthorized-access
    assert external_outcome(port, pki, pki.client("bob"))[1] == SASL_AUTH
    assert external_outcome(port, pki, alice, authzid=b"root")[1] == SASL_AUTH
    assert external_outcome(port, pki, alice, authzid=b"alice")[1] == SASL_OK
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        connect(f"amqps://127.0.0.1:{port}", ssl_domain=client_domain(pki.ca.cert, pki.client("bob")),
                allowed_mechs="EXTERNAL", timeout=10)  # fmt: skip
    exchange_over_tls(port, client_domain(pki.ca.cert, alice), "external-after", allowed_mechs="EXTERNAL")
    assert_clean_log(server)


def test_external_is_offered_only_with_a_verified_client_certificate(make_server, store_url, pki, tmp_path):
    add_user(tmp_path, store_url, "alice")
    server = make_server(store_url, *tls_flags(pki, "--tls-ca", str(pki.ca.cert)))  # a certificate is optional
    port = tls_port(server)
    with RawClient(port, tls=client_context(pki, None)) as raw:  # TLS without a client certificate
        assert raw.sasl("EXTERNAL", b"") == SASL_AUTH  # not offered: refused
        assert "EXTERNAL" not in raw.offered and "PLAIN" in raw.offered
    with RawClient(server.port) as raw:  # the plain listener
        assert raw.sasl("EXTERNAL", b"") == SASL_AUTH
        assert "EXTERNAL" not in raw.offered
    offered, code = external_outcome(port, pki, pki.client("alice"))
    assert offered[0] == "EXTERNAL" and code == SASL_OK


@pytest.mark.interop
@pytest.mark.skipif(not rhea_available(), reason="node and rhea are needed (scripts/install-test-deps)")
def test_rhea_authenticates_with_external(make_server, sqlite_url, pki, tmp_path):
    add_user(tmp_path, sqlite_url, "alice")
    server = make_server(sqlite_url, *tls_flags(pki, "--tls-ca", str(pki.ca.cert), "--tls-verify-client"))
    url = f"amqps://127.0.0.1:{tls_port(server)}"
    alice = pki.client("alice")
    tls = ["--ca", str(pki.ca.cert), "--cert", str(alice.cert), "--key", str(alice.key), "--sasl-external"]
    lines = run_rhea("send", "--url", url, *tls, "--address", "ext-rhea", "--capability", "queue", "--count", 2)
    assert summary_of(lines)["accepted"] == 2
    assert "principal 'alice'" in server.log()
    bob = pki.client("bob")
    tls_bob = ["--ca", str(pki.ca.cert), "--cert", str(bob.cert), "--key", str(bob.key), "--sasl-external"]
    with pytest.raises(RheaError):
        run_rhea("send", "--url", url, *tls_bob, "--address", "ext-rhea", "--capability", "queue", timeout=15)


def test_the_handshake_deadline_covers_the_tls_handshake(make_server, pki):
    server = make_server(None, *tls_flags(pki), "--handshake-timeout", "1")
    port = tls_port(server)
    with socket.create_connection(("127.0.0.1", port), timeout=15) as stalled:
        stalled.sendall(b"\x16\x03\x01\x02\x00")  # the start of a ClientHello, never finished
        assert _read_to_eof(stalled) == b""  # closed by the server (the read would time out otherwise)
    exchange_over_tls(port, client_domain(pki.ca.cert), "tls-after-stall")
    assert "handshake not finished within 1s" in server.log()


def test_garbage_on_the_tls_port_ends_only_those_connections(make_server, pki):
    server = make_server(None, *tls_flags(pki))
    port = tls_port(server)
    rng = random.Random(19)
    with Bystander(server) as plain:
        for i in range(40):
            junk = rng.randbytes(rng.randrange(1, 4096))
            if i % 4 == 0:  # a TLS record header claiming a handshake, then junk
                junk = b"\x16\x03\x03" + len(junk).to_bytes(2, "big") + junk
            with socket.create_connection(("127.0.0.1", port), timeout=15) as raw:
                try:
                    raw.sendall(junk)
                    _read_to_eof(raw)
                except OSError:
                    pass  # reset by the server: as good as a close
        plain.exchange()
    exchange_over_tls(port, client_domain(pki.ca.cert), "tls-after-garbage")
    assert server.alive()
    assert_clean_log(server)
