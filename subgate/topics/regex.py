"""The regular-expression engine of topic selectors: RE2 (``google-re2``), which matches in linear time.

Owns how a selector's regex is compiled and matched (``topics.selectors``, ``topics.index``). Python's ``re``
backtracks: ``*(a+)+b`` took 7 s against one topic of 26 ``a``s and doubles with each more ``a``, on the reactor
thread, so one subscriber could stop the server. RE2 never backtracks: its program's size is bounded
(``MAX_PROGRAM_MEMORY``) and a match takes time linear in the path's length (if the pattern's DFA would outgrow
its memory, RE2 falls back to an NFA: linear in the path times the program's size). Pure (no I/O).

RE2's syntax against Java's (Diffusion's) and Python's, for the patterns a topic selector can hold:
- Refused (``RegexError``): backreferences (``\\1``), lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic
  groups and possessive quantifiers (``(?>``, ``a++``), ``\\Z``/``\\z``-style anchors other than ``\\A``/``\\z``
  as RE2 spells them, the ``x`` (verbose) flag, and a counted repetition above 1,000 (``a{1001}``); also any
  pattern whose program would need more than ``MAX_PROGRAM_MEMORY``. Each refusal names RE2's reason.
- Kept: character classes, ``\\d \\w \\s \\b`` (ASCII only, as in Java by default; Python's ``re`` made them
  Unicode), ``\\p{L}``/``\\pL`` Unicode classes (Java has them; Python's ``re`` has not), POSIX ``[[:alpha:]]``,
  non-capturing and named groups (``(?P<n>..)``), flags ``i m s U`` (anywhere, scoped to the group).
Capturing is off: only whether the whole text matches is asked (``fullmatch``).

This uses the wheel's compiled ``_re2.RE2`` directly: the package's ``re``-like wrapper spends ~4 µs a call
in Python bookkeeping for spans, against ~0.6 µs here (Python's ``re`` takes ~0.15 µs on a short path).
"""

from __future__ import annotations

from re2 import _re2  # the compiled extension of google-re2; see the module docstring

MAX_PROGRAM_MEMORY = 1 << 20  # bytes of RE2 program per pattern; more is refused (RE2: "pattern too large")

_ANCHOR_BOTH = _re2.RE2.Anchor.ANCHOR_BOTH
_NO_MATCH = (-1, -1)


class RegexError(ValueError):
    """A pattern RE2 will not compile (bad syntax, a feature it lacks, or too large); ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _options() -> _re2.RE2.Options:
    options = _re2.RE2.Options()
    options.log_errors = False  # RE2 would log every refused pattern to stderr
    options.never_capture = True
    options.max_mem = MAX_PROGRAM_MEMORY
    return options


_OPTIONS = _options()


class Regex:
    """One compiled pattern; ``fullmatch(text)`` is True when the pattern matches the whole of ``text``."""

    __slots__ = ("pattern", "_match")

    def __init__(self, pattern: str) -> None:
        """Raises: RegexError: RE2 refuses the pattern (see the module docstring)."""
        compiled = _re2.RE2(pattern.encode("utf-8", "surrogatepass"), _OPTIONS)
        if not compiled.ok():
            raise RegexError(compiled.error().decode("utf-8", "replace"))
        self.pattern = pattern
        self._match = compiled.Match

    def fullmatch(self, text: str) -> bool:
        encoded = text.encode("utf-8", "surrogatepass")
        return self._match(_ANCHOR_BOTH, encoded, 0, len(encoded))[0] != _NO_MATCH
