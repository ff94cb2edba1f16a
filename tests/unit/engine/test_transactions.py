"""Coordinator control bodies and open-transaction bookkeeping (engine.transactions)."""

from __future__ import annotations

import pytest
from proton import Described, Message, symbol, ulong

from subgate.engine.transactions import DECLARE, DISCHARGE, Control, Transactions, read_control
from subgate.mapping.errors import TRANSACTION_UNKNOWN_ID, Refused


def control(body: object) -> bytes:
    return bytes(Message(body=body).encode())


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (Described(ulong(0x31), []), Control(DECLARE)),
        (Described(symbol("amqp:declare:list"), []), Control(DECLARE)),
        (Described(ulong(0x32), [b"t1"]), Control(DISCHARGE, b"t1", False)),
        (Described(ulong(0x32), [b"t1", False]), Control(DISCHARGE, b"t1", False)),
        (Described(ulong(0x32), [b"t1", True]), Control(DISCHARGE, b"t1", True)),
        (Described(symbol("amqp:discharge:list"), [b"t2", True]), Control(DISCHARGE, b"t2", True)),
    ],
)
def test_read_control(body, expected):
    assert read_control(control(body)) == expected


@pytest.mark.parametrize(
    "raw",
    [
        control("declare"),  # not a described body
        control(Described(ulong(0x99), [])),  # unknown descriptor
        control(Described(symbol("amqp:other:list"), [])),
        control(Described(ulong(0x32), [])),  # discharge without txn-id
        control(Described(ulong(0x32), ["not-binary"])),
        control(Described(3.5, [])),
        b"\x00Su\xa0\x01x",  # a data section, not amqp-value
        b"\x00\x53",  # truncated
    ],
)
def test_read_control_refuses_anything_else(raw):
    with pytest.raises(Refused) as refused:
        read_control(raw)
    assert refused.value.condition == "amqp:decode-error"


def test_transactions_declare_get_finish():
    txns = Transactions()
    owner_a, owner_b = object(), object()
    t1, t2, t3 = txns.declare(owner_a), txns.declare(owner_a), txns.declare(owner_b)
    assert len({t1.txn_id, t2.txn_id, t3.txn_id}) == 3
    assert txns.get(t2.txn_id) is t2
    assert txns.owned_by(owner_a) == [t1, t2]
    txns.finish(t1)
    txns.finish(t1)  # idempotent
    with pytest.raises(Refused) as refused:
        txns.get(t1.txn_id)
    assert refused.value.condition == TRANSACTION_UNKNOWN_ID
    assert txns.owned_by(owner_a) == [t2]
