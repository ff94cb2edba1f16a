"""What plain-text connections from other hosts may do: ``--require-tls`` refuses them, and SASL PLAIN is offered
to them only with ``--allow-plain-without-tls``; loopback clients and TLS clients are served as before.

"Another host" is this machine's own non-loopback address: the server listens on 0.0.0.0, and a client that
connects to that address arrives from it (the kernel picks it as the source). Without such an address the tests
skip (the rules themselves are unit-tested in tests/unit/engine/test_transport_policy.py).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from proton import ConnectionException

from tests.e2e.test_tls import add_user, client_domain, exchange_over_tls, tls_flags, tls_port
from tests.support.amqp import connect
from tests.support.certificates import Pki, make_pki
from tests.support.rawamqp import SASL_AUTH, SASL_HEADER, SASL_OK, RawClient
from tests.support.survival import Bystander, assert_clean_log

ALICE = {"user": "alice", "password": "s3cret"}


def non_loopback_address() -> str | None:
    """One of this machine's own IPv4 addresses that is not loopback (no packet is sent to find it)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
        with socket.socket() as check:
            check.bind((address, 0))
    except OSError:
        return None
    return None if address.startswith("127.") else address


OTHER_HOST = non_loopback_address()
pytestmark = pytest.mark.skipif(OTHER_HOST is None, reason="this machine has no non-loopback IPv4 address")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def add_alice(tmp_path: Path, store_url: str) -> None:
    add_user(tmp_path, store_url, "alice", "s3cret")


def plain_offer(port: int, host: str) -> tuple[list[str], int]:
    """(mechanisms offered, outcome) of a SASL PLAIN login as alice on a plain connection to ``host``."""
    with RawClient(port, host=host) as raw:
        code = raw.sasl("PLAIN", b"\x00alice\x00s3cret")
        return raw.offered, code


def test_require_tls_refuses_plain_connections_from_other_hosts(make_server, sqlite_url, pki, tmp_path):
    add_alice(tmp_path, sqlite_url)
    server = make_server(sqlite_url, "--listen", "0.0.0.0:0", "--require-tls",
                         *tls_flags(pki)[2:], "--tls-listen", "0.0.0.0:0")  # fmt: skip
    # from another host, plain text: the socket is closed at once, without an answer
    with RawClient(server.port, host=OTHER_HOST) as raw:
        try:
            raw.send(SASL_HEADER)
        except OSError:
            pass  # already closed
        assert raw.read_to_eof() == b""
    with pytest.raises(ConnectionException):
        connect(f"amqp://{OTHER_HOST}:{server.port}", timeout=10, **ALICE)
    # from another host over TLS, and from loopback in plain text: served
    exchange_over_tls(tls_port(server), client_domain(pki.ca.cert), "require-tls", host=OTHER_HOST, **ALICE)
    with Bystander(server, **ALICE) as local:
        local.exchange()
    assert "TLS is required for connections from" in server.log()
    assert_clean_log(server)


def test_plain_is_offered_to_other_hosts_only_over_tls(make_server, sqlite_url, pki, tmp_path):
    add_alice(tmp_path, sqlite_url)
    server = make_server(sqlite_url, "--listen", "0.0.0.0:0", *tls_flags(pki)[2:], "--tls-listen", "0.0.0.0:0")
    offered, code = plain_offer(server.port, OTHER_HOST)
    assert offered == ["ANONYMOUS"] and code == SASL_AUTH
    with pytest.raises(ConnectionException):
        connect(f"amqp://{OTHER_HOST}:{server.port}", timeout=10, **ALICE)
    assert plain_offer(server.port, "127.0.0.1") == (["PLAIN", "ANONYMOUS"], SASL_OK)
    exchange_over_tls(tls_port(server), client_domain(pki.ca.cert), "plain-over-tls", host=OTHER_HOST, **ALICE)
    assert "loopback clients only" in server.log()
    assert_clean_log(server)


def test_allow_plain_without_tls(make_server, sqlite_url, tmp_path):
    add_alice(tmp_path, sqlite_url)
    server = make_server(sqlite_url, "--listen", "0.0.0.0:0", "--allow-plain-without-tls")
    assert plain_offer(server.port, OTHER_HOST) == (["PLAIN", "ANONYMOUS"], SASL_OK)
    conn = connect(f"amqp://{OTHER_HOST}:{server.port}", timeout=10, **ALICE)
    conn.close()
