"""Topic selectors in Diffusion's syntax: parsing, path prefixes, matching one path, and intersection.

Owns what a selector expression means. Knows nothing of the tree: ``topics.tree`` walks the tree using the
``prefix`` and the per-segment tests exposed here. Parse once (at attach); a bad expression raises
``SelectorError`` (``amqp:invalid-field``).

Expressions (the first character says the type):

| expression          | type        | selects                                                                  |
|---------------------|-------------|--------------------------------------------------------------------------|
| ``>a/b``            | path        | the topic ``a/b``                                                        |
| ``a/b``             | path        | the same: a bare path, when the first character is none of ``#?>*$%&<``  |
| ``?a/b/c.*``        | split-path  | paths of exactly 3 segments: ``a``, ``b``, then one fully matching c.*   |
| ``*a/.*/x``         | full-path   | paths the regex matches as a whole (RE2, ``topics.regex``)               |
| ``#>a////?b/.*``    | selector set| paths any member selects; members joined by ``////``                     |

Descendant qualifiers, a trailing ``/`` or ``//`` on a path, split-path or full-path expression:
``>a/b/`` selects the descendants of ``a/b`` only, ``>a/b//`` selects ``a/b`` and its descendants. For split
paths the qualifier relaxes the segment count (more than / at least the number of patterns, the extra segments
unchecked); for full paths the regex must match an ancestor-or-self and the rest is any descendant, as Diffusion
does. A run of slashes longer than two is never a qualifier: ``>a///`` is an invalid path.

Path prefix: the longest branch that contains every topic the selector can select.
- path: the path itself, whatever the qualifier.
- split-path: the leading run of literal patterns (no regex metacharacter ``.^$*+?{}[]\\|()``); ``?a/b/.*/c``
  has prefix ``a/b``. A literal pattern is compared as a string, which is what a full regex match of it means.
- full-path: the leading literal characters of the regex, cut back to the last complete segment followed by
  ``/`` (``*a/b/c.*`` → ``a/b``; ``*a/b`` → ``a/b``). A literal character followed by a quantifier does not
  count; a top-level ``|`` or a leading group or flag gives ``""``. Escapes end the literal run. Conservative:
  the prefix may be shorter than it could be, never wrong.
- set: the common prefix of its members.

Decisions where Diffusion is silent or we differ:
- Regexes are RE2 (``topics.regex``: linear-time matching, so no selector can make a match slow), not Java:
  backreferences, lookaround, possessive quantifiers and atomic groups are refused, ``\\d \\w \\s`` are ASCII
  as in Java. Each split-path pattern and the full-path regex are anchored fully.
- Paths are not canonicalised: ``>/a`` and ``?a//b`` are refused rather than read as ``a`` and ``a/b``.
- ``$ % & <`` are reserved first characters (refused); select such a topic with ``>$name``.
- Selector sets may contain bare paths and nested sets (flattened). In a run of four or more slashes the
  last four are the separator, so ``#>a//////>b`` is ``>a//`` and ``>b``.
- ``intersects`` (seed 000) compares path prefixes only; for sets it compares members pairwise, which never
  gives a false negative when every prefix is sound, and fewer false positives than the set's common prefix.
- ``may_select_within(branch)`` answers "could a topic at or below ``branch`` be selected": exact for path and
  split-path selectors (assuming each remaining pattern can match some segment), prefix-only for full-path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

from subgate.topics.errors import SelectorError, TopicPathError
from subgate.topics.paths import SEPARATOR, are_related, common_prefix, is_ancestor_or_self, validate_path
from subgate.topics.regex import Regex, RegexError


class Qualifier(Enum):
    """A descendant qualifier; the value is the expression suffix that writes it."""

    MATCH = ""
    DESCENDANTS = "/"
    MATCH_AND_DESCENDANTS = "//"


PATH = ">"
SPLIT_PATH = "?"
FULL_PATH = "*"
SELECTOR_SET = "#"
RESERVED = frozenset("$%&<")
SET_SEPARATOR = "////"

_REGEX_META = frozenset(".^$*+?{}[]\\|()")
_QUANTIFIERS = frozenset("*+?{")
_QUALIFIED_SUFFIX = {
    Qualifier.MATCH: "",
    Qualifier.DESCENDANTS: "/(?s:.+)",
    Qualifier.MATCH_AND_DESCENDANTS: "(?:/(?s:.+))?",
}


@dataclass(frozen=True)
class PathSelector:
    """``>path``: one topic, or with a qualifier its descendants (``/``) or it and its descendants (``//``)."""

    path: str
    qualifier: Qualifier = Qualifier.MATCH

    def __post_init__(self) -> None:
        try:
            validate_path(self.path)
        except TopicPathError as exc:
            raise SelectorError(self.expression, exc.reason) from exc

    @property
    def prefix(self) -> str:
        return self.path

    @property
    def expression(self) -> str:
        return PATH + self.path + self.qualifier.value

    def matches(self, path: str) -> bool:
        """True when this selector selects the topic path ``path``."""
        if path == self.path:
            return self.qualifier is not Qualifier.DESCENDANTS
        return self.qualifier is not Qualifier.MATCH and path.startswith(self.path + SEPARATOR)

    def may_select_within(self, branch: str) -> bool:
        """True when some topic at or below ``branch`` could be selected."""
        if self.qualifier is Qualifier.MATCH:
            return is_ancestor_or_self(branch, self.path)
        return are_related(branch, self.path)

    def __str__(self) -> str:
        return self.expression


@dataclass(frozen=True)
class SplitPathSelector:
    """``?p1/p2/...``: one regex per segment, each matched against the whole segment at its level."""

    patterns: tuple[str, ...]
    qualifier: Qualifier = Qualifier.MATCH
    prefix: str = field(init=False, compare=False)
    _literals: tuple[str | None, ...] = field(init=False, repr=False, compare=False)
    _compiled: tuple[Regex | None, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.patterns:
            raise SelectorError(self.expression, "a split-path selector needs at least one pattern")
        literals: list[str | None] = []
        compiled: list[Regex | None] = []
        for index, pattern in enumerate(self.patterns, start=1):
            if not pattern:
                raise SelectorError(self.expression, f"pattern {index} is empty")
            if SEPARATOR in pattern:
                raise SelectorError(self.expression, f"pattern {index} contains '/'")
            literal = _is_literal(pattern)
            literals.append(pattern if literal else None)
            compiled.append(None if literal else _compile(pattern, self.expression))
        leading: list[str] = []
        for literal_segment in literals:
            if literal_segment is None:
                break
            leading.append(literal_segment)
        object.__setattr__(self, "_literals", tuple(literals))
        object.__setattr__(self, "_compiled", tuple(compiled))
        object.__setattr__(self, "prefix", SEPARATOR.join(leading))

    @property
    def expression(self) -> str:
        return SPLIT_PATH + SEPARATOR.join(self.patterns) + self.qualifier.value

    @property
    def depth(self) -> int:
        """The number of patterns, i.e. of path levels the selector tests."""
        return len(self.patterns)

    def literal_at(self, index: int) -> str | None:
        """The segment pattern ``index`` (from 0) stands for when it is literal, else None."""
        return self._literals[index]

    def segment_matches(self, index: int, segment: str) -> bool:
        """True when pattern ``index`` (from 0) matches the whole of ``segment``."""
        compiled = self._compiled[index]
        if compiled is None:
            return segment == self._literals[index]
        return compiled.fullmatch(segment)

    def accepts_length(self, segments: int) -> bool:
        """True when a path of this many segments has the length the qualifier asks for."""
        if self.qualifier is Qualifier.MATCH:
            return segments == self.depth
        if self.qualifier is Qualifier.DESCENDANTS:
            return segments > self.depth
        return segments >= self.depth

    def matches(self, path: str) -> bool:
        """True when this selector selects the topic path ``path``."""
        segments = path.split(SEPARATOR)
        return self.accepts_length(len(segments)) and self._leading_match(segments)

    def may_select_within(self, branch: str) -> bool:
        """True when some topic at or below ``branch`` could be selected."""
        segments = branch.split(SEPARATOR) if branch else []
        if len(segments) > self.depth and self.qualifier is Qualifier.MATCH:
            return False
        return self._leading_match(segments)

    def _leading_match(self, segments: list[str]) -> bool:
        return all(self.segment_matches(index, segment) for index, segment in enumerate(segments[: self.depth]))

    def __str__(self) -> str:
        return self.expression


@dataclass(frozen=True)
class FullPathSelector:
    """``*regex``: topics whose whole path the regex matches (with a qualifier: an ancestor-or-self does)."""

    regex: str
    qualifier: Qualifier = Qualifier.MATCH
    prefix: str = field(init=False, compare=False)
    _compiled: Regex = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.regex:
            raise SelectorError(self.expression, "a full-path selector needs a regular expression")
        _compile(self.regex, self.expression)
        qualified = f"(?:{self.regex}){_QUALIFIED_SUFFIX[self.qualifier]}"  # RE2 scopes inline flags to the group
        object.__setattr__(self, "_compiled", _compile(qualified, self.expression))
        object.__setattr__(self, "prefix", _regex_prefix(self.regex))

    @property
    def expression(self) -> str:
        return FULL_PATH + self.regex + self.qualifier.value

    def matches(self, path: str) -> bool:
        """True when this selector selects the topic path ``path``."""
        return self._compiled.fullmatch(path)

    def may_select_within(self, branch: str) -> bool:
        """Prefix-only: True when ``branch`` and the prefix are related (may be a false positive)."""
        return are_related(branch, self.prefix)

    def __str__(self) -> str:
        return self.expression


@dataclass(frozen=True)
class SelectorSet:
    """``#s1////s2``: topics that any member selects. Nested sets are flattened; members keep their order."""

    members: tuple[Selector, ...]
    prefix: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        flat: list[Selector] = []
        for member in self.members:
            flat.extend(member.members if isinstance(member, SelectorSet) else (member,))
        if not flat:
            raise SelectorError(SELECTOR_SET, "a selector set needs at least one selector")
        object.__setattr__(self, "members", tuple(flat))
        object.__setattr__(self, "prefix", common_prefix(member.prefix for member in flat))

    @property
    def expression(self) -> str:
        return SELECTOR_SET + SET_SEPARATOR.join(member.expression for member in self.members)

    def matches(self, path: str) -> bool:
        """True when any member selects ``path``."""
        return any(member.matches(path) for member in self.members)

    def may_select_within(self, branch: str) -> bool:
        """True when any member may select a topic at or below ``branch``."""
        return any(member.may_select_within(branch) for member in self.members)

    def __str__(self) -> str:
        return self.expression


Selector: TypeAlias = PathSelector | SplitPathSelector | FullPathSelector | SelectorSet


def parse_selector(expression: str) -> Selector:
    """Parse a Diffusion topic selector expression (see the module docstring).

    Raises:
        SelectorError: naming the expression as given and the broken rule.
    """
    try:
        return _parse(expression)
    except SelectorError as exc:
        if exc.expression == expression:
            raise
        raise SelectorError(expression, exc.reason) from exc


def as_selector(selector: Selector | str) -> Selector:
    """A parsed selector stays as it is; a string is parsed."""
    return parse_selector(selector) if isinstance(selector, str) else selector


def any_of(*selectors: Selector | str) -> SelectorSet:
    """A selector set of the given selectors or expressions (Diffusion's ``anyOf``)."""
    return SelectorSet(tuple(as_selector(selector) for selector in selectors))


def intersects(a: Selector, b: Selector) -> bool:
    """Seed 000's test: could two selectors select a common topic, judged on path prefixes only?

    Two prefixes intersect when one is an ancestor-or-self of the other (the root ``""`` meets everything).
    A selector set takes part through its members' prefixes.
    """
    return any(are_related(x.prefix, y.prefix) for x in _members(a) for y in _members(b))


def _members(selector: Selector) -> tuple[Selector, ...]:
    return selector.members if isinstance(selector, SelectorSet) else (selector,)


def _parse(expression: str) -> Selector:
    if not expression:
        raise SelectorError(expression, "the expression is empty")
    head, body = expression[0], expression[1:]
    if head == SELECTOR_SET:
        return SelectorSet(tuple(_parse_member(member, expression) for member in _split_set(body)))
    if head in RESERVED:
        raise SelectorError(expression, f"{head!r} is a reserved first character; write '>{expression}' for a path")
    if head not in (PATH, SPLIT_PATH, FULL_PATH):
        head, body = PATH, expression
    body, qualifier = _split_qualifier(body)
    if head == PATH:
        return PathSelector(body, qualifier)
    if head == SPLIT_PATH:
        return SplitPathSelector(tuple(body.split(SEPARATOR)), qualifier)
    return FullPathSelector(body, qualifier)


def _parse_member(member: str, expression: str) -> Selector:
    if not member:
        raise SelectorError(expression, "a selector set has an empty member")
    try:
        return _parse(member)
    except SelectorError as exc:
        raise SelectorError(expression, f"member {member!r}: {exc.reason}") from exc


def _split_set(body: str) -> list[str]:
    """Members of a set body; in each run of 4+ slashes the last four separate, the rest end the member."""
    members: list[str] = []
    start = 0
    for run in re.finditer(r"/{4,}", body):
        members.append(body[start : run.end() - len(SET_SEPARATOR)])
        start = run.end()
    members.append(body[start:])
    return members


def _split_qualifier(body: str) -> tuple[str, Qualifier]:
    if body.endswith(Qualifier.MATCH_AND_DESCENDANTS.value):
        return body[:-2], Qualifier.MATCH_AND_DESCENDANTS
    if body.endswith(Qualifier.DESCENDANTS.value):
        return body[:-1], Qualifier.DESCENDANTS
    return body, Qualifier.MATCH


def _is_literal(pattern: str) -> bool:
    return not any(char in _REGEX_META for char in pattern)


def _compile(pattern: str, expression: str) -> Regex:
    try:
        return Regex(pattern)
    except RegexError as exc:
        raise SelectorError(expression, f"bad regular expression {pattern!r}: {exc.reason}") from exc


def _regex_prefix(regex: str) -> str:
    """The path prefix of a full-path regex (see the module docstring); conservative."""
    if _has_top_level_alternation(regex):
        return ""
    end = 0
    while end < len(regex) and regex[end] not in _REGEX_META:
        end += 1
    literal = regex[:end]
    if end < len(regex):
        if regex[end] in _QUANTIFIERS:
            literal = literal[:-1]
        literal = literal[: max(literal.rfind(SEPARATOR), 0)]
    return _leading_segments(literal.split(SEPARATOR))


def _leading_segments(segments: Iterable[str]) -> str:
    kept: list[str] = []
    for segment in segments:
        if not segment:
            break
        kept.append(segment)
    return SEPARATOR.join(kept)


def _has_top_level_alternation(regex: str) -> bool:
    """True when ``|`` appears outside any group and character class (the regex is known to compile)."""
    depth = 0
    index = 0
    while index < len(regex):
        char = regex[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _class_end(regex, index)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
        index += 1
    return False


def _class_end(regex: str, start: int) -> int:
    """The index of the ``]`` closing the character class opened at ``start``."""
    index = start + 1
    if regex.startswith("^", index):
        index += 1
    if regex.startswith("]", index):
        index += 1  # a ']' first in the class is a literal
    while regex[index] != "]":
        index += 2 if regex[index] == "\\" else 1
    return index
