"""TLS on the second listener: the server's ``ssl.SSLContext``, and one connection's TLS layer without I/O.

Owns building the context from ``--tls-cert``, ``--tls-key``, ``--tls-ca`` and ``--tls-verify-client``
(``server_context``), and ``TlsLayer``: Python's ``ssl.SSLObject`` over two memory BIOs, so TLS never touches the
socket. ``gateway.channel_io`` reads the socket as before and hands the bytes to ``receive`` (which advances the
handshake and returns whatever plaintext they complete), and writes what ``encrypt`` and ``output`` return. The
handshake therefore never blocks the reactor: it advances as bytes arrive, like the SASL phase after it, and the
handshake deadline (``--handshake-timeout``) covers it. Its CPU cost (one signature per connection) is paid on
the reactor thread.

Thread rule: reactor thread only.
"""

from __future__ import annotations

import ssl
from typing import Any

_READ_CHUNK = 256 * 1024


class TlsConfigError(Exception):
    """The TLS options name files that cannot be used (missing, unreadable, not PEM, key not matching)."""


class TlsFailure(Exception):
    """The peer broke off or failed the TLS exchange (wrong CA, no certificate, plain text on the TLS port)."""


def server_context(cert: str, key: str, ca: str = "", verify_client: bool = False) -> ssl.SSLContext:
    """The context of the TLS listener: TLS 1.2 or later, the server's certificate, and the client certificate
    policy: none asked for without ``ca``; with ``ca`` a client may present one (it must then verify), and with
    ``verify_client`` it must.

    Raises:
        TlsConfigError: a file is missing or unusable, or ``verify_client`` is set without ``ca``.
    """
    if not cert or not key:
        raise TlsConfigError("the TLS listener needs --tls-cert and --tls-key")
    if verify_client and not ca:
        raise TlsConfigError("--tls-verify-client needs --tls-ca (the CAs client certificates are checked against)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load --tls-cert {cert} / --tls-key {key}: {exc}") from exc
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"cannot load --tls-ca {ca}: {exc}") from exc
        context.verify_mode = ssl.CERT_REQUIRED if verify_client else ssl.CERT_OPTIONAL
    return context


class TlsLayer:
    """One connection's TLS session, fed and drained by the caller (see the module docstring)."""

    __slots__ = ("_incoming", "_outgoing", "_tls", "established", "announced")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.established = False  # the handshake is over
        self.announced = False  # the caller has acted on the end of the handshake (ChannelIO)

    def receive(self, data: bytes) -> bytes:
        """Bytes read from the socket; returns the plaintext they complete (often none during the handshake).
        Whatever the exchange has to answer is then in ``output``.

        Raises:
            TlsFailure: the handshake failed or the peer sent something that is not TLS.
        """
        self._incoming.write(data)
        try:
            if not self.established:
                self._tls.do_handshake()
                self.established = True
            return self._read_plaintext()
        except ssl.SSLWantReadError:
            return b""
        except ssl.SSLError as exc:
            raise TlsFailure(exc.reason or str(exc)) from exc

    def _read_plaintext(self) -> bytes:
        chunks = []
        while True:
            try:
                chunk = self._tls.read(_READ_CHUNK)
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):  # no more for now; or the peer's close_notify
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def encrypt(self, data: bytes) -> bytes:
        """``data`` as TLS records (with anything else the session has to send), ready for the socket."""
        if data:
            self._tls.write(data)
        return self._outgoing.read()

    def output(self) -> bytes:
        """Bytes the session has to send (handshake messages, alerts, tickets)."""
        return self._outgoing.read()

    def peer_certificate(self) -> dict[str, Any] | None:
        """The client's certificate as ``ssl`` decodes it, when it presented one (and it verified)."""
        if not self.established:
            return None
        return self._tls.getpeercert() or None
