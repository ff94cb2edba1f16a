"""atheris target: JMS selectors (``subgate.mapping.selectors`` through ``engine.selection.compile_selector``).

The input, read as UTF-8 (bad bytes replaced) and cut to the 8,192 characters an attach allows, is a selector.
Contract checked: parsing raises ``SelectorError`` and nothing else (no ``RecursionError``, no ``ValueError`` of
another kind); a parsed selector evaluates, without raising, to True, False or None against a message whose
identifiers hold values of every type (and against real encoded messages, as the broker evaluates it). The cost of
one parse and of one evaluation is bounded by libFuzzer's per-input timeout.
"""

from __future__ import annotations

from proton import Message, symbol

from subgate.engine.selection import compile_selector
from subgate.mapping import selectors
from subgate.mapping.names import MAX_SELECTOR_LENGTH

INSTRUMENT = ("subgate.mapping.selectors", "subgate.engine.selection")
MAX_LEN = 4 * MAX_SELECTOR_LENGTH
DICTIONARY = tuple(
    word.encode()
    for word in (
        " AND ", " OR ", "NOT ", " BETWEEN ", " IN ", " LIKE ", " ESCAPE ", " IS ", "NULL", "TRUE", "FALSE",
        "<>", "<=", ">=", "(", ")", "'", "''", "%", "_", "0x7fffffffffffffff", "9223372036854775808", "1e308",
        "3.4e38F", ".5", "017", "JMSPriority", "JMSMessageID", "JMSXDeliveryCount", "color", "n",
    )
)  # fmt: skip
_VALUES: tuple[object, ...] = (None, True, False, 0, -1, 2**63 - 1, 1.5, float("nan"), "", "red", "a%b_c", "x" * 300)
_MESSAGES = (
    Message(body="b", properties={"color": "red", "n": 5, "f": 1.5, "b": True, "s": "a%b"}, priority=7).encode(),
    Message(id="ID:x", subject="t", properties={"n": -(2**63), "bin": b"\x00"}, durable=True).encode(),
    Message(annotations={symbol("x-opt-delivery-time"): 5}).encode(),
)


def seeds() -> list[bytes]:
    texts = (
        "color = 'red'",
        "n BETWEEN 1 AND 10 AND NOT (f > 2.5E0 OR b)",
        "s LIKE 'a\\%b%' ESCAPE '\\' OR s NOT IN ('x', 'y', 'z')",
        "JMSPriority > 4 AND JMSMessageID IS NOT NULL AND JMSXDeliveryCount = 1",
        "-(-n) * 2 / 3 + 0x1F - 017 <> 7.5F",
        "((((((a))))))",
    )
    return [text.encode() for text in texts]


def _lookup(name: str) -> object:
    return _VALUES[sum(name.encode("utf-8", "surrogatepass")) % len(_VALUES)]


def test_one(data: bytes) -> None:
    text = data.decode("utf-8", "replace")[:MAX_SELECTOR_LENGTH]
    try:
        selector = selectors.parse(text)
    except selectors.SelectorError:
        return
    assert selector.evaluate(_lookup) in (True, False, None)
    assert selector.matches(lambda name: None) in (True, False)
    predicate = compile_selector(text)
    assert predicate is not None
    for raw in _MESSAGES:
        assert predicate(raw) in (True, False)
