"""storage.passwords: hashes round-trip, reject wrong passwords and never raise on bad encodings; the SCRAM encoding
holds RFC 5802's keys; legacy PBKDF2 hashes still verify and are upgraded without a second PBKDF2."""

from __future__ import annotations

import base64
import hashlib

import pytest

from subgate.engine import scram
from subgate.storage.passwords import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    SALT_BYTES,
    hash_password,
    is_legacy,
    legacy_hash_password,
    scram_keys,
    upgraded_hash,
    verify_password,
)

FAST = 1_000  # keeps the suite quick; the default cost is exercised once below


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def test_round_trip_with_default_cost() -> None:
    encoded = hash_password("s3cret")
    scheme, iterations, salt, stored_key, server_key = encoded.split("$")
    assert (scheme, int(iterations)) == ("scram_sha256", DEFAULT_ITERATIONS)
    assert len(base64.b64decode(salt)) == SALT_BYTES
    assert len(base64.b64decode(stored_key)) == len(base64.b64decode(server_key)) == 32
    assert verify_password("s3cret", encoded)


HASHERS = [pytest.param(hash_password, id="scram"), pytest.param(legacy_hash_password, id="legacy")]
PASSWORDS = ["", "pässwörd", "日本語のパスワード", "with$dollar", "a" * 1000, "emoji \U0001f600", "tab\there"]


@pytest.mark.parametrize("hasher", HASHERS)
@pytest.mark.parametrize("password", PASSWORDS)
def test_round_trip(hasher, password: str) -> None:
    assert verify_password(password, hasher(password, iterations=FAST))


@pytest.mark.parametrize("hasher", HASHERS)
@pytest.mark.parametrize("attempt", ["s3cre", "s3cret ", "S3CRET", ""])
def test_wrong_password(hasher, attempt: str) -> None:
    assert not verify_password(attempt, hasher("s3cret", iterations=FAST))


def test_scram_encoding_holds_rfc_7677_keys_and_no_salted_password() -> None:
    # RFC 7677 section 3: "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    keys = scram.keys_from_salted(salted, salt, 4096)
    encoded = f"scram_sha256$4096${b64(salt)}${b64(keys.stored_key)}${b64(keys.server_key)}"
    assert verify_password("pencil", encoded) and not verify_password("pencil ", encoded)
    assert scram_keys(encoded) == keys
    assert b64(salted) not in encoded
    assert not is_legacy(encoded) and upgraded_hash("pencil", encoded) is None


def test_saslprep_spellings_of_one_password_match() -> None:
    # U+00A0 (no-break space) maps to a space, U+00AD (soft hyphen) to nothing, U+2168 (Roman IX) to "IX"
    encoded = hash_password("my password IX", iterations=FAST)
    assert verify_password("my\u00a0pass\u00adword \u2168", encoded)
    assert not verify_password("my  password IX", encoded)


def test_legacy_hash_upgrades_to_the_same_salted_password() -> None:
    legacy = legacy_hash_password("s3cret", iterations=FAST)
    assert is_legacy(legacy) and scram_keys(legacy) is None
    upgraded = upgraded_hash("s3cret", legacy)
    assert upgraded is not None and verify_password("s3cret", upgraded) and not verify_password("other", upgraded)
    _, iterations, salt, digest = legacy.split("$")
    assert upgraded.split("$")[1:3] == [iterations, salt]  # the legacy hash was SaltedPassword: reused
    expected = scram.keys_from_salted(base64.b64decode(digest), base64.b64decode(salt), FAST)
    assert scram_keys(upgraded) == expected
    assert digest not in upgraded  # and then discarded


def test_legacy_hash_of_a_password_saslprep_changes_is_salted_afresh() -> None:
    legacy = legacy_hash_password("no\u00a0break", iterations=FAST)
    upgraded = upgraded_hash("no\u00a0break", legacy)
    assert upgraded is not None and upgraded.split("$")[2] != legacy.split("$")[2]
    assert verify_password("no\u00a0break", upgraded) and verify_password("no break", upgraded)


def test_matches_independent_pbkdf2() -> None:
    salt = bytes(range(16))
    digest = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 5)
    assert verify_password("pw", f"pbkdf2_sha256$5${b64(salt)}${b64(digest)}")


def test_different_salts_give_different_hashes() -> None:
    first, second = hash_password("same", iterations=FAST), hash_password("same", iterations=FAST)
    assert first != second
    assert first.split("$")[2] != second.split("$")[2]
    assert verify_password("same", first) and verify_password("same", second)


GOOD = legacy_hash_password("pw", iterations=FAST)
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


SCRAM_GOOD = hash_password("pw", iterations=FAST)
_, _, S_SALT, S_STORED, S_SERVER = SCRAM_GOOD.split("$")


@pytest.mark.parametrize(
    "encoded",
    [
        f"scram_sha256$1000${S_SALT}${S_STORED}",  # too few parts
        f"{SCRAM_GOOD}$extra",
        f"scram_sha256$0${S_SALT}${S_STORED}${S_SERVER}",
        f"scram_sha256${MAX_ITERATIONS + 1}${S_SALT}${S_STORED}${S_SERVER}",
        f"scram_sha256$1000$${S_STORED}${S_SERVER}",
        f"scram_sha256$1000${S_SALT}${S_STORED[:-4]}${S_SERVER}",
        f"scram_sha256$1000${S_SALT}${S_STORED}$not*base64",
        f"scram_sha256$1000${S_SALT}${S_STORED}$",
    ],
    ids=lambda e: (
        e.replace(S_SALT, "SALT")
        .replace(S_STORED, "STORED")
        .replace(S_STORED[:-4], "STORED[:-4]")
        .replace(S_SERVER, "SERVER")
    ),
)
def test_malformed_scram_encodings_are_false_not_errors(encoded: str) -> None:
    assert verify_password("pw", encoded) is False
    assert scram_keys(encoded) is None


@pytest.mark.parametrize("iterations", [0, -1, MAX_ITERATIONS + 1])
def test_hash_rejects_bad_iterations(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        hash_password("pw", iterations=iterations)
