"""Salted password hashes: making them, checking a PLAIN password against one, and the SCRAM keys they hold.

This module owns the two encodings of the password-hash column (standard padded base64 throughout):

- ``scram_sha256$<iterations>$<salt b64>$<StoredKey b64>$<ServerKey b64>``, written since SCRAM-SHA-256 came
  (docs/security.md, "SCRAM-SHA-256"): what RFC 5802 has the server keep (``engine.scram``), which serves both
  SCRAM and PLAIN (a PLAIN password is checked by deriving its StoredKey). It is not password-equivalent: it
  holds neither SaltedPassword nor ClientKey, from which a login could be forged.
- ``pbkdf2_sha256$<iterations>$<salt b64>$<hash b64>`` (legacy: PBKDF2-HMAC-SHA256 of the UTF-8 password, which
  is SCRAM's SaltedPassword when SASLprep leaves the password alone). Still checked for PLAIN; a successful
  PLAIN login rewrites it (``upgraded_hash``). SCRAM cannot use it without treating the row as
  password-equivalent, so it does not.

It knows nothing about where hashes are stored or about SASL frames. Checking is CPU-bound (tens of
milliseconds at the default cost), so callers run ``verify_password`` off the reactor thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from subgate.engine.scram import ScramKeys, keys_from_salted, prepare_password, salted_password

SCHEME = "scram_sha256"
LEGACY_SCHEME = "pbkdf2_sha256"
DEFAULT_ITERATIONS = 200_000
# A stored hash asking for more rounds than this is treated as malformed rather than run.
MAX_ITERATIONS = 10_000_000
SALT_BYTES = 16
_DIGEST = "sha256"
_DIGEST_BYTES = hashlib.sha256().digest_size


def hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS) -> str:
    """The SCRAM encoding of ``password`` with a fresh random salt.

    Raises:
        ValueError: ``iterations`` is not between 1 and ``MAX_ITERATIONS``.
    """
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between 1 and {MAX_ITERATIONS}, not {iterations}")
    salt = secrets.token_bytes(SALT_BYTES)
    return _encode(keys_from_salted(salted_password(password, salt, iterations), salt, iterations))


def legacy_hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS) -> str:
    """The legacy encoding (what ``hash_password`` wrote before SCRAM), for tests of the upgrade."""
    salt = secrets.token_bytes(SALT_BYTES)
    return f"{LEGACY_SCHEME}${iterations}${_b64encode(salt)}${_b64encode(_derive(password, salt, iterations))}"


def verify_password(password: str, encoded: str) -> bool:
    """Tell whether ``password`` matches ``encoded`` (either encoding); False (not an exception) if ``encoded``
    is malformed."""
    keys = scram_keys(encoded)
    if keys is not None:
        derived = keys_from_salted(salted_password(password, keys.salt, keys.iterations), keys.salt, keys.iterations)
        return hmac.compare_digest(derived.stored_key, keys.stored_key)
    parsed = _parse(encoded)
    if parsed is None:
        return False
    iterations, salt, expected = parsed
    return hmac.compare_digest(_derive(password, salt, iterations), expected)


def scram_keys(encoded: str) -> ScramKeys | None:
    """The SCRAM keys in ``encoded``; None for a legacy or malformed hash."""
    parts = encoded.split("$")
    if len(parts) != 5 or parts[0] != SCHEME:
        return None
    iterations = _parse_iterations(parts[1])
    salt, stored, server = (_b64decode(part) for part in parts[2:])
    if iterations is None or not salt or not _digest(stored) or not _digest(server):
        return None
    assert stored is not None and server is not None
    return ScramKeys(salt, iterations, stored, server)


def is_legacy(encoded: str) -> bool:
    """Whether ``encoded`` is a well-formed legacy hash (SCRAM cannot use it; a PLAIN login rewrites it)."""
    return _parse(encoded) is not None


def upgraded_hash(password: str, encoded: str) -> str | None:
    """The SCRAM encoding to store instead of the legacy ``encoded`` that ``password`` was just checked against;
    None when ``encoded`` is not legacy. The legacy hash is SaltedPassword for a password SASLprep leaves alone,
    so its salt and iterations are kept and nothing is hashed again; any other password is salted afresh."""
    parsed = _parse(encoded)
    if parsed is None:
        return None
    iterations, salt, digest = parsed
    if prepare_password(password) != password.encode("utf-8"):
        return hash_password(password, iterations=iterations)
    return _encode(keys_from_salted(digest, salt, iterations))


def _encode(keys: ScramKeys) -> str:
    fields = (_b64encode(keys.salt), _b64encode(keys.stored_key), _b64encode(keys.server_key))
    return "$".join((SCHEME, str(keys.iterations), *fields))


def _digest(raw: bytes | None) -> bool:
    return raw is not None and len(raw) == _DIGEST_BYTES


def _derive(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_DIGEST, password.encode("utf-8"), salt, iterations)


def _parse(encoded: str) -> tuple[int, bytes, bytes] | None:
    parts = encoded.split("$")
    if len(parts) != 4 or parts[0] != LEGACY_SCHEME:
        return None
    iterations = _parse_iterations(parts[1])
    salt = _b64decode(parts[2])
    digest = _b64decode(parts[3])
    if iterations is None or not salt or digest is None or len(digest) != _DIGEST_BYTES:
        return None
    return iterations, salt, digest


def _parse_iterations(text: str) -> int | None:
    # isdecimal() alone would accept non-ASCII digits such as "٣"; int() would accept "+5", " 5" and "1_000".
    if not (text.isascii() and text.isdecimal()):
        return None
    iterations = int(text)
    return iterations if 1 <= iterations <= MAX_ITERATIONS else None


def _b64encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _b64decode(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
