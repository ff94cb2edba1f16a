"""What the initial response of a SASL PLAIN (RFC 4616), ANONYMOUS (RFC 4505) or EXTERNAL (RFC 4422 appendix A)
``sasl-init`` says.

Owns the parsing of the mechanisms' messages, no frames and no I/O (``gateway.sasl`` owns the exchange). Bytes that
can never authenticate raise ``BadCredentials``: the exchange answers them with an authentication failure.
"""

from __future__ import annotations

PLAIN = "PLAIN"
ANONYMOUS = "ANONYMOUS"
EXTERNAL = "EXTERNAL"


class BadCredentials(Exception):
    """Credentials that can never authenticate (malformed PLAIN message, foreign authzid)."""

    def __init__(self, username: str | None) -> None:
        super().__init__(username)
        self.username = username


def identity(mechanism: str, response: bytes | None) -> tuple[str | None, str | None]:
    """(username, password) of a sasl-init; (None, None) for ANONYMOUS, whose trace string is not identity; for
    EXTERNAL (the authorization identity asked for, or None, None): who it is comes from the TLS layer."""
    if mechanism == PLAIN:
        return parse_plain(response)
    if mechanism == EXTERNAL:
        return parse_external(response), None
    return None, None


def parse_external(response: bytes | None) -> str | None:
    """The authorization identity of an EXTERNAL message (UTF-8, empty: none; an absent response is the same).

    Raises:
        BadCredentials: the identity is not UTF-8 or holds a NUL.
    """
    if not response:
        return None
    try:
        authzid = response.decode("utf-8")
    except UnicodeDecodeError:
        raise BadCredentials(None) from None
    if "\x00" in authzid:
        raise BadCredentials(None)
    return authzid


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
