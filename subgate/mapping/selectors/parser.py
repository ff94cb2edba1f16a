"""The selector grammar: recursive descent over the tokens, checking operand categories as it goes and building
the evaluator closures (``selectors.evaluation``) for each node. Bounds nesting and depth. Standard library only.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from subgate.mapping.selectors.base import Run, SelectorError
from subgate.mapping.selectors.evaluation import (
    all_true,
    any_true,
    arithmetic,
    between,
    constant,
    equality,
    identifier,
    in_strings,
    is_null,
    like,
    like_matcher,
    logical_not,
    negative,
    ordering,
    positive,
    wildcard_cost,
)
from subgate.mapping.selectors.tokens import (
    END,
    FLOAT,
    INTEGER,
    KEYWORD,
    LONG_MAX,
    LONG_MIN,
    NAME,
    OPERATOR,
    STRING,
    Token,
    tokenize,
)

_BOOLEAN, _NUMERIC, _TEXT, _ANY = "a condition", "a numeric value", "a string value", "an identifier"
_MAX_NESTING = 64  # parentheses, NOTs and signs inside each other: bounds the parser's recursion
_MAX_DEPTH = 200  # levels of operators: bounds the evaluator's recursion
# Searched LIKE runs holding a _, in characters, over the whole selector: each costs up to its length in steps per
# character of the value (``wildcard_cost``; measured: a 4,000-character run took 1.2 s over 200,000 characters).
MAX_WILDCARD_COST = 256


class _Expr(NamedTuple):
    kind: str  # what the expression yields, as far as parsing can tell: _BOOLEAN, _NUMERIC, _TEXT or _ANY
    run: Run
    pos: int  # where it starts in the text
    depth: int  # height of its closure tree


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _divide(a: int | float, b: int | float) -> int | float:
    """Java division: int / int truncates toward zero; raises ZeroDivisionError for a zero divisor."""
    if type(a) is int and type(b) is int:
        quotient = abs(a) // abs(b)
        return quotient if (a < 0) == (b < 0) else -quotient
    return a / b


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
}


class Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.index = 0
        self.nesting = 0
        self.identifiers: set[str] = set()
        self.wildcard_cost = 0

    # -- token helpers

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def keyword(self, word: str) -> bool:
        """Consume the keyword ``word`` if it comes next."""
        token = self.tokens[self.index]
        if token.kind == KEYWORD and token.value == word:
            self.index += 1
            return True
        return False

    def expect(self, kind: str, value: str | None, wanted: str) -> Token:
        token = self.take()
        if token.kind != kind or (value is not None and token.value != value):
            raise _unexpected(token, wanted)
        return token

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise SelectorError(f"selector nested more than {_MAX_NESTING} deep", pos)

    # -- grammar, lowest precedence first

    def selector(self) -> _Expr:
        expr = self.disjunction()
        token = self.peek()
        if token.kind != END:
            raise _unexpected(token, "AND, OR or the end")
        return expr

    def disjunction(self) -> _Expr:
        first = self.conjunction()
        operands = [first]
        while self.keyword("OR"):
            operands.append(self.conjunction())
        return first if len(operands) == 1 else _make(_BOOLEAN, any_true, first.pos, map(condition, operands))

    def conjunction(self) -> _Expr:
        first = self.negation()
        operands = [first]
        while self.keyword("AND"):
            operands.append(self.negation())
        return first if len(operands) == 1 else _make(_BOOLEAN, all_true, first.pos, map(condition, operands))

    def negation(self) -> _Expr:
        token = self.peek()
        if not self.keyword("NOT"):
            return self.comparison()
        self.enter(token.pos)
        operand = self.negation()
        self.nesting -= 1
        return _make(_BOOLEAN, logical_not, token.pos, [condition(operand)])

    def comparison(self) -> _Expr:
        left = self.sum()
        token = self.peek()
        if token.kind == OPERATOR and token.value in _COMPARISONS:
            self.take()
            right = self.sum()
            if token.value in ("=", "<>"):
                return _make(_BOOLEAN, equality(_COMPARISONS[token.value]), left.pos, [left, right])
            return _make(_BOOLEAN, ordering(_COMPARISONS[token.value]), left.pos, [_numeric(left), _numeric(right)])
        if self.keyword("IS"):
            negate = self.keyword("NOT")
            self.expect(KEYWORD, "NULL", "NULL")
            return _make(_BOOLEAN, is_null(negate), left.pos, [left])
        negate = self.keyword("NOT")
        if self.keyword("BETWEEN"):
            low = self.sum()
            self.expect(KEYWORD, "AND", "AND")
            high = self.sum()
            return _make(_BOOLEAN, between(negate), left.pos, [_numeric(left), _numeric(low), _numeric(high)])
        if self.keyword("IN"):
            return _make(_BOOLEAN, in_strings(self.string_list(), negate), left.pos, [_textual(left)])
        if self.keyword("LIKE"):
            return _make(_BOOLEAN, like(self.like_pattern(), negate), left.pos, [_textual(left)])
        if negate:
            raise _unexpected(self.peek(), "BETWEEN, IN or LIKE")
        return left

    def string_list(self) -> frozenset[str]:
        self.expect(OPERATOR, "(", "'('")
        values = set()
        while True:
            values.add(self.expect(STRING, None, "a string literal").value)
            token = self.take()
            if token.kind == OPERATOR and token.value == ")":
                return frozenset(values)
            if token.kind != OPERATOR or token.value != ",":
                raise _unexpected(token, "',' or ')'")

    def like_pattern(self) -> Callable[[str], bool]:
        pattern = self.expect(STRING, None, "a string literal")
        escape = None
        if self.keyword("ESCAPE"):
            token = self.expect(STRING, None, "a string literal")
            if len(token.value) != 1:
                raise SelectorError(f"ESCAPE {token.text} is not a single character", token.pos)
            escape = token.value
        self.wildcard_cost += wildcard_cost(pattern, escape)
        if self.wildcard_cost > MAX_WILDCARD_COST:
            raise SelectorError(
                f"LIKE patterns hold more than {MAX_WILDCARD_COST} characters of runs with '_' between two '%'",
                pattern.pos,
            )
        return like_matcher(pattern, escape)

    def sum(self) -> _Expr:
        left = self.product()
        while (token := self.peek()).kind == OPERATOR and token.value in ("+", "-"):
            self.take()
            right = self.product()
            left = _make(_NUMERIC, arithmetic(_ARITHMETIC[token.value]), left.pos, [_numeric(left), _numeric(right)])
        return left

    def product(self) -> _Expr:
        left = self.unary()
        while (token := self.peek()).kind == OPERATOR and token.value in ("*", "/"):
            self.take()
            right = self.unary()
            left = _make(_NUMERIC, arithmetic(_ARITHMETIC[token.value]), left.pos, [_numeric(left), _numeric(right)])
        return left

    def unary(self) -> _Expr:
        token = self.peek()
        if token.kind != OPERATOR or token.value not in ("+", "-"):
            return self.primary()
        self.take()
        minus = token.value == "-"
        following = self.peek()
        if following.kind in (INTEGER, FLOAT):  # a signed literal: -9223372036854775808 fits a long
            self.take()
            return _literal(following, minus, token.pos)
        self.enter(token.pos)
        operand = _numeric(self.unary())
        self.nesting -= 1
        return _make(_NUMERIC, negative if minus else positive, token.pos, [operand])

    def primary(self) -> _Expr:
        token = self.take()
        if token.kind == NAME:
            self.identifiers.add(token.value)
            return _Expr(_ANY, identifier(token.value), token.pos, 1)
        if token.kind == STRING:
            return _Expr(_TEXT, constant(token.value), token.pos, 1)
        if token.kind in (INTEGER, FLOAT):
            return _literal(token, False, token.pos)
        if token.kind == KEYWORD and token.value in ("TRUE", "FALSE"):
            return _Expr(_BOOLEAN, constant(token.value == "TRUE"), token.pos, 1)
        if token.kind == OPERATOR and token.value == "(":
            self.enter(token.pos)
            inner = self.disjunction()
            self.expect(OPERATOR, ")", "')'")
            self.nesting -= 1
            return inner._replace(pos=token.pos)
        raise _unexpected(token, "a value")


def _unexpected(token: Token, wanted: str) -> SelectorError:
    if token.kind == END:
        return SelectorError(f"unexpected end of selector (expected {wanted})", token.pos)
    return SelectorError(f"unexpected token {token.text!r} (expected {wanted})", token.pos)


def _literal(token: Token, minus: bool, pos: int) -> _Expr:
    value = -token.value if minus else token.value
    if token.kind == INTEGER and not LONG_MIN <= value <= LONG_MAX:
        raise SelectorError(f"integer {token.text} is out of range for a long", pos)
    return _Expr(_NUMERIC, constant(value), pos, 1)


def _make(kind: str, build: Callable[..., Run], pos: int, operands: Iterable[_Expr]) -> _Expr:
    """An operator node: ``build`` receives the operands' closures and returns the node's closure."""
    operands = list(operands)
    depth = 1 + max(operand.depth for operand in operands)
    if depth > _MAX_DEPTH:
        raise SelectorError(f"selector has more than {_MAX_DEPTH} levels of operators", pos)
    return _Expr(kind, build(*(operand.run for operand in operands)), pos, depth)


def _category(expr: _Expr, wanted: str) -> _Expr:
    if expr.kind not in (wanted, _ANY):
        raise SelectorError(f"expected {wanted}, found {expr.kind}", expr.pos)
    return expr


def condition(expr: _Expr) -> _Expr:
    return _category(expr, _BOOLEAN)


def _numeric(expr: _Expr) -> _Expr:
    return _category(expr, _NUMERIC)


def _textual(expr: _Expr) -> _Expr:
    return _category(expr, _TEXT)
