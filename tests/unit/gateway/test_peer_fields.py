"""gateway.peer_fields: whatever proton's getters raise for the peer's bytes becomes amqp:decode-error."""

from __future__ import annotations

import pytest
from proton import Data, DataException

from subgate.gateway.peer_fields import peer_text
from subgate.mapping.errors import DECODE_ERROR, Refused


def _described_key_map() -> object:
    """A map keyed by a described value, as a fuzzed filter set once arrived: proton's get_object raises."""
    data = Data()
    data.decode(b"\xc1\x0a\x02\x00\x53\x01\xa1\x01x\xa1\x01y")
    data.rewind()
    data.next()
    return data.get_object()


@pytest.mark.parametrize(
    ("read", "said"),
    [
        (lambda: b"\xff".decode("utf-8"), "is not valid UTF-8"),
        (lambda: b"\x8a".decode("ascii"), "is not valid ASCII"),
        (_described_key_map, "is malformed (TypeError)"),
        (lambda: list(5), "is malformed (TypeError)"),  # type: ignore[call-overload]
        (lambda: chr(0x110000), "is malformed (ValueError)"),
        (lambda: (_ for _ in ()).throw(DataException("bad")), "is malformed (DataException)"),
    ],
)
def test_malformed_input_is_the_peers_decode_error(read, said):
    with pytest.raises(Refused) as caught:
        peer_text("attach source", read)
    assert caught.value.condition == DECODE_ERROR
    assert caught.value.description == f"attach source {said}"


def test_good_input_passes_through():
    assert peer_text("open container-id", lambda: "client-1") == "client-1"
