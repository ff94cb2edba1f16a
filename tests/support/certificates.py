"""Certificates made by the tests for the TLS listener (the ``cryptography`` package; nothing is checked in).

``make_pki(directory)`` writes a CA, a server certificate for 127.0.0.1 and localhost signed by it, and a
``client(name)`` factory for client certificates whose subject CN is ``name``; ``rogue`` is a second CA that the
server does not trust, with a client certificate of its own. Keys are EC P-256 (fast to make and to use).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Credentials:
    """A certificate and its private key as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A CA that signs certificates into ``directory``."""

    name: str
    directory: Path
    cert: Path
    _key: ec.EllipticCurvePrivateKey
    _certificate: x509.Certificate

    def issue(self, common_name: str, *, server: bool = False) -> Credentials:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(_subject(common_name), key, issuer=self._certificate.subject)
        if server:
            loopback = ipaddress.ip_address("127.0.0.1")
            names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(loopback)]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        certificate = builder.sign(self._key, hashes.SHA256())
        stem = self.directory / f"{self.name}-{common_name}"
        return _write(stem, certificate, key)


@dataclass(frozen=True)
class Pki:
    ca: Authority
    server: Credentials
    rogue: Authority

    def client(self, common_name: str) -> Credentials:
        return self.ca.issue(common_name)


def make_authority(directory: Path, name: str) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _subject(f"subgate test CA {name}")
    builder = _builder(subject, key, issuer=subject)
    builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    builder = builder.add_extension(
        x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
        ),
        critical=True,
    )  # fmt: skip
    certificate = builder.sign(key, hashes.SHA256())
    written = _write(directory / f"ca-{name}", certificate, key)
    return Authority(name, directory, written.cert, key, certificate)


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_authority(directory, "main")
    return Pki(ca=ca, server=ca.issue("localhost", server=True), rogue=make_authority(directory, "rogue"))


def _subject(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "subgate tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])  # fmt: skip


def _builder(subject: x509.Name, key: ec.EllipticCurvePrivateKey, *, issuer: x509.Name) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
    )


def _write(stem: Path, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Credentials:
    cert_path, key_path = stem.with_suffix(".crt"), stem.with_suffix(".key")
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Credentials(cert_path, key_path)
