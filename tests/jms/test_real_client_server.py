"""The real Qpid JMS 2.10 client (tests/jms/java/JmsProbe.java) against ``subgate serve`` on a SQLite file store
(the shared ``make_server`` fixture): a durable subscription and its persistent messages across a clean restart
and a ``kill -9``; SASL PLAIN and SCRAM-SHA-256 with a user's password (and a wrong one refused); SASL EXTERNAL
over TLS with a client certificate from Java key and trust stores."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from tests.e2e.test_tls import add_user, tls_flags, tls_port
from tests.jms.probe import run_probe
from tests.support.certificates import Credentials, make_pki

pytestmark = pytest.mark.timeout(300)

# What the client throws for a refused login: jakarta.jms.JMSSecurityException or Qpid's subclass for SASL.
REFUSED = {"JMSSecurityException", "JMSSecuritySaslException"}


def test_durable_subscription_survives_a_restart_and_a_kill(make_server, sqlite_url):
    server = make_server(sqlite_url)
    prefix = f"r{uuid.uuid4().hex[:8]}"
    assert run_probe(server.url, ["durable-prepare"], prefix=f"{prefix}a").result("durable-prepare") == {"sent": 3}
    assert server.stop() == 0
    server.start()
    run = run_probe(server.url, ["durable-drain", "durable-prepare"], prefix=f"{prefix}a")
    assert run.result("durable-drain") == {"kept": ["kept-0", "kept-1", "kept-2"]}, "after a clean restart"
    assert run.result("durable-prepare") == {"sent": 3}
    server.kill()  # kill -9: the sends were confirmed, so they are in the journal
    server.start()
    drained = run_probe(server.url, ["durable-drain"], prefix=f"{prefix}a").result("durable-drain")
    assert drained == {"kept": ["kept-0", "kept-1", "kept-2"]}, "after kill -9"  # all three, once each, in order


def test_sasl_plain_and_scram_sha_256_with_a_password(make_server, sqlite_url, tmp_path):
    add_user(tmp_path, sqlite_url, "alice", "alice-secret")
    server = make_server(sqlite_url, "--sasl-scram")
    logins = [f"login:alice:{password}:{mechanism}" for mechanism in ("PLAIN", "SCRAM-SHA-256")
              for password in ("alice-secret", "wrong")]  # fmt: skip
    run = run_probe(server.url, [*logins, "login::"])
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        good = run.result(f"login:alice:alice-secret:{mechanism}")
        assert good["refused"] is None and good["bodies"] == ["logged-in"], mechanism
        assert run.result(f"login:alice:wrong:{mechanism}")["refused"] in REFUSED, mechanism
    assert run.result("login::")["refused"] in REFUSED  # a user exists: no ANONYMOUS
    assert server.log().count("principal 'alice'") >= 2


def java_stores(folder: Path, ca: Path, client: Credentials) -> tuple[Path, Path]:
    """(PKCS12 key store with the client's key and certificate, PKCS12 trust store with the CA); password
    'changeit'. The trust store is made by keytool: Java trusts a PKCS12 certificate only with its own marker."""
    key = serialization.load_pem_private_key(client.key.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(client.cert.read_bytes())
    keystore = folder / f"client-{client.cert.stem}.p12"
    keystore.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client",
            key,
            cert,
            None,
            serialization.BestAvailableEncryption(b"changeit"),  # type: ignore[arg-type]
        )
    )
    truststore = folder / "trust.p12"
    if truststore.exists():
        return keystore, truststore
    made = subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca), "-keystore", str(truststore),
         "-storetype", "PKCS12", "-storepass", "changeit"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    return keystore, truststore


def test_sasl_external_over_tls(make_server, sqlite_url, tmp_path):
    pki = make_pki(tmp_path / "pki")
    add_user(tmp_path, sqlite_url, "alice")
    server = make_server(sqlite_url, *tls_flags(pki, "--tls-ca", str(pki.ca.cert), "--tls-verify-client"))
    port = tls_port(server)

    def url(credentials: Credentials) -> str:
        keystore, truststore = java_stores(tmp_path, pki.ca.cert, credentials)
        return (
            f"amqps://127.0.0.1:{port}?transport.keyStoreLocation={keystore}&transport.keyStorePassword=changeit"
            f"&transport.keyStoreType=PKCS12&transport.trustStoreLocation={truststore}"
            "&transport.trustStorePassword=changeit&transport.trustStoreType=PKCS12&amqp.saslMechanisms=EXTERNAL"
        )

    got = run_probe(url(pki.client("alice")), ["login"]).result("login")
    assert got["refused"] is None and got["bodies"] == ["logged-in"]
    assert "principal 'alice'" in server.log()
    # A certificate whose CN names no principal is refused like a wrong password.
    assert run_probe(url(pki.client("mallory")), ["login"]).result("login")["refused"] in REFUSED
