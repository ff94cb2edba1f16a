"""The rules of engine.transport_policy: loopback, --require-tls, the mechanisms offered, certificate names."""

from __future__ import annotations

import pytest

from subgate.engine.transport_policy import (
    TransportRules,
    certificate_name,
    external_identity,
    is_loopback,
    offered_mechanisms,
    plain_refusal,
)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("", True),
        ("192.0.2.2", False),
        ("10.0.0.1", False),
        ("fd00::2", False),
        ("::ffff:192.0.2.2", False),
        ("fe80::1%eth0", False),
        ("not-an-address", False),
    ],
)
def test_is_loopback(address, loopback):
    assert is_loopback(address) is loopback


def test_require_tls_refuses_plain_connections_from_other_hosts_only():
    assert plain_refusal("192.0.2.2", require_tls=True) is not None
    assert "require-tls" in (plain_refusal("10.1.2.3", require_tls=True) or "")
    assert plain_refusal("127.0.0.1", require_tls=True) is None
    assert plain_refusal("::1", require_tls=True) is None
    assert plain_refusal("192.0.2.2", require_tls=False) is None
    rules = TransportRules(require_tls=True)
    assert rules.refusal("192.0.2.2", tls=True) is None  # the TLS listener is never refused for it
    assert rules.refusal("192.0.2.2", tls=False) is not None


@pytest.mark.parametrize(
    ("tls", "certificate", "loopback", "allow_plain", "expected"),
    [
        (False, False, True, False, ["PLAIN", "ANONYMOUS"]),
        (False, False, False, False, ["ANONYMOUS"]),
        (False, False, False, True, ["PLAIN", "ANONYMOUS"]),
        (True, False, False, False, ["PLAIN", "ANONYMOUS"]),
        (True, True, False, False, ["EXTERNAL", "PLAIN", "ANONYMOUS"]),
        (False, True, True, False, ["PLAIN", "ANONYMOUS"]),  # no certificate without TLS: never EXTERNAL
    ],
)
def test_offered_mechanisms(tls, certificate, loopback, allow_plain, expected):
    offered = offered_mechanisms(
        tls=tls, client_certificate=certificate, loopback=loopback, allow_plain_without_tls=allow_plain
    )
    assert offered == expected


def test_rules_offer_plain_by_address():
    assert TransportRules().mechanisms("192.0.2.2", tls=False, client_certificate=False) == ["ANONYMOUS"]
    assert TransportRules().mechanisms("127.0.0.1", tls=False, client_certificate=False)[0] == "PLAIN"
    allowed = TransportRules(allow_plain_without_tls=True)
    assert allowed.mechanisms("192.0.2.2", tls=False, client_certificate=False)[0] == "PLAIN"


def subject(*pairs: tuple[str, str]) -> dict:
    return {"subject": tuple(((key, value),) for key, value in pairs)}


@pytest.mark.parametrize(
    ("certificate", "name"),
    [
        (subject(("organizationName", "acme"), ("commonName", "alice")), "alice"),
        (subject(("commonName", "jürgen")), "jürgen"),
        (subject(("organizationName", "acme")), None),
        (subject(("commonName", "alice"), ("commonName", "bob")), None),
        (subject(("commonName", "  ")), None),
        ({}, None),
        (None, None),
    ],
)
def test_certificate_name_is_the_one_subject_cn(certificate, name):
    assert certificate_name(certificate) == name


def test_external_identity_is_the_certificates_and_only_that():
    assert external_identity(None, "alice") == "alice"
    assert external_identity("", "alice") == "alice"
    assert external_identity("alice", "alice") == "alice"
    assert external_identity("root", "alice") is None
    assert external_identity(None, None) is None


@pytest.mark.parametrize(
    ("tls", "certificate", "loopback", "expected"),
    [
        (False, False, True, ["SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]),
        (False, False, False, ["SCRAM-SHA-256", "ANONYMOUS"]),  # the password never crosses the wire: offered
        (True, False, False, ["SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]),
        (True, True, False, ["EXTERNAL", "SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]),
    ],
)
def test_scram_is_offered_first_among_passwords_only_when_enabled(tls, certificate, loopback, expected):
    rules = TransportRules(scram=True)
    address = "127.0.0.1" if loopback else "192.0.2.2"
    assert rules.mechanisms(address, tls=tls, client_certificate=certificate) == expected
    assert "SCRAM-SHA-256" not in TransportRules().mechanisms(address, tls=tls, client_certificate=certificate)
