"""The selector's meaning: the evaluator closures, one per operator, under SQL's three-valued logic (``None`` is
unknown), with JMS's rules for comparing, computing and matching values. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from subgate.mapping.selectors.base import Lookup, Run, SelectorError
from subgate.mapping.selectors.tokens import Token


class _Incomparable:
    """A present value that has no selector type (binary, uuid, list, map, ...): every test is unknown."""

    __slots__ = ()


_INCOMPARABLE = _Incomparable()
_PLAIN = frozenset({bool, int, float, str, type(None)})
_NUMBERS = frozenset({int, float})
_LIKE_TYPES = {bool: 0, int: 1, float: 1, str: 2}  # = and <> compare values of the same class only


def _plain(value: object) -> object:
    if isinstance(value, int):  # bool is final, so this is an int subclass such as an AMQP wrapper
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return _INCOMPARABLE


def identifier(name: str) -> Run:
    def run(lookup: Lookup) -> object:
        value = lookup(name)
        return value if type(value) in _PLAIN else _plain(value)

    return run


def constant(value: object) -> Run:
    def run(lookup: Lookup) -> object:
        return value

    return run


def any_true(*operands: Run) -> Run:
    def run(lookup: Lookup) -> bool | None:
        result: bool | None = False
        for operand in operands:
            value = operand(lookup)
            if value is True:
                return True
            if value is not False:
                result = None
        return result

    return run


def all_true(*operands: Run) -> Run:
    def run(lookup: Lookup) -> bool | None:
        result: bool | None = True
        for operand in operands:
            value = operand(lookup)
            if value is False:
                return False
            if value is not True:
                result = None
        return result

    return run


def logical_not(operand: Run) -> Run:
    def run(lookup: Lookup) -> bool | None:
        value = operand(lookup)
        if value is True:
            return False
        return True if value is False else None

    return run


def equality(compare: Callable[[Any, Any], bool]) -> Callable[[Run, Run], Run]:
    def build(left: Run, right: Run) -> Run:
        def run(lookup: Lookup) -> bool | None:
            a, b = left(lookup), right(lookup)
            if a is None or b is None:
                return None
            kind = _LIKE_TYPES.get(type(a))
            if kind is None or kind != _LIKE_TYPES.get(type(b)):
                return False  # JMS 2.0 §3.8.1.2: comparing unlike types is false
            return compare(a, b)

        return run

    return build


def ordering(compare: Callable[[Any, Any], bool]) -> Callable[[Run, Run], Run]:
    def build(left: Run, right: Run) -> Run:
        def run(lookup: Lookup) -> bool | None:
            a, b = left(lookup), right(lookup)
            if type(a) in _NUMBERS and type(b) in _NUMBERS:
                return compare(a, b)
            return None if a is None or b is None else False  # unlike types: false (JMS 2.0 §3.8.1.2)

        return run

    return build


def arithmetic(compute: Callable[[Any, Any], Any]) -> Callable[[Run, Run], Run]:
    def build(left: Run, right: Run) -> Run:
        def run(lookup: Lookup) -> object:
            a, b = left(lookup), right(lookup)
            if type(a) in _NUMBERS and type(b) in _NUMBERS:
                try:
                    return compute(a, b)
                except (ZeroDivisionError, OverflowError):  # x / 0; an int too large for a float
                    return None
            return None

        return run

    return build


def negative(operand: Run) -> Run:
    def run(lookup: Lookup) -> object:
        value = operand(lookup)
        return -value if type(value) in _NUMBERS else None

    return run


def positive(operand: Run) -> Run:
    def run(lookup: Lookup) -> object:
        value = operand(lookup)
        return value if type(value) in _NUMBERS else None

    return run


def is_null(negate: bool) -> Callable[[Run], Run]:
    def build(operand: Run) -> Run:
        def run(lookup: Lookup) -> bool:
            return (operand(lookup) is None) != negate

        return run

    return build


def between(negate: bool) -> Callable[[Run, Run, Run], Run]:
    def build(subject: Run, low: Run, high: Run) -> Run:
        def run(lookup: Lookup) -> bool | None:
            value, lo, hi = subject(lookup), low(lookup), high(lookup)
            if type(value) not in _NUMBERS:
                return None
            above = value >= lo if type(lo) in _NUMBERS else None
            below = value <= hi if type(hi) in _NUMBERS else None
            if above is False or below is False:
                return negate
            if above is None or below is None:
                return None
            return not negate

        return run

    return build


def in_strings(values: frozenset[str], negate: bool) -> Callable[[Run], Run]:
    def build(subject: Run) -> Run:
        def run(lookup: Lookup) -> bool | None:
            value = subject(lookup)
            if type(value) is not str:
                return None
            return (value in values) != negate

        return run

    return build


def like(match: Callable[[str], bool], negate: bool) -> Callable[[Run], Run]:
    def build(subject: Run) -> Run:
        def run(lookup: Lookup) -> bool | None:
            value = subject(lookup)
            if type(value) is not str:
                return None
            return match(value) != negate

        return run

    return build


def like_matcher(pattern: Token, escape: str | None) -> Callable[[str], bool]:
    """A matcher for a LIKE pattern. The pattern is cut at each unescaped % into fixed-length segments
    (literal characters and _); the first must match at the start, the last at the end and the others
    in order, each at its leftmost place. That is exact for such patterns and, unlike a translated
    regex such as .*a.*a.*b, cannot backtrack exponentially on a hostile pattern. A middle segment is
    searched for: a literal one in linear time, one with _ (no literal prefix to skip ahead by) in up to
    its length per character of the value: ``wildcard_cost`` is what the parser bounds."""
    segments = _like_segments(pattern, escape)
    regexes = [re.compile("".join("." if c is None else re.escape(c) for c in s), re.DOTALL) for s in segments]
    if len(regexes) == 1:
        whole = regexes[0].fullmatch
        return lambda value: whole(value) is not None
    head, head_size = regexes[0].match, len(segments[0])
    tail, tail_size = regexes[-1].match, len(segments[-1])
    middle = tuple(regex.search for regex, segment in zip(regexes[1:-1], segments[1:-1], strict=True) if segment)

    def match(value: str) -> bool:
        stop = len(value) - tail_size
        if stop < head_size or head(value) is None or tail(value, stop) is None:
            return False
        pos = head_size
        for search in middle:
            found = search(value, pos, stop)
            if found is None:
                return False
            pos = found.end()
        return True

    return match


def wildcard_cost(pattern: Token, escape: str | None) -> int:
    """The characters of a LIKE pattern's searched runs (between two %) that hold a _: matching a value costs up
    to this many steps per character of the value, on top of one step for the rest of the pattern.

    Raises:
        SelectorError: the pattern ends with its escape character.
    """
    return sum(len(segment) for segment in _like_segments(pattern, escape)[1:-1] if None in segment)


def _like_segments(pattern: Token, escape: str | None) -> list[list[str | None]]:
    """The pattern cut at each unescaped %: lists of literal characters and None (for _)."""
    segments: list[list[str | None]] = [[]]
    chars = iter(pattern.value)
    for ch in chars:
        if ch == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise SelectorError(f"LIKE pattern {pattern.text} ends with its escape character", pattern.pos)
            segments[-1].append(escaped)
        elif ch == "%":
            segments.append([])
        else:
            segments[-1].append(None if ch == "_" else ch)
    return segments
