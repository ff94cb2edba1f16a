"""Salted password hashes for the PLAIN mechanism: making them and checking a password against one.

This module owns the encoding ``pbkdf2_sha256$<iterations>$<salt b64>$<hash b64>`` (PBKDF2-HMAC-SHA256, a
random 16-byte salt, standard padded base64). It knows nothing about where hashes are stored or about SASL.
Checking is CPU-bound (tens of milliseconds at the default cost), so callers run ``verify_password`` off the
reactor thread. Stdlib only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

SCHEME = "pbkdf2_sha256"
DEFAULT_ITERATIONS = 200_000
# A stored hash asking for more rounds than this is treated as malformed rather than run.
MAX_ITERATIONS = 10_000_000
SALT_BYTES = 16
_DIGEST = "sha256"
_DIGEST_BYTES = hashlib.sha256().digest_size


def hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS) -> str:
    """Hash ``password`` with a fresh random salt.

    Raises:
        ValueError: ``iterations`` is not between 1 and ``MAX_ITERATIONS``.
    """
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between 1 and {MAX_ITERATIONS}, not {iterations}")
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _derive(password, salt, iterations)
    return f"{SCHEME}${iterations}${_b64encode(salt)}${_b64encode(digest)}"


def verify_password(password: str, encoded: str) -> bool:
    """Tell whether ``password`` matches ``encoded``; False (not an exception) if ``encoded`` is malformed."""
    parsed = _parse(encoded)
    if parsed is None:
        return False
    iterations, salt, expected = parsed
    return hmac.compare_digest(_derive(password, salt, iterations), expected)


def _derive(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_DIGEST, password.encode("utf-8"), salt, iterations)


def _parse(encoded: str) -> tuple[int, bytes, bytes] | None:
    parts = encoded.split("$")
    if len(parts) != 4 or parts[0] != SCHEME:
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
