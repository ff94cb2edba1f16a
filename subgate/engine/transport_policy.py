"""What a connection may do given how it arrived: over TLS or not, from a loopback address or not, with a client
certificate or not. Rules only (no sockets, no ssl objects; ``gateway.channel_io`` and ``gateway.sasl_phase``
apply them); docs/security.md, "TLS", "SASL EXTERNAL" and "Plain-text connections", says the same in prose.

- ``is_loopback``: 127.0.0.0/8, ::1 and IPv4-mapped loopback (``::ffff:127.0.0.1``). Anything that is not an IP
  address (a Unix socket's empty name) counts as loopback: it cannot come from another host.
- ``plain_refusal``: with ``--require-tls``, a plain-text connection from a non-loopback address is refused.
- ``offered_mechanisms``: ``EXTERNAL`` only on TLS with a verified client certificate; ``SCRAM-SHA-256`` with
  ``--sasl-scram``, everywhere (the password never crosses the wire), before the password mechanism ``PLAIN``;
  ``PLAIN`` on TLS, on loopback, or anywhere with ``--allow-plain-without-tls``; ``ANONYMOUS`` always (whether it
  lets anybody in is the anonymous policy's business).
- ``certificate_name``: the principal a client certificate names: its subject's common name (CN), when the subject
  has exactly one, non-empty.
- ``external_identity``: the principal a SASL EXTERNAL login asks for: the certificate's, and only that one (an
  authorization identity naming somebody else fails).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EXTERNAL = "EXTERNAL"
SCRAM_SHA_256 = "SCRAM-SHA-256"
PLAIN = "PLAIN"
ANONYMOUS = "ANONYMOUS"


@dataclass(frozen=True)
class TransportRules:
    """The operator's settings these rules read (``--require-tls``, ``--allow-plain-without-tls``,
    ``--sasl-scram``)."""

    require_tls: bool = False
    allow_plain_without_tls: bool = False
    scram: bool = False

    def refusal(self, address: str, *, tls: bool) -> str | None:
        """Why a connection accepted from ``address`` is refused at once, or None."""
        return None if tls else plain_refusal(address, require_tls=self.require_tls)

    def mechanisms(self, address: str, *, tls: bool, client_certificate: bool) -> list[str]:
        """The SASL mechanisms offered to a connection from ``address``."""
        return offered_mechanisms(
            tls=tls,
            client_certificate=client_certificate,
            loopback=is_loopback(address),
            allow_plain_without_tls=self.allow_plain_without_tls,
            scram=self.scram,
        )


def is_loopback(address: str) -> bool:
    """Whether ``address`` (an IP address as ``socket.accept`` gives it) is this host's own."""
    if not address:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def plain_refusal(address: str, *, require_tls: bool) -> str | None:
    """Why a plain-text connection from ``address`` is refused, or None when it may go on."""
    if require_tls and not is_loopback(address):
        return f"TLS is required for connections from {address} (require-tls): use the TLS listener"
    return None


def offered_mechanisms(
    *, tls: bool, client_certificate: bool, loopback: bool, allow_plain_without_tls: bool, scram: bool = False
) -> list[str]:
    """The SASL mechanisms offered to one connection, most specific first."""
    offered = []
    if tls and client_certificate:
        offered.append(EXTERNAL)
    if scram:
        offered.append(SCRAM_SHA_256)
    if tls or loopback or allow_plain_without_tls:
        offered.append(PLAIN)
    offered.append(ANONYMOUS)
    return offered


def certificate_name(certificate: Mapping[str, Any] | None) -> str | None:
    """The subject CN of a certificate decoded as ``ssl.SSLObject.getpeercert()`` gives it, or None."""
    if not certificate:
        return None
    names = [
        value
        for rdn in certificate.get("subject", ())
        for key, value in rdn
        if key == "commonName" and isinstance(value, str)
    ]
    if len(names) != 1 or not names[0].strip():
        return None
    return names[0]


def external_identity(authzid: str | None, name: str | None) -> str | None:
    """The principal a SASL EXTERNAL login is checked as: the certificate's ``name``; None (refused) without
    one, or when the client asks to act as another identity."""
    if name is None:
        return None
    if authzid and authzid != name:
        return None
    return name
