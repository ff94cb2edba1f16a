"""topics.paths: the path rules and the ancestor arithmetic, one row per case."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import INVALID_FIELD
from subgate.topics.errors import TopicPathError
from subgate.topics.paths import (
    are_related,
    common_prefix,
    is_ancestor_or_self,
    is_descendant,
    is_valid_path,
    join_path,
    parent,
    split_branch,
    split_path,
    validate_path,
)


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("a", ("a",)),
        ("prices/fx/EURUSD", ("prices", "fx", "EURUSD")),
        ("with space/ü/>?*#", ("with space", "ü", ">?*#")),  # any character but '/' is allowed in a segment
        ("$sys/x", ("$sys", "x")),
    ],
)
def test_valid_paths(path, segments):
    assert validate_path(path) == path
    assert is_valid_path(path)
    assert split_path(path) == segments
    assert join_path(segments) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "at least one segment"),
        ("/a", "start with '/'"),
        ("/", "start with '/'"),
        ("a/", "end with '/'"),
        ("a//b", "empty segment"),
        ("a///b", "empty segment"),
    ],
)
def test_invalid_paths(path, reason):
    with pytest.raises(TopicPathError) as caught:
        validate_path(path)
    assert reason in caught.value.reason
    assert caught.value.path == path
    assert caught.value.condition == INVALID_FIELD
    assert repr(path) in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert not is_valid_path(path)


def test_split_branch_accepts_the_root():
    assert split_branch("") == ()
    assert split_branch("a/b") == ("a", "b")
    with pytest.raises(TopicPathError):
        split_branch("a/")


def test_join_path():
    assert join_path([]) == ""
    with pytest.raises(TopicPathError):
        join_path(["a", "", "b"])


@pytest.mark.parametrize(("path", "expected"), [("a", ""), ("a/b", "a"), ("a/b/c", "a/b")])
def test_parent(path, expected):
    assert parent(path) == expected


@pytest.mark.parametrize(
    ("ancestor", "path", "ancestor_or_self", "descendant", "related"),
    [
        ("a", "a", True, False, True),
        ("a", "a/b", True, True, True),
        ("a/b", "a", False, False, True),
        ("a", "ab", False, False, False),  # whole segments only
        ("a/b", "a/bc/d", False, False, False),
        ("a/b", "a/c", False, False, False),
        ("", "a/b", True, True, True),  # the root is everyone's ancestor
        ("", "", True, False, True),
    ],
)
def test_relations(ancestor, path, ancestor_or_self, descendant, related):
    assert is_ancestor_or_self(ancestor, path) is ancestor_or_self
    assert is_descendant(path, ancestor) is descendant
    assert are_related(ancestor, path) is related
    assert are_related(path, ancestor) is related


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        ([], ""),
        (["a/b/c"], "a/b/c"),
        (["a/b/c", "a/b/d"], "a/b"),
        (["a/b/c", "a/b"], "a/b"),
        (["a/bc", "a/b"], "a"),  # by segments, not characters
        (["a/b", "x/y"], ""),
        (["a/b", "", "a"], ""),  # the root as a member
        (["a/b/c", "a/b/c", "a/x"], "a"),
    ],
)
def test_common_prefix(paths, expected):
    assert common_prefix(paths) == expected
