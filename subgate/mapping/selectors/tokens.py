"""The selector lexer: JMS selector text into tokens (strings, integers, approximate numbers rounded as Java
would, identifiers, keywords, operators), each with its offset for error messages. Standard library only.
"""

from __future__ import annotations

import math
import re
import struct
import unicodedata
from typing import Any, NamedTuple

from subgate.mapping.selectors.base import SelectorError

STRING, INTEGER, FLOAT, NAME, KEYWORD, OPERATOR, END = "string", "int", "float", "name", "kw", "op", "end"
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
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_MAX_DIGITS = 22  # significant digits: octal 2**63 has 22, decimal 19; more cannot fit a long
_JAVA_FLOAT = struct.Struct("f")
_JAVA_FLOAT_OVERFLOW = (2 - 2**-24) * 2.0**127  # the least double that rounds to a float infinity


class Token(NamedTuple):
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


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
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
            token = Token(KEYWORD, upper, pos, word) if upper in _KEYWORDS else Token(NAME, word, pos, word)
        else:
            op = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
            if op is None:
                raise SelectorError(f"unexpected character {ch!r}", pos)
            token = Token(OPERATOR, op, pos, op)
        tokens.append(token)
        pos += len(token.text)
    tokens.append(Token(END, None, end, ""))
    return tokens


def _string(text: str, start: int) -> Token:
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
        return Token(STRING, raw[1:-1].replace("''", "'"), start, raw)


def _number(text: str, start: int) -> Token:
    match = _NUMBER.match(text, start)
    assert match is not None  # the caller saw a digit, or a point followed by one
    literal = match.group()  # the longest number here; what follows is the next token, as in JavaCC
    if literal[:2] in ("0x", "0X"):
        return Token(INTEGER, int(literal[2:].rstrip("lL"), 16), start, literal)
    if any(c in literal for c in ".eEfFdD"):
        return Token(FLOAT, _float(literal, start), start, literal)
    digits = literal.rstrip("lL")
    if len(digits.lstrip("0")) > _MAX_DIGITS:  # cannot fit a long; int() would refuse over 4,300 digits
        raise SelectorError(f"integer {literal[:24]}… of {len(digits)} digits is out of range for a long", start)
    if len(digits) > 1 and digits[0] == "0":  # Java: a leading zero means octal
        if not set(digits) <= set("01234567"):
            raise SelectorError(f"invalid octal number {literal!r}", start)
        return Token(INTEGER, int(digits, 8), start, literal)
    return Token(INTEGER, int(digits), start, literal)


def _float(literal: str, start: int) -> float:
    value = float(literal.rstrip("fFdD"))  # a magnitude: signs are tokens of their own
    if literal[-1] in "fF":  # a Java float literal: round to single precision, as Java does
        value = math.inf if value >= _JAVA_FLOAT_OVERFLOW else _JAVA_FLOAT.unpack(_JAVA_FLOAT.pack(value))[0]
    if value == math.inf:
        raise SelectorError(f"number {literal!r} is out of range", start)
    return value
