"""Every input that was ever a finding of an atheris target, or that the issue names as hostile, replayed through
the target's ``test_one`` (no atheris needed): the contract each target checks must hold for it.

Add a finding here as soon as it is fixed: the target's name and the input, with a word on what it broke.
"""

from __future__ import annotations

import base64
import importlib

import pytest

from subgate.gateway.sasl import SASL_HEADER

INPUTS: list[tuple[str, bytes, str]] = [
    ("jms", b"n = " + b"1" * 5000, "int() raised ValueError past 4,300 digits (fixed in tokens._number)"),
    ("jms", b"s LIKE '%_" + b"a" * 4000 + b"%'", "a searched run with _ would cost 4,000 steps per character"),
    ("jms", b"(" * 5000 + b"a" + b")" * 5000, "nesting past the limit"),
    ("jms", b"NOT " * 3000 + b"a", "NOTs past the limit"),
    ("topics", b"*(a+)+b", "catastrophic backtracking under Python re (7 s on one 26-character path)"),
    ("topics", b"?(.*)*x/(a|a)*b", "catastrophic split-path patterns"),
    ("topics", b"*(?:a{0,1000}){1000}", "a program over RE2's memory bound: refused"),
    ("topics", b"#" + b"////".join([b"*a(b|c)*d"] * 200), "a long selector set of regexes"),
    ("codec", b"\x00" * 100_000 + b"\x40", "a described type nested 100,000 deep"),
    ("codec", b"\xc0\xff\xff" * 20_000, "lists nested past the stack, each declaring 255 bytes"),
    ("codec", b"\xd0\xff\xff\xff\xff\xff\xff\xff\xff", "a list declaring 4 GiB and 4 billion elements"),
    ("codec", b"\xf0\x00\x00\x00\x08\xff\xff\xff\xff\x40", "an array of 4 billion nulls in 8 bytes"),
    ("codec", b"\x00\x53\x73\xc0\x05\x02\xa1\x02\xff\xfe", "properties with a message-id of invalid UTF-8"),
    ("sasl", SASL_HEADER + b"\xff\xff\xff\xff\x02\x01\x00\x00", "a frame declaring 4 GiB"),
    ("sasl", SASL_HEADER + b"\x00\x00\x00\x08\x02\x01\x00\x00" * 500, "heartbeats only"),
    ("sasl", b"AMQP\x03\x01\x00\x00" + b"\x00" * 4000, "zero-sized frames"),
    (
        "store",
        b"\x00p|9223372036854775808|",
        "a bookmark seq of 2^63 reached SQLite and held the writer",
    ),
    ("store", b"\x00p|" + b"9" * 5000 + b"|", "int() of a bookmark seq past 4,300 digits raised ValueError"),
    ("store", b"\x00p\x00q|1|", "a bookmark publisher id with U+0000 (PostgreSQL cannot bind it)"),
    ("store", b"\x01\xff\xffe\x00|,b|ed\x14.", "a publisher id with lone surrogates passed the fast path to the store"),
    ("store", b"\x02\x00c\x1f" + b"n" * 600, "a durable subscription name over its column's 512 characters"),
    ("store", b"\x05t/" + b"x" * 2000, "a $management topic name over its column's 1,024 characters"),
    (
        "frames",
        base64.b64decode(
            "AAAAEQIAAAAAUxfABAGhAWMAAAAaAgAAAABTEcANBEBDcAAAAApwAAAACgAAAB8CAAAAAFMSwBIHoQFuQ0JAQEAAUynABAGhAXEAAAAf"
            "AgAAAABTEsASB6EBbkNCQEBAAFMpwAQBoQFxAAAAGwIAAAAAUxTABgNDQ6ABdABTdaADYWJjAAAADgIAAAAAUxfAAQA="
        ),
        "an end, then a handle-in-use later in the same read: the transfer after it was forwarded (a stale watch set)",
    ),
]


@pytest.mark.parametrize(("target", "data", "what"), INPUTS, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(INPUTS)])
def test_a_past_finding_keeps_the_contract(target: str, data: bytes, what: str) -> None:
    importlib.import_module(f"tests.fuzz.atheris_targets.{target}_target").test_one(data)
