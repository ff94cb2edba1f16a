"""SCRAM-SHA-256 (RFC 5802 with RFC 7677's hash), the server side, pure: the keys a password gives, the parsing of
the client's two messages, the server's two messages and the proof check. No I/O, no frames (``gateway.sasl``
carries the messages in sasl-init, sasl-challenge, sasl-response and sasl-outcome), no store
(``storage.passwords`` keeps the keys in the password-hash column).

What is accepted (docs/security.md, "SCRAM-SHA-256"):

- the GS2 header ``n,,`` (the client does not do channel binding) or ``y,,`` (it could, but thinks we cannot);
  ``p=...`` (channel binding asked for) fails: we offer no SCRAM-SHA-256-PLUS. An authorization identity
  (``a=``) other than the user itself fails, as in PLAIN.
- a user name (``n=``) with ``=2C`` and ``=3D`` for ``,`` and ``=``; any other ``=`` fails. It is matched exactly,
  as PLAIN and EXTERNAL match names (no SASLprep: names are what ``subgate users add`` was given).
- a mandatory extension (``m=``) fails; other extensions are ignored.
- passwords are SASLprep'd (``engine.saslprep``) before they are salted (``prepare_password``).

Every malformed message raises ``ScramError`` (never anything else): the exchange answers it with an
authentication failure. The proof is checked in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from subgate.engine.saslprep import SaslprepError, saslprep

MECHANISM = "SCRAM-SHA-256"
_HASH = "sha256"
KEY_BYTES = hashlib.sha256().digest_size
NONCE_BYTES = 24  # of randomness in our part of the nonce (32 characters of URL-safe base64)
FAKE_SALT_BYTES = 16
_GS2_HEADERS = ("n,,", "y,,")


class ScramError(Exception):
    """A SCRAM message that can never authenticate (malformed, or asking for what we do not do)."""


@dataclass(frozen=True)
class ScramKeys:
    """What the server holds for one user (RFC 5802 section 3): never the password nor SaltedPassword.

    ``known`` False: made-up keys for a user we cannot log in by SCRAM (unknown, or only a legacy hash); the
    exchange runs as for anybody else and then fails.
    """

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes
    known: bool = True


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _HASH).digest()


def prepare_password(password: str) -> bytes:
    """The password as SCRAM salts it: SASLprep'd (stored-string profile), UTF-8. A password SASLprep refuses
    (control characters, code points unassigned in Unicode 3.2 such as most emoji) is used as it is, as
    PostgreSQL does: PLAIN then works the same, and a SCRAM client that prepares it fails on its side."""
    try:
        return saslprep(password).encode("utf-8")
    except SaslprepError:
        return password.encode("utf-8")


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2-HMAC-SHA256 of the prepared password."""
    return hashlib.pbkdf2_hmac(_HASH, prepare_password(password), salt, iterations)


def keys_from_salted(salted: bytes, salt: bytes, iterations: int) -> ScramKeys:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    client_key = _hmac(salted, b"Client Key")
    return ScramKeys(salt, iterations, hashlib.sha256(client_key).digest(), _hmac(salted, b"Server Key"))


def fake_keys(secret: bytes, username: str, iterations: int) -> ScramKeys:
    """Keys for a user SCRAM cannot log in: a salt that is the same each time the name is asked about (derived
    from ``secret``), so the server-first message does not tell a known user from an unknown one."""
    seed = _hmac(secret, b"scram-fake-user\x00" + username.encode("utf-8", "surrogatepass"))
    salt = _hmac(seed, b"salt")[:FAKE_SALT_BYTES]
    return ScramKeys(salt, iterations, _hmac(seed, b"stored"), _hmac(seed, b"server"), known=False)


@dataclass(frozen=True)
class ClientFirst:
    """A parsed client-first-message."""

    username: str
    nonce: str
    bare: str  # client-first-message-bare, as sent (part of the AuthMessage)
    gs2_header: str


def parse_client_first(message: bytes | None) -> ClientFirst:
    """Parse ``gs2-header client-first-message-bare`` (RFC 5802 section 7).

    Raises:
        ScramError: it is missing or malformed, asks for channel binding, names another authorization identity
            or a mandatory extension.
    """
    text = _text(message)
    flag, authzid, bare = _split(text, 2)
    if flag.startswith("p="):
        raise ScramError("channel binding is not supported")
    if flag not in ("n", "y"):
        raise ScramError("bad GS2 channel-binding flag")
    attributes = bare.split(",")
    if attributes[0].startswith("m="):
        raise ScramError("mandatory extensions are not supported")
    if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
        raise ScramError("client-first-message must start with n= and r=")
    username = _unescape(attributes[0][2:])
    nonce = attributes[1][2:]
    _check_nonce(nonce)
    if authzid:
        if not authzid.startswith("a=") or _unescape(authzid[2:]) != username:
            raise ScramError("an authorization identity other than the user is not allowed")
        # RFC 5802: the c= of client-final repeats the whole GS2 header, authzid included.
    return ClientFirst(username, nonce, bare, f"{flag},{authzid},")


def server_first(client: ClientFirst, keys: ScramKeys, server_nonce: str | None = None) -> str:
    """``r=<client nonce + ours>,s=<salt>,i=<iterations>``; ``server_nonce`` is drawn from ``secrets`` unless
    given (tests)."""
    ours = secrets.token_urlsafe(NONCE_BYTES) if server_nonce is None else server_nonce
    return f"r={client.nonce}{ours},s={_b64(keys.salt)},i={keys.iterations}"


def verify_client_final(client: ClientFirst, first: str, keys: ScramKeys, message: bytes | None) -> str:
    """Check the client-final-message against the exchange so far; return the server-final message ``v=...``.

    Raises:
        ScramError: it is malformed, its channel binding or nonce is not the exchange's, or the proof is wrong
            (always for keys that are not ``known``).
    """
    text = _text(message)
    without_proof, separator, proof_text = text.rpartition(",p=")
    if not separator:
        raise ScramError("client-final-message has no proof")
    attributes = without_proof.split(",")
    if len(attributes) < 2 or not attributes[0].startswith("c=") or not attributes[1].startswith("r="):
        raise ScramError("client-final-message must start with c= and r=")
    if _b64decode(attributes[0][2:]) != client.gs2_header.encode("utf-8"):
        raise ScramError("channel binding does not match the GS2 header")
    if not hmac.compare_digest(attributes[1][2:].encode("utf-8"), _nonce_of(first).encode("utf-8")):
        raise ScramError("nonce is not the one of this exchange")
    proof = _b64decode(proof_text)
    if len(proof) != KEY_BYTES:
        raise ScramError("proof has the wrong length")
    auth_message = f"{client.bare},{first},{without_proof}".encode()
    client_signature = _hmac(keys.stored_key, auth_message)
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
    valid = hmac.compare_digest(hashlib.sha256(client_key).digest(), keys.stored_key)
    if not (valid and keys.known):
        raise ScramError("invalid proof")
    return "v=" + _b64(_hmac(keys.server_key, auth_message))


# -- helpers -------------------------------------------------------------------------------------------------


def _text(message: bytes | None) -> str:
    if not message:
        raise ScramError("no message")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("message is not UTF-8") from None


def _split(text: str, count: int) -> list[str]:
    parts = text.split(",", count)
    if len(parts) != count + 1:
        raise ScramError("message has too few fields")
    return parts


def _unescape(name: str) -> str:
    """A saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` (or an empty name) is malformed."""
    if not name or "\x00" in name:
        raise ScramError("empty or bad user name")
    unescaped = name.replace("=2C", ",").replace("=3D", "=")
    if unescaped.count("=") != name.count("=3D"):
        raise ScramError("bad '=' escape in user name")
    return unescaped


def _check_nonce(nonce: str) -> None:
    # printable = %x21-2B / %x2D-7E: visible ASCII but ','
    if not nonce or not all("\x21" <= c <= "\x7e" and c != "," for c in nonce):
        raise ScramError("bad client nonce")


def _nonce_of(first: str) -> str:
    return first.split(",", 1)[0][2:]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ScramError("bad base64") from None
