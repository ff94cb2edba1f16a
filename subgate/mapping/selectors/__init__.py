"""JMS message selectors (JMS 2.0 §3.8.1.1): parse a selector once, then evaluate it per message.

This package owns the selector language: its tokens (``tokens``), its grammar and the checks made at parse time
(``parser``), and the meaning of every operator under SQL's three-valued logic (``evaluation``); ``base`` holds
what they share. It knows nothing about AMQP or messages: a selector reads values only through
``lookup(name)``, which returns the value of an identifier or None when the message has no such value.
Standard library only.

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

from subgate.mapping.selectors.base import Lookup, Run, SelectorError
from subgate.mapping.selectors.parser import Parser, condition

__all__ = ["Lookup", "Selector", "SelectorError", "parse"]


class Selector:
    """A parsed selector. ``identifiers`` are the names it reads through ``lookup``."""

    __slots__ = ("text", "identifiers", "_run")

    def __init__(self, text: str, run: Run, identifiers: frozenset[str]) -> None:
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
    parser = Parser(text)
    expr = condition(parser.selector())
    return Selector(text, expr.run, frozenset(parser.identifiers))
