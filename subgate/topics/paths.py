"""Topic paths: the validation rules and the ancestor arithmetic everything else in ``topics`` uses.

A topic path is one or more segments joined by ``/`` (``prices/fx/EURUSD``). Rules:

- it is not empty;
- it does not start or end with ``/`` (no canonicalising: ``/a`` is refused, not read as ``a``);
- no segment is empty (``a//b`` is refused);
- a segment is any other run of characters, including spaces and the selector characters ``>?*#``.

The root of the tree is written ``""``. It is not a topic path, but it is a valid *branch* wherever a function
below says so: it is the ancestor of every path and the common prefix of unrelated paths.

Relations are by whole segments: ``a/b`` is an ancestor of ``a/b/c`` but not of ``a/bc``.
"""

from __future__ import annotations

from collections.abc import Iterable

from subgate.topics.errors import TopicPathError

SEPARATOR = "/"


def validate_path(path: str) -> str:
    """Check a topic path against the rules above.

    Returns:
        The path, unchanged.
    Raises:
        TopicPathError: with the broken rule as ``reason``.
    """
    if not path:
        raise TopicPathError(path, "a topic path needs at least one segment")
    if path.startswith(SEPARATOR):
        raise TopicPathError(path, "a topic path must not start with '/'")
    if path.endswith(SEPARATOR):
        raise TopicPathError(path, "a topic path must not end with '/'")
    if SEPARATOR * 2 in path:
        raise TopicPathError(path, "a topic path must not contain an empty segment ('//')")
    return path


def path_problem(path: str) -> str | None:
    """What is wrong with ``path`` as a topic path (the broken rule), or None."""
    try:
        validate_path(path)
    except TopicPathError as exc:
        return exc.reason
    return None


def is_valid_path(path: str) -> bool:
    """True when ``validate_path`` would accept the path."""
    try:
        validate_path(path)
    except TopicPathError:
        return False
    return True


def split_path(path: str) -> tuple[str, ...]:
    """The segments of a valid topic path. Raises TopicPathError."""
    return tuple(validate_path(path).split(SEPARATOR))


def split_branch(branch: str) -> tuple[str, ...]:
    """Like ``split_path``, but also accepts the root ``""`` (no segments)."""
    return () if branch == "" else split_path(branch)


def join_path(segments: Iterable[str]) -> str:
    """Join segments with ``/``; no segments gives the root ``""``. Raises TopicPathError on an empty segment."""
    path = SEPARATOR.join(segments)
    return path if path == "" else validate_path(path)


def parent(path: str) -> str:
    """The parent branch of a topic path: ``a/b`` for ``a/b/c``, the root ``""`` for ``a``."""
    cut = path.rfind(SEPARATOR)
    return "" if cut < 0 else path[:cut]


def is_ancestor_or_self(ancestor: str, path: str) -> bool:
    """True when ``path`` is ``ancestor`` or lies below it, by whole segments. The root is everyone's ancestor."""
    return ancestor == "" or path == ancestor or path.startswith(ancestor + SEPARATOR)


def is_descendant(path: str, ancestor: str) -> bool:
    """True when ``path`` lies strictly below ``ancestor``."""
    return path != ancestor and is_ancestor_or_self(ancestor, path)


def are_related(a: str, b: str) -> bool:
    """True when one branch is the other or an ancestor of it (their subtrees overlap)."""
    return is_ancestor_or_self(a, b) or is_ancestor_or_self(b, a)


def common_prefix(paths: Iterable[str]) -> str:
    """The longest branch that is an ancestor-or-self of every path; ``""`` if none is shared (or no paths)."""
    shared: list[str] | None = None
    for path in paths:
        segments = path.split(SEPARATOR) if path else []
        if shared is None:
            shared = segments
            continue
        length = 0
        for mine, theirs in zip(shared, segments, strict=False):
            if mine != theirs:
                break
            length += 1
        shared = shared[:length]
    return SEPARATOR.join(shared or ())
