"""What the initial response of a SASL PLAIN (RFC 4616) or ANONYMOUS (RFC 4505) ``sasl-init`` says.

Owns the parsing of the mechanisms' messages, no frames and no I/O (``gateway.sasl`` owns the exchange). Bytes that
can never authenticate raise ``BadCredentials``: the exchange answers them with an authentication failure.
"""

from __future__ import annotations

PLAIN = "PLAIN"
ANONYMOUS = "ANONYMOUS"


class BadCredentials(Exception):
    """Credentials that can never authenticate (malformed PLAIN message, foreign authzid)."""

    def __init__(self, username: str | None) -> None:
        super().__init__(username)
        self.username = username


def identity(mechanism: str, response: bytes | None) -> tuple[str | None, str | None]:
    """(username, password) of a sasl-init; (None, None) for ANONYMOUS, whose trace string is not identity."""
    if mechanism == PLAIN:
        return parse_plain(response)
    return None, None


def parse_plain(response: bytes | None) -> tuple[str, str]:
    """Split an RFC 4616 message ``[authzid] NUL authcid NUL passwd`` into (authcid, passwd).

    Raises:
        BadCredentials: the message is missing or malformed (not UTF-8 included), or asks to act as another
            identity (authzid), which we never allow.
    """
    if response is None:
        raise BadCredentials(None)
    parts = response.split(b"\x00")
    if len(parts) != 3:
        raise BadCredentials(None)
    try:
        authzid, authcid, passwd = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise BadCredentials(None) from None
    if not authcid or not passwd:
        raise BadCredentials(authcid or None)
    if authzid and authzid != authcid:
        raise BadCredentials(authcid)
    return authcid, passwd
