"""storage.passwords: PBKDF2 hashes round-trip, reject wrong passwords and never raise on bad encodings."""

from __future__ import annotations

import base64
import hashlib

import pytest

from subgate.storage.passwords import DEFAULT_ITERATIONS, MAX_ITERATIONS, SALT_BYTES, hash_password, verify_password

FAST = 1_000  # keeps the suite quick; the default cost is exercised once below


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def test_round_trip_with_default_cost() -> None:
    encoded = hash_password("s3cret")
    scheme, iterations, salt, digest = encoded.split("$")
    assert (scheme, int(iterations)) == ("pbkdf2_sha256", DEFAULT_ITERATIONS)
    assert len(base64.b64decode(salt)) == SALT_BYTES
    assert len(base64.b64decode(digest)) == 32
    assert verify_password("s3cret", encoded)


@pytest.mark.parametrize("password", ["", "pässwörd", "日本語のパスワード", "with$dollar", "a" * 1000])
def test_round_trip(password: str) -> None:
    assert verify_password(password, hash_password(password, iterations=FAST))


@pytest.mark.parametrize("attempt", ["s3cre", "s3cret ", "S3CRET", ""])
def test_wrong_password(attempt: str) -> None:
    assert not verify_password(attempt, hash_password("s3cret", iterations=FAST))


def test_matches_independent_pbkdf2() -> None:
    salt = bytes(range(16))
    digest = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 5)
    assert verify_password("pw", f"pbkdf2_sha256$5${b64(salt)}${b64(digest)}")


def test_different_salts_give_different_hashes() -> None:
    first, second = hash_password("same", iterations=FAST), hash_password("same", iterations=FAST)
    assert first != second
    assert first.split("$")[2] != second.split("$")[2]
    assert verify_password("same", first) and verify_password("same", second)


GOOD = hash_password("pw", iterations=FAST)
_, _, GOOD_SALT, GOOD_DIGEST = GOOD.split("$")


def _stable_id(encoded: str) -> str:
    """The test id without GOOD's random salt and digest: pytest-xdist workers must collect the same ids."""
    return encoded.replace(GOOD_SALT, "SALT").replace(GOOD_DIGEST, "DIGEST").replace(GOOD_DIGEST[:-4], "DIGEST[:-4]")


@pytest.mark.parametrize(
    "encoded",
    [
        "",
        "pw",
        "pbkdf2_sha256$1000$abc",  # too few parts
        f"{GOOD}$extra",  # too many parts
        GOOD.replace("pbkdf2_sha256", "pbkdf2_sha1"),  # unknown scheme
        f"pbkdf2_sha256$$${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$abc${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$0${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$-5${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$+5${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$1_000${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$\u0661\u0660\u0660\u0660${GOOD_SALT}${GOOD_DIGEST}",  # Arabic-Indic digits
        f"pbkdf2_sha256${MAX_ITERATIONS + 1}${GOOD_SALT}${GOOD_DIGEST}",
        f"pbkdf2_sha256$1000$${GOOD_DIGEST}",  # empty salt
        f"pbkdf2_sha256$1000$not*base64${GOOD_DIGEST}",
        f"pbkdf2_sha256$1000$AAA${GOOD_DIGEST}",  # bad padding
        f"pbkdf2_sha256$1000$sält${GOOD_DIGEST}",  # non-ASCII
        f"pbkdf2_sha256$1000${GOOD_SALT}$",  # empty digest
        f"pbkdf2_sha256$1000${GOOD_SALT}${b64(b'short')}",  # wrong digest length
        f"pbkdf2_sha256$1000${GOOD_SALT}${GOOD_DIGEST[:-4]}",
    ],
    ids=_stable_id,
)
def test_malformed_encodings_are_false_not_errors(encoded: str) -> None:
    assert verify_password("pw", encoded) is False


@pytest.mark.parametrize("iterations", [0, -1, MAX_ITERATIONS + 1])
def test_hash_rejects_bad_iterations(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        hash_password("pw", iterations=iterations)
