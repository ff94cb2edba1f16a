"""JMS message selectors (JMS 2.0 §3.8.1.1): parse a selector once, then evaluate it per message.

This module owns the selector language: its tokens, its grammar, the checks made at parse time and the
meaning of every operator under SQL's three-valued logic. It knows nothing about AMQP or messages: a
selector reads values only through ``lookup(name)``, which returns the value of an identifier or None
when the message has no such value. Standard library only.

Theory of operation
-------------------
* ``parse`` tokenizes, parses by recursive descent and checks operand categories in one pass, and builds
  the evaluator as it goes: every node becomes a closure ``run(lookup) -> value``, so evaluating a message
  calls a fixed tree of small functions and never re-inspects the syntax. AND and OR chains become one
  closure over a tuple, so long flat selectors stay shallow.
* Values inside the evaluator are ``None`` (NULL or unknown), ``bool``, ``int``, ``float``, ``str``, or
  ``_INCOMPARABLE`` (a value is present but has no selector type, e.g. binary). An identifier closure
  turns ``int``/``float``/``str`` subclasses into the plain type, so operators test ``type(x)`` only.
* A condition evaluates to True, False or None (unknown). A message matches only when it is True.

Grammar, lowest precedence first (keywords are case-insensitive, identifiers case-sensitive)::

    selector   := or
    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | comparison
    comparison := sum [ ('=' | '<>' | '<' | '<=' | '>' | '>=') sum
                      | [NOT] BETWEEN sum AND sum
                      | [NOT] IN '(' string (',' string)* ')'
                      | [NOT] LIKE string [ESCAPE string]
                      | IS [NOT] NULL ]
    sum        := product (('+' | '-') product)*
    product    := unary (('*' | '/') unary)*
    unary      := ('+' | '-') unary | primary
    primary    := string | number | TRUE | FALSE | identifier | '(' or ')'

Checks made at parse time (a ``SelectorError`` names what is wrong and its 0-based position)
* The selector, and every operand of AND, OR and NOT, is a condition: a comparison, TRUE/FALSE or an
  identifier (whose value must then be boolean at run time, else the condition is unknown). ``5`` or
  ``'x'`` alone is an error.
* Operands of + - * / and of < <= > >= BETWEEN are numeric or identifiers; the subject of LIKE and IN is
  a string or an identifier. ``=`` and ``<>`` take any operands: unlike types give unknown at run time.
* IN lists hold string literals only; ESCAPE is a one-character string literal; NULL appears only in
  IS [NOT] NULL; comparisons do not chain (``a = b = c`` is an error).
* Exact literals must fit a Java long after their sign; approximate literals must be finite.
* Nesting is bounded (``_MAX_NESTING`` parentheses, NOTs and signs; ``_MAX_DEPTH`` operator levels), so a
  hostile selector cannot exhaust the stack when it is parsed or evaluated.

Run-time rules
* NULL (absent identifier) in any operation gives unknown; ``IS [NOT] NULL`` is the only test of it.
* = and <> compare like types only: numbers with numbers (int and float compare by value), strings with
  strings, booleans with booleans. < <= > >= compare numbers only. Any other pairing of two present values
  is false, as JMS 2.0 §3.8.1.2 says ("the value of the operation is false"), so ``NOT (s = 1)`` matches a
  string ``s``; a NULL operand makes the comparison unknown.
* Arithmetic on anything but numbers is unknown. Integers do not overflow (Python ints, not Java's
  wrapping long); int / int truncates toward zero as Java does. Division by zero, integer or float, is
  unknown (Java would throw or give an infinity); so is a result too large for a float.
* ``x BETWEEN a AND b`` is ``x >= a AND x <= b`` and ``NOT BETWEEN`` its negation, each under
  three-valued logic (so ``5 BETWEEN NULL AND 3`` is false). LIKE and IN need a string subject, else
  unknown. In LIKE, ``%`` is any run of characters, ``_`` any one character, everything else (including
  regex metacharacters) itself; the escape character makes the next character literal, and a pattern may
  not end with it.

Literals: strings in single quotes with ``''`` for a quote; decimal integers (57, -957, +62), hex
(0x1F) and octal (017) integers, each with an optional L suffix; approximate numbers 7E3, -57.9E2, 7.,
.5, 1.5e-3, with an optional F (rounded to a Java float) or D suffix; TRUE and FALSE. As in JavaCC
lexers, a number ends where its syntax ends: ``a=1AND b=2`` is ``a = 1 AND b = 2``.
"""

from __future__ import annotations

import math
import operator
import re
import struct
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = ["Lookup", "Selector", "SelectorError", "parse"]

Lookup = Callable[[str], object]
_Run = Callable[[Lookup], Any]


class SelectorError(ValueError):
    """A selector that is not valid JMS. ``position`` is the 0-based offset of the problem in the text."""

    def __init__(self, problem: str, position: int) -> None:
        super().__init__(f"{problem} at position {position}")
        self.problem = problem
        self.position = position


class Selector:
    """A parsed selector. ``identifiers`` are the names it reads through ``lookup``."""

    __slots__ = ("text", "identifiers", "_run")

    def __init__(self, text: str, run: _Run, identifiers: frozenset[str]) -> None:
        self.text = text
        self.identifiers = identifiers
        self._run = run

    def evaluate(self, lookup: Lookup) -> bool | None:
        """The selector's value for one message: True, False, or None for unknown.

        Args:
            lookup: returns the value of an identifier, or None when the message has none.
        """
        value = self._run(lookup)
        return value if value is True or value is False else None

    def matches(self, lookup: Lookup) -> bool:
        """True when the selector is true for the message; False when it is false or unknown."""
        return self._run(lookup) is True

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


def parse(text: str) -> Selector:
    """Parse and check a selector once; the result evaluates it against any number of messages.

    Raises:
        SelectorError: the text is blank or not a valid JMS selector.
    """
    if not text.strip():
        raise SelectorError("selector is empty", 0)
    parser = _Parser(text)
    expr = _condition(parser.selector())
    return Selector(text, expr.run, frozenset(parser.identifiers))


# --------------------------------------------------------------------------------------------------
# Tokens.

_STRING, _INTEGER, _FLOAT, _NAME, _KEYWORD, _OPERATOR, _END = "string", "int", "float", "name", "kw", "op", "end"
_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE"})
_OPERATORS = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",")
_WHITESPACE = frozenset(" \t\f\r\n")  # JMS: space, horizontal tab, form feed and line terminators
_DIGITS = frozenset("0123456789")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+[lL]?"  # hex
    r"|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?"  # 7. 95.7 .5 -57.9E2
    r"|[0-9]+(?:[eE][+-]?[0-9]+[fFdD]?|[fFdD])"  # 7E3 7F
    r"|[0-9]+[lL]?"  # decimal or octal
)
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_JAVA_FLOAT = struct.Struct("f")
_JAVA_FLOAT_OVERFLOW = (2 - 2**-24) * 2.0**127  # the least double that rounds to a float infinity


class _Token(NamedTuple):
    kind: str
    value: Any  # str text, keyword in upper case, operator, or number magnitude
    pos: int
    text: str  # as written, for messages


def _is_start(ch: str) -> bool:
    """Java identifier start: letters (as Python's identifiers), currency symbols, connectors like _."""
    return ch.isidentifier() or unicodedata.category(ch) in ("Sc", "Pc")


def _is_part(ch: str) -> bool:
    """Java identifier part: a start character, a digit or a combining mark."""
    return ("a" + ch).isidentifier() or unicodedata.category(ch) in ("Sc", "Pc")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, end = 0, len(text)
    while pos < end:
        ch = text[pos]
        if ch in _WHITESPACE:
            pos += 1
            continue
        if ch == "'":
            token = _string(text, pos)
        elif ch in _DIGITS or (ch == "." and text[pos + 1 : pos + 2] in _DIGITS):
            token = _number(text, pos)
        elif _is_start(ch):
            stop = pos + 1
            while stop < end and _is_part(text[stop]):
                stop += 1
            word = text[pos:stop]
            upper = word.upper() if word.isascii() else word  # no keyword from non-ASCII case folding
            token = _Token(_KEYWORD, upper, pos, word) if upper in _KEYWORDS else _Token(_NAME, word, pos, word)
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
            if op is None:
                raise SelectorError(f"unexpected character {ch!r}", pos)
            token = _Token(_OPERATOR, op, pos, op)
        tokens.append(token)
        pos += len(token.text)
    tokens.append(_Token(_END, None, end, ""))
    return tokens


def _string(text: str, start: int) -> _Token:
    """The string literal whose opening quote is at ``start``; '' inside it is one quote."""
    pos = start + 1
    while True:
        pos = text.find("'", pos)
        if pos < 0:
            raise SelectorError("unterminated string literal", start)
        if text.startswith("''", pos):
            pos += 2
            continue
        raw = text[start : pos + 1]
        return _Token(_STRING, raw[1:-1].replace("''", "'"), start, raw)


def _number(text: str, start: int) -> _Token:
    match = _NUMBER.match(text, start)
    assert match is not None  # the caller saw a digit, or a point followed by one
    literal = match.group()  # the longest number here; what follows is the next token, as in JavaCC
    if literal[:2] in ("0x", "0X"):
        return _Token(_INTEGER, int(literal[2:].rstrip("lL"), 16), start, literal)
    if any(c in literal for c in ".eEfFdD"):
        return _Token(_FLOAT, _float(literal, start), start, literal)
    digits = literal.rstrip("lL")
    if len(digits) > 1 and digits[0] == "0":  # Java: a leading zero means octal
        if not set(digits) <= set("01234567"):
            raise SelectorError(f"invalid octal number {literal!r}", start)
        return _Token(_INTEGER, int(digits, 8), start, literal)
    return _Token(_INTEGER, int(digits), start, literal)


def _float(literal: str, start: int) -> float:
    value = float(literal.rstrip("fFdD"))  # a magnitude: signs are tokens of their own
    if literal[-1] in "fF":  # a Java float literal: round to single precision, as Java does
        value = math.inf if value >= _JAVA_FLOAT_OVERFLOW else _JAVA_FLOAT.unpack(_JAVA_FLOAT.pack(value))[0]
    if value == math.inf:
        raise SelectorError(f"number {literal!r} is out of range", start)
    return value


# --------------------------------------------------------------------------------------------------
# Parser: builds the evaluator closures while it checks the grammar.

_BOOLEAN, _NUMERIC, _TEXT, _ANY = "a condition", "a numeric value", "a string value", "an identifier"
_MAX_NESTING = 64  # parentheses, NOTs and signs inside each other: bounds the parser's recursion
_MAX_DEPTH = 200  # levels of operators: bounds the evaluator's recursion


class _Expr(NamedTuple):
    kind: str  # what the expression yields, as far as parsing can tell: _BOOLEAN, _NUMERIC, _TEXT or _ANY
    run: _Run
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


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.index = 0
        self.nesting = 0
        self.identifiers: set[str] = set()

    # -- token helpers

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def keyword(self, word: str) -> bool:
        """Consume the keyword ``word`` if it comes next."""
        token = self.tokens[self.index]
        if token.kind == _KEYWORD and token.value == word:
            self.index += 1
            return True
        return False

    def expect(self, kind: str, value: str | None, wanted: str) -> _Token:
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
        if token.kind != _END:
            raise _unexpected(token, "AND, OR or the end")
        return expr

    def disjunction(self) -> _Expr:
        first = self.conjunction()
        operands = [first]
        while self.keyword("OR"):
            operands.append(self.conjunction())
        return first if len(operands) == 1 else _make(_BOOLEAN, _any_true, first.pos, map(_condition, operands))

    def conjunction(self) -> _Expr:
        first = self.negation()
        operands = [first]
        while self.keyword("AND"):
            operands.append(self.negation())
        return first if len(operands) == 1 else _make(_BOOLEAN, _all_true, first.pos, map(_condition, operands))

    def negation(self) -> _Expr:
        token = self.peek()
        if not self.keyword("NOT"):
            return self.comparison()
        self.enter(token.pos)
        operand = self.negation()
        self.nesting -= 1
        return _make(_BOOLEAN, _not, token.pos, [_condition(operand)])

    def comparison(self) -> _Expr:
        left = self.sum()
        token = self.peek()
        if token.kind == _OPERATOR and token.value in _COMPARISONS:
            self.take()
            right = self.sum()
            if token.value in ("=", "<>"):
                return _make(_BOOLEAN, _equality(_COMPARISONS[token.value]), left.pos, [left, right])
            return _make(_BOOLEAN, _ordering(_COMPARISONS[token.value]), left.pos, [_numeric(left), _numeric(right)])
        if self.keyword("IS"):
            negate = self.keyword("NOT")
            self.expect(_KEYWORD, "NULL", "NULL")
            return _make(_BOOLEAN, _is_null(negate), left.pos, [left])
        negate = self.keyword("NOT")
        if self.keyword("BETWEEN"):
            low = self.sum()
            self.expect(_KEYWORD, "AND", "AND")
            high = self.sum()
            return _make(_BOOLEAN, _between(negate), left.pos, [_numeric(left), _numeric(low), _numeric(high)])
        if self.keyword("IN"):
            return _make(_BOOLEAN, _in(self.string_list(), negate), left.pos, [_textual(left)])
        if self.keyword("LIKE"):
            return _make(_BOOLEAN, _like(self.like_pattern(), negate), left.pos, [_textual(left)])
        if negate:
            raise _unexpected(self.peek(), "BETWEEN, IN or LIKE")
        return left

    def string_list(self) -> frozenset[str]:
        self.expect(_OPERATOR, "(", "'('")
        values = set()
        while True:
            values.add(self.expect(_STRING, None, "a string literal").value)
            token = self.take()
            if token.kind == _OPERATOR and token.value == ")":
                return frozenset(values)
            if token.kind != _OPERATOR or token.value != ",":
                raise _unexpected(token, "',' or ')'")

    def like_pattern(self) -> Callable[[str], bool]:
        pattern = self.expect(_STRING, None, "a string literal")
        escape = None
        if self.keyword("ESCAPE"):
            token = self.expect(_STRING, None, "a string literal")
            if len(token.value) != 1:
                raise SelectorError(f"ESCAPE {token.text} is not a single character", token.pos)
            escape = token.value
        return _like_matcher(pattern, escape)

    def sum(self) -> _Expr:
        left = self.product()
        while (token := self.peek()).kind == _OPERATOR and token.value in ("+", "-"):
            self.take()
            right = self.product()
            left = _make(_NUMERIC, _arithmetic(_ARITHMETIC[token.value]), left.pos, [_numeric(left), _numeric(right)])
        return left

    def product(self) -> _Expr:
        left = self.unary()
        while (token := self.peek()).kind == _OPERATOR and token.value in ("*", "/"):
            self.take()
            right = self.unary()
            left = _make(_NUMERIC, _arithmetic(_ARITHMETIC[token.value]), left.pos, [_numeric(left), _numeric(right)])
        return left

    def unary(self) -> _Expr:
        token = self.peek()
        if token.kind != _OPERATOR or token.value not in ("+", "-"):
            return self.primary()
        self.take()
        minus = token.value == "-"
        following = self.peek()
        if following.kind in (_INTEGER, _FLOAT):  # a signed literal: -9223372036854775808 fits a long
            self.take()
            return _literal(following, minus, token.pos)
        self.enter(token.pos)
        operand = _numeric(self.unary())
        self.nesting -= 1
        return _make(_NUMERIC, _negative if minus else _positive, token.pos, [operand])

    def primary(self) -> _Expr:
        token = self.take()
        if token.kind == _NAME:
            self.identifiers.add(token.value)
            return _Expr(_ANY, _identifier(token.value), token.pos, 1)
        if token.kind == _STRING:
            return _Expr(_TEXT, _constant(token.value), token.pos, 1)
        if token.kind in (_INTEGER, _FLOAT):
            return _literal(token, False, token.pos)
        if token.kind == _KEYWORD and token.value in ("TRUE", "FALSE"):
            return _Expr(_BOOLEAN, _constant(token.value == "TRUE"), token.pos, 1)
        if token.kind == _OPERATOR and token.value == "(":
            self.enter(token.pos)
            inner = self.disjunction()
            self.expect(_OPERATOR, ")", "')'")
            self.nesting -= 1
            return inner._replace(pos=token.pos)
        raise _unexpected(token, "a value")


def _unexpected(token: _Token, wanted: str) -> SelectorError:
    if token.kind == _END:
        return SelectorError(f"unexpected end of selector (expected {wanted})", token.pos)
    return SelectorError(f"unexpected token {token.text!r} (expected {wanted})", token.pos)


def _literal(token: _Token, minus: bool, pos: int) -> _Expr:
    value = -token.value if minus else token.value
    if token.kind == _INTEGER and not _LONG_MIN <= value <= _LONG_MAX:
        raise SelectorError(f"integer {token.text} is out of range for a long", pos)
    return _Expr(_NUMERIC, _constant(value), pos, 1)


def _make(kind: str, build: Callable[..., _Run], pos: int, operands: Iterable[_Expr]) -> _Expr:
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


def _condition(expr: _Expr) -> _Expr:
    return _category(expr, _BOOLEAN)


def _numeric(expr: _Expr) -> _Expr:
    return _category(expr, _NUMERIC)


def _textual(expr: _Expr) -> _Expr:
    return _category(expr, _TEXT)


# --------------------------------------------------------------------------------------------------
# Evaluator closures. Each takes its operands' closures and returns run(lookup) -> value.


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


def _identifier(name: str) -> _Run:
    def run(lookup: Lookup) -> object:
        value = lookup(name)
        return value if type(value) in _PLAIN else _plain(value)

    return run


def _constant(value: object) -> _Run:
    def run(lookup: Lookup) -> object:
        return value

    return run


def _any_true(*operands: _Run) -> _Run:
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


def _all_true(*operands: _Run) -> _Run:
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


def _not(operand: _Run) -> _Run:
    def run(lookup: Lookup) -> bool | None:
        value = operand(lookup)
        if value is True:
            return False
        return True if value is False else None

    return run


def _equality(compare: Callable[[Any, Any], bool]) -> Callable[[_Run, _Run], _Run]:
    def build(left: _Run, right: _Run) -> _Run:
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


def _ordering(compare: Callable[[Any, Any], bool]) -> Callable[[_Run, _Run], _Run]:
    def build(left: _Run, right: _Run) -> _Run:
        def run(lookup: Lookup) -> bool | None:
            a, b = left(lookup), right(lookup)
            if type(a) in _NUMBERS and type(b) in _NUMBERS:
                return compare(a, b)
            return None if a is None or b is None else False  # unlike types: false (JMS 2.0 §3.8.1.2)

        return run

    return build


def _arithmetic(compute: Callable[[Any, Any], Any]) -> Callable[[_Run, _Run], _Run]:
    def build(left: _Run, right: _Run) -> _Run:
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


def _negative(operand: _Run) -> _Run:
    def run(lookup: Lookup) -> object:
        value = operand(lookup)
        return -value if type(value) in _NUMBERS else None

    return run


def _positive(operand: _Run) -> _Run:
    def run(lookup: Lookup) -> object:
        value = operand(lookup)
        return value if type(value) in _NUMBERS else None

    return run


def _is_null(negate: bool) -> Callable[[_Run], _Run]:
    def build(operand: _Run) -> _Run:
        def run(lookup: Lookup) -> bool:
            return (operand(lookup) is None) != negate

        return run

    return build


def _between(negate: bool) -> Callable[[_Run, _Run, _Run], _Run]:
    def build(subject: _Run, low: _Run, high: _Run) -> _Run:
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


def _in(values: frozenset[str], negate: bool) -> Callable[[_Run], _Run]:
    def build(subject: _Run) -> _Run:
        def run(lookup: Lookup) -> bool | None:
            value = subject(lookup)
            if type(value) is not str:
                return None
            return (value in values) != negate

        return run

    return build


def _like(match: Callable[[str], bool], negate: bool) -> Callable[[_Run], _Run]:
    def build(subject: _Run) -> _Run:
        def run(lookup: Lookup) -> bool | None:
            value = subject(lookup)
            if type(value) is not str:
                return None
            return match(value) != negate

        return run

    return build


def _like_matcher(pattern: _Token, escape: str | None) -> Callable[[str], bool]:
    """A matcher for a LIKE pattern. The pattern is cut at each unescaped % into fixed-length segments
    (literal characters and _); the first must match at the start, the last at the end and the others
    in order, each at its leftmost place. That is exact for such patterns and, unlike a translated
    regex such as .*a.*a.*b, cannot backtrack exponentially on a hostile pattern."""
    segments: list[list[str | None]] = [[]]  # None stands for _
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
