"""Hostile input before and during the handshake, over real sockets (issue 11, defects 1, 3 and 4).

Each case sends bytes no well-behaved client sends: text fields that are not valid UTF-8 or symbols that are
not ASCII, in sasl-init and open. The server answers the one connection with a clear refusal (a SASL failure,
or ``open`` followed by ``close(amqp:decode-error)``), and keeps serving everybody else: ``assert_still_serving``
checks that a connection opened before the bad input and a new one both still work, and that the log holds
no traceback. The frames are written byte by byte (``tests.support.wirebytes``) because proton's encoder refuses
such strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_subgate
from tests.support.rawamqp import (
    AMQP_HEADER,
    CLOSE,
    OPEN,
    SASL_AUTH,
    SASL_FRAME,
    SASL_HEADER,
    SASL_MECHANISMS,
    RawClient,
    frame,
    parse_frames,
)
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import Bystander, assert_still_serving
from tests.support.wirebytes import binary, described_list, map32, null, string, sym

ALICE = {"user": "alice", "password": "s3cret"}
INVALID_UTF8 = [b"PL\x8aIN", b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"caf\xc3"]


def add_alice(workdir: Path, store_url: str) -> None:
    for args in (
        ("db", "upgrade"),
        ("users", "add", "alice", "--password", "s3cret"),
        ("roles", "assign", "admin", "alice"),
    ):
        result = run_subgate(*args, "--store", store_url, cwd=workdir)
        assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def shared_locked_server(tmp_path_factory) -> Iterator[SubgateProcess]:
    """A server with a user and anonymous access off: everything here happens before authentication."""
    workdir = tmp_path_factory.mktemp("hostile-locked")
    url = f"sqlite:///{workdir / 'subgate.db'}"
    add_alice(workdir, url)
    server = SubgateProcess(url, workdir, "--no-allow-anonymous").start()
    yield server
    if server.alive():
        server.stop(timeout=10)
    server.kill()


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "hostile") as server:
        yield server


@pytest.fixture
def locked_server(shared_locked_server: SubgateProcess) -> Iterator[SubgateProcess]:
    """The module's locked server; a test during which it dies fails, and the next one gets a fresh process."""
    if not shared_locked_server.alive():
        shared_locked_server.start()
    yield shared_locked_server
    if not shared_locked_server.alive():
        log = shared_locked_server.log()
        shared_locked_server.start()
        pytest.fail(f"the server died during this test:\n{log[-4000:]}")


def sasl_init(
    mechanism: bytes, response: bytes | None = b"\x00alice\x00s3cret", hostname: bytes | None = None
) -> bytes:
    fields = [sym(mechanism), null() if response is None else binary(response)]
    fields.append(null() if hostname is None else string(hostname))
    return frame(described_list(0x41, fields), frame_type=SASL_FRAME)


def refused_before_authentication(raw: RawClient, init: bytes) -> None:
    """The server answers the SASL header with its mechanisms, then fails or drops the exchange and closes."""
    raw.send(SASL_HEADER + init)
    assert raw.read_exactly(len(SASL_HEADER)) == SASL_HEADER
    assert raw.read_frame().descriptor == SASL_MECHANISMS
    rest, _ = parse_frames(raw.read_to_eof())
    assert all(f.descriptor == 0x44 and int(f.fields[0]) != 0 for f in rest), rest


@pytest.mark.parametrize("mechanism", INVALID_UTF8, ids=repr)
def test_a_sasl_mechanism_that_is_not_ascii_is_refused_and_the_server_lives(locked_server, mechanism):
    with Bystander(locked_server, **ALICE) as bystander:
        with RawClient(locked_server.port) as raw:
            refused_before_authentication(raw, sasl_init(mechanism))
        assert_still_serving(locked_server, bystander, **ALICE)


@pytest.mark.parametrize("hostname", INVALID_UTF8, ids=repr)
def test_a_sasl_hostname_that_is_not_utf8_is_refused_and_the_server_lives(locked_server, hostname):
    with Bystander(locked_server, **ALICE) as bystander:
        with RawClient(locked_server.port) as raw:
            refused_before_authentication(raw, sasl_init(b"PLAIN", hostname=hostname))
        assert_still_serving(locked_server, bystander, **ALICE)


@pytest.mark.parametrize("credentials", [b"\x00al\xffice\x00s3cret", b"\x00alice\x00s3\xed\xa0\x80cret"], ids=repr)
def test_plain_credentials_that_are_not_utf8_fail_authentication(locked_server, credentials):
    with RawClient(locked_server.port) as raw:
        raw.send(SASL_HEADER + sasl_init(b"PLAIN", credentials))
        assert raw.read_exactly(len(SASL_HEADER)) == SASL_HEADER
        assert raw.read_frame().descriptor == SASL_MECHANISMS
        outcome = raw.read_frame()
        assert outcome.descriptor == 0x44 and int(outcome.fields[0]) == SASL_AUTH
        assert raw.read_to_eof() == b""
    assert_still_serving(locked_server, **ALICE)


def test_random_bytes_after_the_sasl_header_never_stop_the_server(locked_server):
    """The issue's reproduction: random frames after a SASL header hit the crash 7 times in 1,000."""
    import random

    rng = random.Random(11)
    for _ in range(300):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        with RawClient(locked_server.port, timeout=5) as raw:
            raw.send(SASL_HEADER + frame(b"\x00\x53\x41" + body, frame_type=SASL_FRAME))
            raw.read_to_eof()
    assert_still_serving(locked_server, **ALICE)


# -- open -------------------------------------------------------------------------------------------------------
def open_frame(container_id: bytes, *, hostname: bytes | None = None, capability: bytes | None = None) -> bytes:
    fields = [string(container_id), null() if hostname is None else string(hostname)]
    fields += [null()] * 5  # max-frame-size, channel-max, idle-time-out, outgoing and incoming locales
    fields += [null() if capability is None else sym(capability)]  # offered capabilities
    fields += [null() if capability is None else sym(capability)]  # desired capabilities
    fields += [null() if capability is None else map32([(sym(capability), string(b"x"))])]  # properties
    return frame(described_list(OPEN, fields))


def refused_open(server: SubgateProcess, open_bytes: bytes) -> tuple[str, str]:
    """Anonymous SASL, then ``open_bytes``: the server must answer ``open`` then ``close`` with an error."""
    with RawClient(server.port) as raw:
        raw.sasl_anonymous()
        raw.send(AMQP_HEADER + open_bytes)
        assert raw.read_exactly(len(AMQP_HEADER)) == AMQP_HEADER
        frames, _ = parse_frames(raw.read_to_eof())
    descriptors = [f.descriptor for f in frames if f.descriptor is not None]
    assert descriptors == [OPEN, CLOSE], frames
    error = frames[-1].error()
    assert error is not None, frames
    return error


@pytest.mark.parametrize("container_id", INVALID_UTF8, ids=repr)
def test_an_open_with_an_invalid_utf8_container_id_is_closed_with_decode_error(broker, container_id):
    with Bystander(broker) as bystander:
        condition, description = refused_open(broker, open_frame(container_id))
        assert condition == "amqp:decode-error"
        assert "container-id" in description
        assert_still_serving(broker, bystander)


@pytest.mark.parametrize(
    "fields",
    [{"hostname": b"h\xffst"}, {"capability": b"SHARED\x8aSUBS"}],
    ids=["hostname", "capabilities-and-properties"],
)
def test_other_open_fields_that_are_not_text_are_closed_with_decode_error(broker, fields):
    with Bystander(broker) as bystander:
        condition, _ = refused_open(broker, open_frame(b"good-id", **fields))
        assert condition == "amqp:decode-error"
        assert_still_serving(broker, bystander)
