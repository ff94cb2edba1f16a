"""engine.scram and engine.saslprep: RFC 7677's SCRAM-SHA-256 example end to end, RFC 4013's SASLprep examples,
and every malformed or refused message an authentication failure (``ScramError``), never another exception."""

from __future__ import annotations

import base64
import hashlib
import random

import pytest

from subgate.engine import scram
from subgate.engine.saslprep import SaslprepError, saslprep

# RFC 7677 section 3
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def pencil_keys() -> scram.ScramKeys:
    return scram.keys_from_salted(scram.salted_password("pencil", SALT, 4096), SALT, 4096)


def test_rfc_7677_example() -> None:
    client = scram.parse_client_first(CLIENT_FIRST)
    assert (client.username, client.nonce, client.gs2_header) == ("user", "rOprNGfwEbeRWgbNEkqO", "n,,")
    first = scram.server_first(client, pencil_keys(), SERVER_NONCE)
    assert first == SERVER_FIRST
    assert scram.verify_client_final(client, first, pencil_keys(), CLIENT_FINAL) == SERVER_FINAL


def test_wrong_password_is_an_invalid_proof() -> None:
    client = scram.parse_client_first(CLIENT_FIRST)
    keys = scram.keys_from_salted(scram.salted_password("pencil!", SALT, 4096), SALT, 4096)
    with pytest.raises(scram.ScramError, match="invalid proof"):
        scram.verify_client_final(client, SERVER_FIRST, keys, CLIENT_FINAL)


def test_made_up_keys_never_authenticate_even_with_a_matching_proof() -> None:
    client = scram.parse_client_first(CLIENT_FIRST)
    keys = pencil_keys()
    fake = scram.ScramKeys(keys.salt, keys.iterations, keys.stored_key, keys.server_key, known=False)
    with pytest.raises(scram.ScramError):
        scram.verify_client_final(client, SERVER_FIRST, fake, CLIENT_FINAL)


def test_fake_keys_are_stable_per_name_and_secret_and_look_real() -> None:
    first, again = scram.fake_keys(b"secret", "nobody", 4096), scram.fake_keys(b"secret", "nobody", 4096)
    assert first == again and not first.known
    assert len(first.salt) == 16 and len(first.stored_key) == len(first.server_key) == 32
    assert scram.fake_keys(b"secret", "somebody", 4096).salt != first.salt
    assert scram.fake_keys(b"other", "nobody", 4096).salt != first.salt


def test_server_nonces_are_fresh_and_printable() -> None:
    client = scram.parse_client_first(CLIENT_FIRST)
    nonces = {scram.server_first(client, pencil_keys()).split(",")[0] for _ in range(20)}
    assert len(nonces) == 20
    for nonce in nonces:
        assert nonce.startswith("r=rOprNGfwEbeRWgbNEkqO") and len(nonce) >= 2 + 20 + 32
        assert all("\x21" <= c <= "\x7e" and c != "," for c in nonce[2:])


@pytest.mark.parametrize(
    ("message", "username", "gs2"),
    [
        (b"y,,n=user,r=abc", "user", "y,,"),  # the client could bind, thinks we cannot: fine (no -PLUS offered)
        (b"n,a=user,n=user,r=abc", "user", "n,a=user,"),  # authzid = the user itself
        (b"n,,n=a=2Cb=3Dc,r=abc", "a,b=c", "n,,"),
        (b"n,,n=j\xc3\xbcrgen,r=abc,x=ext", "j\u00fcrgen", "n,,"),  # UTF-8 name; an optional extension is ignored
        (b"n,,n==3D2C,r=abc", "=2C", "n,,"),
    ],
)
def test_client_first_accepted(message: bytes, username: str, gs2: str) -> None:
    client = scram.parse_client_first(message)
    assert (client.username, client.gs2_header) == (username, gs2)


def test_client_final_must_repeat_an_authzid_header() -> None:
    client = scram.parse_client_first(b"n,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(scram.ScramError, match="channel binding"):  # c=biws is "n,,", not "n,a=user,"
        scram.verify_client_final(client, SERVER_FIRST, pencil_keys(), CLIENT_FINAL)


@pytest.mark.parametrize(
    "message",
    [
        None,
        b"",
        b"\xff\xfe",
        b"n,,",
        b"n,n=user,r=abc",  # no authzid field
        b"p=tls-unique,,n=user,r=abc",  # channel binding asked for
        b"x,,n=user,r=abc",
        b"n,,m=ext,n=user,r=abc",  # a mandatory extension
        b"n,,r=abc,n=user",
        b"n,,n=user",
        b"n,,n=,r=abc",
        b"n,,n=us=er,r=abc",  # a bare '='
        b"n,,n=us=2Xer,r=abc",
        b"n,,n=u\x00ser,r=abc",
        b"n,,n=user,r=",
        b"n,,n=user,r=a b",
        b"n,,n=user,r=\xc3\xa4",
        b"n,a=other,n=user,r=abc",  # acting as somebody else
        b"n,b=user,n=user,r=abc",
    ],
)
def test_bad_client_first(message: bytes | None) -> None:
    with pytest.raises(scram.ScramError):
        scram.parse_client_first(message)


NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="


@pytest.mark.parametrize(
    "message",
    [
        None,
        b"",
        b"\xff",
        f"c=biws,r={NONCE}".encode(),  # no proof
        f"c=biws,r={NONCE},p=".encode(),
        f"c=biws,r={NONCE},p=AAAA".encode(),  # proof too short
        f"c=biws,r={NONCE},p=not*base64".encode(),
        f"c=biws,r={NONCE},p={PROOF[:-1]}".encode(),  # bad padding
        f"c=biws,r={NONCE}x,p={PROOF}".encode(),  # another nonce
        f"c=biws,r=rOprNGfwEbeRWgbNEkqO,p={PROOF}".encode(),  # the client's nonce alone
        f"c=eSws,r={NONCE},p={PROOF}".encode(),  # "y,," where we saw "n,,"
        f"c=cD10bHMtdW5pcXVlLCxkYXRh,r={NONCE},p={PROOF}".encode(),  # channel binding data
        f"c=bi\xc3\xa4,r={NONCE},p={PROOF}".encode(),
        f"r={NONCE},c=biws,p={PROOF}".encode(),
        f"c=biws,p={PROOF}".encode(),
        f"c=biws,r={NONCE},p={PROOF.replace('d', 'e', 1)}".encode(),  # a wrong proof
        f"c=biws,r={NONCE},x=ext,p={PROOF}".encode(),  # an extension is part of the AuthMessage: proof no longer fits
    ],
)
def test_bad_client_final(message: bytes | None) -> None:
    client = scram.parse_client_first(CLIENT_FIRST)
    with pytest.raises(scram.ScramError):
        scram.verify_client_final(client, SERVER_FIRST, pencil_keys(), message)


def test_password_is_saslprepped_before_salting() -> None:
    # RFC 4013's examples: SOFT HYPHEN mapped to nothing, U+2168 (Roman IX) to "IX" by NFKC
    assert scram.salted_password("I\u00adX", SALT, 4096) == scram.salted_password("IX", SALT, 4096)
    assert scram.salted_password("\u2168", SALT, 4096) == scram.salted_password("IX", SALT, 4096)
    # a password SASLprep refuses is used as it is (as PostgreSQL does), so it still works, over PLAIN
    expected = hashlib.pbkdf2_hmac("sha256", b"tab\there", SALT, 4096)
    assert scram.salted_password("tab\there", SALT, 4096) == expected


@pytest.mark.parametrize(
    ("source", "prepared"),
    [
        ("I\u00adX", "IX"),  # RFC 4013 section 3, examples 1-5
        ("user", "user"),
        ("USER", "USER"),
        ("\u00aa", "a"),
        ("\u2168", "IX"),
        ("a\u00a0b\u2003c", "a b c"),  # non-ASCII spaces
        ("\u0627\u0628", "\u0627\u0628"),  # right-to-left throughout
        ("", ""),
    ],
)
def test_saslprep(source: str, prepared: str) -> None:
    assert saslprep(source) == prepared


@pytest.mark.parametrize(
    "source",
    [
        "\u0007",  # RFC 4013 example 6: prohibited
        "\u0627\u0031",  # example 7: bidi, a RandALCat string not ending with one
        "a\u0627b",  # LCat with RandALCat
        "\ue000",  # private use
        "\U0001f600",  # unassigned in Unicode 3.2 (a stored string)
        "\ufffe",
        "a\u200eb",  # left-to-right mark (C.8)
    ],
)
def test_saslprep_refuses(source: str) -> None:
    with pytest.raises(SaslprepError):
        saslprep(source)


def test_saslprep_query_profile_lets_unassigned_through() -> None:
    assert saslprep("\U0001f600", allow_unassigned=True) == "\U0001f600"


def test_mutated_messages_only_ever_raise_scram_error() -> None:
    rng = random.Random(7677)
    client, keys = scram.parse_client_first(CLIENT_FIRST), pencil_keys()
    alphabet = b"=,nrpcmaxy2C3D\x00\xff\xc3biws" + bytes(range(0x20, 0x7F))
    for _ in range(3000):
        for original in (CLIENT_FIRST, CLIENT_FINAL):
            mutated = bytearray(original)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(mutated) + 1)
                if rng.random() < 0.5 and at < len(mutated):
                    del mutated[at]
                else:
                    mutated.insert(at, rng.choice(alphabet))
            try:
                if original is CLIENT_FIRST:
                    scram.parse_client_first(bytes(mutated))
                else:
                    scram.verify_client_final(client, SERVER_FIRST, keys, bytes(mutated))
            except scram.ScramError:
                pass
